// quantization/gguf on CUDA. Host side (runs everywhere): the types refused on cuda before a run
// starts (one line per type, naming it, a tensor and the types allowed there), the CPU-only
// settings refused there, the GEMV/GEMM split and the workspace layout, the untied embedding
// kept on the host, the file's bytes as the planned size. Device side (GgufCuda*, skipped with
// the reason where no GPU is visible): each linear against a double-precision reference and
// against the CPU plugin's output, both paths (GEMV n <= 32, f16 GEMM beyond) and both entries
// (fp32 x, and x as int8 blocks for the fused ops), and whole GGUF
// models against the CPU plugin's next-token distributions.
// Tolerances (stated, unverified on a GPU until scripts/gpu_check.sh runs them):
//   GEMV vs double on the same int8 activation blocks: max |diff| <= 1e-4 * max |y|;
//   GEMM vs double on fp32 activations: <= 5e-3 * max |y| (x and W rounded to f16);
//   either vs the CPU plugin (int8 activation blocks of 32, or 256 for unpacked K-quants):
//   <= 2e-2 * max |y|; models: next-token KL(CPU || CUDA) < 2e-3 at every step.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <limits>
#include <vector>

#include "gguf_block_fixtures.h"
#include "gguf_cuda.h"
#include "gguf_cuda_support.h"
#include "gguf_linear.h"
#include "inferlab/device/cuda_device.h"
#include "inferlab/error.h"
#include "inferlab/formats/checkpoint.h"
#include "inferlab/model/model.h"
#include "inferlab/plugin/registry.h"
#include "inferlab/support/rng.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gguf.h"
#include "kernels/cuda/quant_linear.h"
#include "kernels/ref/matmul_int8.h"
#include "model_fixtures.h"
#include "test_support.h"

namespace inferlab::plugins {
namespace {

// tests/data/gguf/<name>, or a packed build's copy (scripts/pack_gpu_build.sh: $INFERLAB_DATA/gguf).
std::string fixture(const std::string& name) {
  const std::string in_tree = testing::source_dir() + "/tests/data/gguf/" + name;
  return std::filesystem::exists(in_tree) ? in_tree : testing::data_path("gguf/" + name);
}

Params gguf_params(const Registry& reg, const std::string& activations = "int8", bool unpack = true) {
  return reg.resolve(PluginKind::kQuantization, "gguf",
                     {{"activations", ParamValue(activations)}, {"unpack", ParamValue(unpack)}}, "t");
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

TEST(GgufCudaSupport, RefusesOtherTypesOneLinePerTypeNamingTheAllowedOnes) {
  Registry reg({testing::plugin_dir()});
  ModelConfig model;
  model.source_linear_types = {{"layers.0.wq", 12 /* Q4_K */}, {"layers.0.w2", 13 /* Q5_K */},
                               {"layers.1.w2", 13 /* Q5_K */}, {"layers.0.wk", 6 /* Q5_0 */},
                               {"layers.0.wv", 14 /* Q6_K */}, {"classifier", 8 /* Q8_0 */},
                               {"layers.0.w1", 0 /* F32 */},   {"embedding", 23 /* IQ4_XS: host rows */}};
  const auto problems = gguf_cuda_problems(model, gguf_params(reg));
  ASSERT_EQ(problems.size(), 2u);  // Q5_0 and Q5_K, in type order
  EXPECT_TRUE(contains(problems[0], "tensor 'layers.0.wk' is stored as Q5_0")) << problems[0];
  EXPECT_TRUE(contains(problems[1], "tensor 'layers.0.w2' (and 1 more) is stored as Q5_K")) << problems[1];
  for (const std::string& p : problems) {
    EXPECT_TRUE(contains(p, "does not run on cuda (allowed on cuda: Q8_0, Q4_0, Q4_1, Q4_K, Q6_K")) << p;
    EXPECT_EQ(p.find('\n'), std::string::npos);
  }
  // The CPU-only settings.
  ModelConfig ok;
  ok.source_linear_types = {{"layers.0.wq", 2 /* Q4_0 */}};
  EXPECT_TRUE(gguf_cuda_problems(ok, gguf_params(reg)).empty());
  const auto fp32 = gguf_cuda_problems(ok, gguf_params(reg, "fp32"));
  ASSERT_EQ(fp32.size(), 1u);
  EXPECT_TRUE(contains(fp32[0], "activations = \"fp32\" runs on cpu only")) << fp32[0];
  const auto packed = gguf_cuda_problems(ok, gguf_params(reg, "int8", false));
  ASSERT_EQ(packed.size(), 1u);
  EXPECT_TRUE(contains(packed[0], "unpack = false")) << packed[0];
}

// As `inferlab validate` asks, on the committed K-quant files: Q4_K + Q6_K runs on cuda, Q5_K
// does not (and does on the CPU).
TEST(GgufCudaSupport, ValidateRefusesTheQ5KFileOnCudaOnly) {
  Registry reg({testing::plugin_dir()});
  const PluginDescriptor& d = reg.find(PluginKind::kQuantization, "gguf");
  const std::string q4k = fixture("kq256-Q4_K.gguf"), q5k = fixture("kq256-Q5_K.gguf");
  INFERLAB_REQUIRE_FILE(q4k);
  INFERLAB_REQUIRE_FILE(q5k);
  const ModelConfig q4k_model = load_model(q4k).weights.config, q5k_model = load_model(q5k).weights.config;
  const Params params = gguf_params(reg);
  auto reasons = [&](const ModelConfig& m, DeviceKind device) {
    return reg.check_support(PluginKind::kQuantization, "gguf", SupportQuery{m, device, {}, params});
  };
  EXPECT_TRUE(reasons(q5k_model, DeviceKind::kCpu).empty());
#if INFERLAB_HAVE_CUDA
  EXPECT_EQ(d.device_names(), "cpu, cuda");
  EXPECT_TRUE(reasons(q4k_model, DeviceKind::kCuda).empty());
  const auto refused = reasons(q5k_model, DeviceKind::kCuda);
  ASSERT_EQ(refused.size(), 1u);
  EXPECT_TRUE(contains(refused[0], "is stored as Q5_K, which quantization 'gguf' does not run on cuda")) << refused[0];
  EXPECT_TRUE(contains(refused[0], "allowed on cuda: Q8_0, Q4_0, Q4_1, Q4_K, Q6_K")) << refused[0];
#else
  EXPECT_EQ(d.device_names(), "cpu");  // a build without CUDA has no cuda implementation
  EXPECT_FALSE(reasons(q4k_model, DeviceKind::kCuda).empty());
#endif
}

TEST(GgufCudaSupport, PlanSplitsGemvFromGemmAndLaysOutTheWorkspace) {
  const int out = 2048, in = 5632;
  for (int n : {1, 3, cuda::kGgufGemvRows, cuda::kGgufGemvRows + 1, cuda::kGgufGemvMaxRows}) {
    const GgufCudaPlan p = gguf_cuda_plan(n, out, in);
    EXPECT_TRUE(p.gemv) << n;
    EXPECT_EQ(p.tile_rows, 0);
    EXPECT_EQ(p.second % 256, 0u);
    EXPECT_GE(p.second, static_cast<std::size_t>(n) * in);                               // xq [n, in] int8
    EXPECT_EQ(p.bytes, p.second + static_cast<std::size_t>(n) * in / 32 * sizeof(float));  // xs [n, in / 32]
  }
  const GgufCudaPlan g = gguf_cuda_plan(cuda::kGgufGemvMaxRows + 1, out, in);
  EXPECT_FALSE(g.gemv);
  EXPECT_EQ(g.tile_rows, out);  // 2048 x 5632 halves = 22 MiB: one tile
  EXPECT_EQ(g.second % 256, 0u);
  EXPECT_GE(g.second, static_cast<std::size_t>(cuda::kGgufGemvMaxRows + 1) * in * 2);  // xh [n, in] f16
  EXPECT_EQ(g.bytes, g.second + static_cast<std::size_t>(out) * in * 2);
  // Large matrices are cut into tiles of a multiple of 128 rows within kGgufTileBytes.
  EXPECT_EQ(gguf_cuda_tile_rows(32000, 2048), 8192);
  EXPECT_EQ(gguf_cuda_tile_rows(128256, 4096), 4096);
  EXPECT_EQ(gguf_cuda_tile_rows(4096, 14336), 1152);  // 32 MiB / 28 KiB = 1170 rows, down to 9 x 128
  EXPECT_EQ(gguf_cuda_tile_rows(100, 1 << 20), 100);  // never more rows than W, at least 128 else
  EXPECT_EQ(gguf_cuda_tile_rows(1000, 1 << 20), 128);
}

#if INFERLAB_HAVE_CUDA

using testing::error_of;

ModelWeights weights_with(const std::string& name, GgmlType type, std::vector<std::uint8_t> blocks) {
  ModelWeights w;
  w.layers.resize(1);
  w.config.source_linear_types[name] = static_cast<std::uint32_t>(type);
  w.set_source_blocks(name, SourceBlocks{static_cast<std::uint32_t>(type), std::move(blocks)});
  return w;
}

// What GgufCudaQuantization decides on the host, with no GPU touched: the planned size is the
// file's bytes, an untied embedding stays a host linear, other types are refused by name, and a
// native linear asks for the cuda device.
TEST(GgufCudaSupport, CudaQuantizationPlacesAndRefusesOnTheHost) {
  CpuDevice cpu(1);
  const int out = 4, in = 256;
  ModelConfig cfg;
  cfg.source_linear_types = {{"layers.0.wq", 12 /* Q4_K */}};
  {
    GgufCudaQuantization q(nullptr, cpu);
    EXPECT_EQ(q.planned_bytes("layers.0.wq", out, in, cfg), ggml_tensor_bytes(GgmlType::kQ4_K, out * in));
  }
  const ModelWeights emb = weights_with("embedding", GgmlType::kQ5_K, testing::random_gguf_blocks(GgmlType::kQ5_K, out, in, 1));
  GgufCudaQuantization q_emb(&emb, cpu);
  const auto table = q_emb.make_linear("embedding", std::vector<float>{}, out, in);
  const auto* host = dynamic_cast<const GgufBlockLinear*>(table.get());
  ASSERT_NE(host, nullptr);
  EXPECT_FALSE(host->packed());  // rows only: kept as the file's blocks

  const ModelWeights q5k = weights_with("layers.0.w2", GgmlType::kQ5_K, testing::random_gguf_blocks(GgmlType::kQ5_K, out, in, 2));
  GgufCudaQuantization q_q5k(&q5k, cpu);
  EXPECT_TRUE(contains(error_of([&] { q_q5k.make_linear("layers.0.w2", std::vector<float>{}, out, in); }),
                       "Q5_K blocks do not run on cuda (allowed on cuda: Q8_0"));
  const ModelWeights q4k = weights_with("layers.0.wq", GgmlType::kQ4_K, testing::random_gguf_blocks(GgmlType::kQ4_K, out, in, 3));
  GgufCudaQuantization q_q4k(&q4k, cpu);
  EXPECT_TRUE(contains(error_of([&] { q_q4k.make_linear("layers.0.wq", std::vector<float>{}, out, in); }), "expected the cuda device"));
}

// ---- on the GPU ---------------------------------------------------------------------------------

std::vector<float> gaussian(std::size_t count, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(count);
  for (float& f : v) f = static_cast<float>(rng.normal());
  return v;
}

// max |a - b| / max |b|, NaN in a counts as infinite.
double relative_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double d = 0, m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double e = std::fabs(static_cast<double>(a[i]) - b[i]);
    d = std::max(d, std::isnan(e) ? std::numeric_limits<double>::infinity() : e);
    m = std::max(m, std::fabs(static_cast<double>(b[i])));
  }
  return d / m;
}

// y = x · Wᵀ in double; with act_blocks, x replaced by its int8 blocks of 32 (xq * xs).
std::vector<float> reference(const std::vector<float>& w, std::vector<float> x, int n, int out, int in,
                             bool act_blocks) {
  if (act_blocks) {
    std::vector<std::int8_t> xq(x.size());
    std::vector<float> xs(x.size() / 32);
    ref::quantize_act_rows(x.data(), n, in, xq.data(), xs.data());
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(xq[i]) * xs[i / 32];
  }
  std::vector<float> y(static_cast<std::size_t>(n) * out);
  for (int r = 0; r < n; ++r)
    for (int o = 0; o < out; ++o) {
      double acc = 0;
      for (int i = 0; i < in; ++i)
        acc += static_cast<double>(x[static_cast<std::size_t>(r) * in + i]) * w[static_cast<std::size_t>(o) * in + i];
      y[static_cast<std::size_t>(r) * out + o] = static_cast<float>(acc);
    }
  return y;
}

TEST(GgufCuda, LinearsMatchTheReferenceAndTheCpuPluginOnBothPaths) {
  INFERLAB_REQUIRE_CUDA();
  auto gpu = make_device(DeviceKind::kCuda, 0);
  CpuDevice cpu(2);
  struct Shape {
    int out, in;
  };
  for (Shape s : {Shape{37, 512}, Shape{130, 768}})
    for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
      SCOPED_TRACE(ggml_type_name(static_cast<std::uint32_t>(type)) + " " + std::to_string(s.out) + "x" +
                   std::to_string(s.in));
      const std::vector<std::uint8_t> blocks = testing::random_gguf_blocks(type, s.out, s.in, 17);
      std::vector<float> w(static_cast<std::size_t>(s.out) * s.in);
      dequantize(type, blocks.data(), w.size(), w.data());
      const ModelWeights weights = weights_with("layers.0.w1", type, blocks);
      GgufQuantization cpu_q(&weights, /*int8_activations=*/true);
      GgufCudaQuantization gpu_q(&weights, *gpu);
      const auto cpu_linear = cpu_q.make_linear("layers.0.w1", std::vector<float>{}, s.out, s.in);
      const auto gpu_linear = gpu_q.make_linear("layers.0.w1", std::vector<float>{}, s.out, s.in);
      ASSERT_NE(dynamic_cast<const GgufCudaLinear*>(gpu_linear.get()), nullptr);
      EXPECT_EQ(gpu_linear->weight_bytes(), blocks.size());  // the file's bytes, as stored
      std::vector<float> row(static_cast<std::size_t>(s.in));
      gpu_linear->dequantize_row(s.out - 1, row.data());
      EXPECT_TRUE(std::equal(row.begin(), row.end(), w.end() - s.in));
      for (int n : {1, 3, 8, 9, 17, 32, 33, 40}) {  // GEMV: one group, partial, whole and rest; GEMM
        SCOPED_TRACE("rows " + std::to_string(n));
        const std::vector<float> x = gaussian(static_cast<std::size_t>(n) * s.in, 100 + n);
        std::vector<float> y_cpu(static_cast<std::size_t>(n) * s.out);
        cpu_linear->forward(x.data(), y_cpu.data(), n, cpu);
        Buffer dx(*gpu, x.size() * sizeof(float)), dy(*gpu, y_cpu.size() * sizeof(float));
        gpu->copy_to_device(dx.data(), x.data(), x.size() * sizeof(float));
        const std::vector<float> nan(y_cpu.size(), std::numeric_limits<float>::quiet_NaN());
        gpu->copy_to_device(dy.data(), nan.data(), nan.size() * sizeof(float));
        gpu_linear->forward(dx.as<float>(), dy.as<float>(), n, *gpu);
        std::vector<float> y(y_cpu.size());
        gpu->copy_to_host(y.data(), dy.data(), y.size() * sizeof(float));
        const bool gemv = n <= cuda::kGgufGemvMaxRows;
        const double to_ref = relative_diff(y, reference(w, x, n, s.out, s.in, gemv));
        EXPECT_LE(to_ref, gemv ? 1e-4 : 5e-3);
        EXPECT_LE(relative_diff(y, y_cpu), 2e-2);
        // The fused entry: x quantised per 32 on the GPU and handed over as blocks — the GEMV's
        // own input, so the same bits; the GEMM widens the blocks to f16.
        CudaDevice& cuda = cuda_device(*gpu, "test");
        Buffer dxq(*gpu, x.size()), dxs(*gpu, x.size() / 32 * sizeof(float));
        cuda::quantize_activations(dx.as<float>(), nullptr, n, s.in, 32, dxq.as<std::int8_t>(), dxs.as<float>(),
                                   cuda.stream());
        gpu->copy_to_device(dy.data(), nan.data(), nan.size() * sizeof(float));
        ASSERT_TRUE(gpu_linear->reads_act_blocks());
        gpu_linear->forward_act_blocks(dxq.as<std::int8_t>(), dxs.as<float>(), dy.as<float>(), n, *gpu);
        std::vector<float> y_blocks(y.size());
        gpu->copy_to_host(y_blocks.data(), dy.data(), y_blocks.size() * sizeof(float));
        if (gemv)
          EXPECT_EQ(y_blocks, y);
        else
          EXPECT_LE(relative_diff(y_blocks, reference(w, x, n, s.out, s.in, true)), 5e-3);
      }
      // The GEMM in tiles of 32 rows (the last one partial: 37 and 130 rows), as a matrix larger
      // than kGgufTileBytes runs; y starts NaN, so a column no tile wrote fails.
      const int n = 40;
      const std::vector<float> x = gaussian(static_cast<std::size_t>(n) * s.in, 7);
      CudaDevice& cuda = cuda_device(*gpu, "test");
      Buffer dw(*gpu, blocks.size()), dx(*gpu, x.size() * sizeof(float)), dxh(*gpu, x.size() * 2),
          dtile(*gpu, static_cast<std::size_t>(32) * s.in * 2), dy(*gpu, static_cast<std::size_t>(n) * s.out * 4);
      gpu->copy_to_device(dw.data(), blocks.data(), blocks.size());
      gpu->copy_to_device(dx.data(), x.data(), x.size() * sizeof(float));
      const std::vector<float> nan(static_cast<std::size_t>(n) * s.out, std::numeric_limits<float>::quiet_NaN());
      gpu->copy_to_device(dy.data(), nan.data(), nan.size() * sizeof(float));
      cuda::convert_f32_to_half(dx.as<float>(), dxh.as<std::uint16_t>(), x.size(), cuda::HalfType::kF16, cuda.stream());
      cuda::gguf_gemm_f16(cuda.cublas(), cuda.stream(), type, dw.as<std::uint8_t>(), dxh.as<std::uint16_t>(),
                          dtile.as<std::uint16_t>(), 32, dy.as<float>(), n, s.out, s.in);
      std::vector<float> y(nan.size());
      gpu->copy_to_host(y.data(), dy.data(), y.size() * sizeof(float));
      EXPECT_LE(relative_diff(y, reference(w, x, n, s.out, s.in, false)), 5e-3) << "tiles of 32 rows";
    }
}

// max over rows of KL(softmax(p) || softmax(q)) in double.
double max_kl(const std::vector<float>& p, const std::vector<float>& q, int vocab) {
  double worst = 0;
  for (std::size_t r = 0; r * vocab < p.size(); ++r) {
    const float* a = &p[r * vocab];
    const float* b = &q[r * vocab];
    const double ma = *std::max_element(a, a + vocab), mb = *std::max_element(b, b + vocab);
    double sa = 0, sb = 0;
    for (int i = 0; i < vocab; ++i) {
      sa += std::exp(a[i] - ma);
      sb += std::exp(b[i] - mb);
    }
    double kl = 0;
    for (int i = 0; i < vocab; ++i) {
      const double la = a[i] - ma - std::log(sa), lb = b[i] - mb - std::log(sb);
      kl += std::exp(la) * (la - lb);
    }
    worst = std::max(worst, kl);
  }
  return worst;
}

// Whole models: a 40-token prompt in one step (the GEMM on every linear), then 6 single tokens
// (the GEMV), on the GPU and through the CPU plugin; Q8_0 / Q4_0 / Q4_1 files hold F32 ffn_down
// tensors too (FloatCudaLinear), the K-quant file Q4_K and Q6_K.
TEST(GgufCuda, ModelsMatchTheCpuPluginsNextTokenDistributions) {
  INFERLAB_REQUIRE_CUDA();
  Registry reg(Registry::default_search_path());
  if (reg.find(PluginKind::kAttention, "naive").devices.count(DeviceKind::kCuda) == 0)
    GTEST_SKIP() << "attention 'naive' has no CUDA path in this build";
  auto gpu = make_device(DeviceKind::kCuda, 0);
  CpuDevice cpu(2);
  const Params params = gguf_params(reg);
  for (const char* file : {"stories260K-Q8_0.gguf", "stories260K-Q4_0.gguf", "stories260K-Q4_1.gguf",
                           "kq256-Q4_K.gguf"}) {
    SCOPED_TRACE(file);
    const std::string path = fixture(file);
    INFERLAB_REQUIRE_FILE(path);
    const LoadedModel m = load_model(path);
    const int vocab = m.weights.config.vocab_size;
    std::vector<int> prompt(40);
    for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int>((i * 31 + 7) % static_cast<std::size_t>(vocab));
    auto cpu_q = reg.create_quantization("gguf", params, cpu, &m.weights);
    auto gpu_q = reg.create_quantization("gguf", params, *gpu, &m.weights);
    Model cpu_model(m.weights, *cpu_q, cpu);
    Model gpu_model(m.weights, *gpu_q, *gpu);
    testing::RefAttention ref_attention;
    auto gpu_attention = reg.create_attention("naive", reg.resolve(PluginKind::kAttention, "naive", {}, "t"), *gpu);
    testing::SequenceRunner cpu_run(cpu_model, ref_attention, 16);
    testing::SequenceRunner gpu_run(gpu_model, *gpu_attention, 16);
    const std::vector<float> p = cpu_run.feed_all_logits(prompt);
    const std::vector<float> q = gpu_run.feed_all_logits(prompt);
    ASSERT_EQ(p.size(), q.size());
    EXPECT_LT(max_kl(p, q, vocab), 2e-3) << "prefill";
    for (int step = 0; step < 6; ++step) {
      const std::vector<int> next = {static_cast<int>((step * 13 + 5) % vocab)};
      const std::vector<float> pd = cpu_run.feed(next);
      const std::vector<float> qd = gpu_run.feed(next);
      EXPECT_LT(max_kl(pd, qd, vocab), 2e-3) << "decode step " << step;
    }
  }
}

#else

TEST(GgufCuda, SkippedWithoutCuda) { GTEST_SKIP() << "this build has no CUDA (INFERLAB_CUDA=OFF or no nvcc)"; }

#endif  // INFERLAB_HAVE_CUDA

}  // namespace
}  // namespace inferlab::plugins
