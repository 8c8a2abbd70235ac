// The fused decode ops of the CUDA device ([device] fuse = true, kernels/cuda/fused.h): against
// their reference math (kernels/ref/ops_fused.h, the tolerance tests/support/fused_checks.h
// states), bit for bit against the unfused CUDA kernels they replace, and a whole model's
// logits bit for bit fused or not (fp32 and W8A8 int8 linears, which then take the fused
// activation blocks; flash attention with its decode split); the classifier's token choice on the
// GPU (kernels/cuda/classify.h) against ref::argmax / ref::sample_row. Skipped, saying why, where
// no CUDA device is visible.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "cuda_fixtures.h"
#include "fused_checks.h"
#include "inferlab/device/cuda_device.h"
#include "inferlab/model/model.h"
#include "inferlab/model/weights.h"
#include "inferlab/plugin/registry.h"
#include "inferlab/support/rng.h"
#include "kernels/cuda/classify.h"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/quant_linear.h"
#include "kernels/ref/matmul_int8.h"
#include "kernels/ref/ops_fused.h"
#include "model_fixtures.h"

namespace inferlab {
namespace {

using testing::download;
using testing::upload;

template <class T>
void expect_same_bits(const std::vector<T>& got, const std::vector<T>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_EQ(std::memcmp(&got[i], &want[i], sizeof(T)), 0) << what << " [" << i << "]: " << +got[i] << " vs " << +want[i];
}

TEST(CudaFused, OpsMatchTheReferenceMath) {
  INFERLAB_REQUIRE_CUDA();
  auto dev = make_device(DeviceKind::kCuda, 0);
  testing::expect_fused_ops_match_reference(compute_device(*dev, "cuda fused test"));
}

#if INFERLAB_HAVE_CUDA  // the CudaDevice class and the launchers exist only in a CUDA build
std::vector<float> normal(std::size_t n, std::uint64_t seed, double scale = 1.0) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(scale * rng.normal());
  return v;
}

struct Shape {
  int rows, width;
};
const Shape kShapes[] = {{1, 1}, {1, 64}, {3, 129}, {129, 3}, {3, 576}, {2, 2049}, {32, 5632}};

// residual_rmsnorm = add, rmsnorm, quantize_activations(block 32); swiglu_quantize = swiglu,
// quantize_activations: the same bits, every output.
TEST(CudaFused, NormAndSwigluEqualTheUnfusedKernelsBitForBit) {
  INFERLAB_REQUIRE_CUDA();
  auto dev = make_device(DeviceKind::kCuda, 0);
  CudaDevice& cuda = cuda_device(*dev, "cuda fused test");
  for (const Shape& s : kShapes) {
    const std::string what = std::to_string(s.rows) + "x" + std::to_string(s.width);
    const std::size_t n = static_cast<std::size_t>(s.rows) * s.width;
    const std::size_t nb = static_cast<std::size_t>(s.rows) * ref::act_blocks(s.width);
    const auto x0 = normal(n, 1, 3.0), y = normal(n, 2), w = normal(static_cast<std::size_t>(s.width), 3);
    Buffer dy = upload(cuda, y), dw = upload(cuda, w);
    // Unfused.
    Buffer ux = upload(cuda, x0), uout = upload(cuda, std::vector<float>(n)), uq = upload(cuda, std::vector<std::int8_t>(n)),
           us = upload(cuda, std::vector<float>(nb));
    cuda.add(ux.as<float>(), dy.as<float>(), n);
    cuda.rmsnorm(ux.as<float>(), dw.as<float>(), uout.as<float>(), s.rows, s.width, 1e-5f);
    cuda::quantize_activations(uout.as<float>(), nullptr, s.rows, s.width, ref::kActBlock, uq.as<std::int8_t>(),
                               us.as<float>(), cuda.stream());
    // Fused.
    Buffer fx = upload(cuda, x0), fout = upload(cuda, std::vector<float>(n)), fq = upload(cuda, std::vector<std::int8_t>(n)),
           fs = upload(cuda, std::vector<float>(nb));
    cuda.residual_rmsnorm(fx.as<float>(), dy.as<float>(), dw.as<float>(), fout.as<float>(), fq.as<std::int8_t>(),
                          fs.as<float>(), s.rows, s.width, 1e-5f);
    expect_same_bits(download<float>(cuda, fx, n), download<float>(cuda, ux, n), "x " + what);
    expect_same_bits(download<float>(cuda, fout, n), download<float>(cuda, uout, n), "rmsnorm " + what);
    expect_same_bits(download<std::int8_t>(cuda, fq, n), download<std::int8_t>(cuda, uq, n), "codes " + what);
    expect_same_bits(download<float>(cuda, fs, nb), download<float>(cuda, us, nb), "scales " + what);

    const auto gate = normal(n, 4, 2.0), up = normal(n, 5);
    Buffer dup = upload(cuda, up), ug = upload(cuda, gate), fg = upload(cuda, gate);
    cuda.swiglu(ug.as<float>(), dup.as<float>(), n);
    cuda::quantize_activations(ug.as<float>(), nullptr, s.rows, s.width, ref::kActBlock, uq.as<std::int8_t>(),
                               us.as<float>(), cuda.stream());
    cuda.swiglu_quantize(fg.as<float>(), dup.as<float>(), fq.as<std::int8_t>(), fs.as<float>(), s.rows, s.width);
    expect_same_bits(download<float>(cuda, fg, n), download<float>(cuda, ug, n), "swiglu " + what);
    expect_same_bits(download<std::int8_t>(cuda, fq, n), download<std::int8_t>(cuda, uq, n), "swiglu codes " + what);
    expect_same_bits(download<float>(cuda, fs, nb), download<float>(cuda, us, nb), "swiglu scales " + what);
  }
}

TEST(CudaFused, RopeKvWriteEqualsRopeThenKvWriteBitForBit) {
  INFERLAB_REQUIRE_CUDA();
  auto dev = make_device(DeviceKind::kCuda, 0);
  CudaDevice& cuda = cuda_device(*dev, "cuda fused test");
  for (RopeStyle style : {RopeStyle::kInterleaved, RopeStyle::kHalf})
    for (int rows : {1, 3, 129}) {
      const int n_heads = 32, n_kv = 4, hd = 64, n_slots = 400;
      const std::string what = std::to_string(rows) + (style == RopeStyle::kHalf ? " rows, half" : " rows, pairs");
      std::vector<float> inv(hd / 2);
      for (int j = 0; j < hd / 2; ++j) inv[j] = 1.0f / std::pow(10000.0f, static_cast<float>(2 * j) / static_cast<float>(hd));
      const std::size_t qn = static_cast<std::size_t>(rows) * n_heads * hd, kn = static_cast<std::size_t>(rows) * n_kv * hd;
      const std::size_t cn = static_cast<std::size_t>(n_slots) * n_kv * hd;
      const auto q = normal(qn, 6), k = normal(kn, 7), v = normal(kn, 8);
      std::vector<int> pos(rows), slots(rows);
      for (int r = 0; r < rows; ++r) {
        pos[r] = 3000 + r;
        slots[r] = (r * 7 + 5) % n_slots;
      }
      Buffer dv = upload(cuda, v), dpos = upload(cuda, pos), dslots = upload(cuda, slots), dinv = upload(cuda, inv);
      Buffer uq = upload(cuda, q), uk = upload(cuda, k), ukc = upload(cuda, std::vector<float>(cn)),
             uvc = upload(cuda, std::vector<float>(cn));
      cuda.rope(uq.as<float>(), uk.as<float>(), dpos.as<int>(), rows, n_heads, n_kv, hd, dinv.as<float>(), style);
      cuda.kv_write_f32(ukc.as<float>(), uvc.as<float>(), uk.as<float>(), dv.as<float>(), dslots.as<int>(), rows,
                        n_kv * hd);
      Buffer fq = upload(cuda, q), fk = upload(cuda, k), fkc = upload(cuda, std::vector<float>(cn)),
             fvc = upload(cuda, std::vector<float>(cn));
      cuda.rope_kv_write_f32(fq.as<float>(), fk.as<float>(), dv.as<float>(), dpos.as<int>(), dslots.as<int>(), rows,
                             n_heads, n_kv, hd, dinv.as<float>(), style, fkc.as<float>(), fvc.as<float>());
      expect_same_bits(download<float>(cuda, fq, qn), download<float>(cuda, uq, qn), "q " + what);
      expect_same_bits(download<float>(cuda, fk, kn), download<float>(cuda, uk, kn), "k " + what);
      expect_same_bits(download<float>(cuda, fkc, cn), download<float>(cuda, ukc, cn), "k cache " + what);
      expect_same_bits(download<float>(cuda, fvc, cn), download<float>(cuda, uvc, cn), "v cache " + what);
    }
}

// The same for f16 / bf16 caches: rope_kv_write_half stores exactly what rope then
// kv_write_half store (and rotates q and k the same).
TEST(CudaFused, RopeKvWriteHalfEqualsRopeThenKvWriteHalfBitForBit) {
  INFERLAB_REQUIRE_CUDA();
  auto dev = make_device(DeviceKind::kCuda, 0);
  CudaDevice& cuda = cuda_device(*dev, "cuda fused test");
  for (KvDtype dtype : {KvDtype::kF16, KvDtype::kBf16})
    for (int rows : {1, 3, 129}) {
      const int n_heads = 32, n_kv = 4, hd = 64, n_slots = 400;
      const std::string what = std::to_string(rows) + " rows, " + kv_dtype_name(dtype);
      std::vector<float> inv(hd / 2);
      for (int j = 0; j < hd / 2; ++j) inv[j] = 1.0f / std::pow(10000.0f, static_cast<float>(2 * j) / static_cast<float>(hd));
      const std::size_t qn = static_cast<std::size_t>(rows) * n_heads * hd, kn = static_cast<std::size_t>(rows) * n_kv * hd;
      const std::size_t cn = static_cast<std::size_t>(n_slots) * n_kv * hd;
      const auto q = normal(qn, 16), k = normal(kn, 17), v = normal(kn, 18);
      std::vector<int> pos(rows), slots(rows);
      for (int r = 0; r < rows; ++r) {
        pos[r] = 700 + 3 * r;
        slots[r] = (r * 7 + 5) % n_slots;
      }
      Buffer dv = upload(cuda, v), dpos = upload(cuda, pos), dslots = upload(cuda, slots), dinv = upload(cuda, inv);
      const std::vector<std::uint16_t> empty(cn, 0x7777);
      Buffer uq = upload(cuda, q), uk = upload(cuda, k), ukc = upload(cuda, empty), uvc = upload(cuda, empty);
      cuda.rope(uq.as<float>(), uk.as<float>(), dpos.as<int>(), rows, n_heads, n_kv, hd, dinv.as<float>(),
                RopeStyle::kHalf);
      cuda.kv_write_half(dtype, ukc.data(), uvc.data(), uk.as<float>(), dv.as<float>(), dslots.as<int>(), rows,
                         n_kv * hd);
      Buffer fq = upload(cuda, q), fk = upload(cuda, k), fkc = upload(cuda, empty), fvc = upload(cuda, empty);
      cuda.rope_kv_write_half(dtype, fq.as<float>(), fk.as<float>(), dv.as<float>(), dpos.as<int>(), dslots.as<int>(),
                              rows, n_heads, n_kv, hd, dinv.as<float>(), RopeStyle::kHalf, fkc.data(), fvc.data());
      expect_same_bits(download<float>(cuda, fq, qn), download<float>(cuda, uq, qn), "q " + what);
      expect_same_bits(download<std::uint16_t>(cuda, fkc, cn), download<std::uint16_t>(cuda, ukc, cn), "k cache " + what);
      expect_same_bits(download<std::uint16_t>(cuda, fvc, cn), download<std::uint16_t>(cuda, uvc, cn), "v cache " + what);
      std::size_t written = 0;  // the caches really took the rows
      for (std::uint16_t b : download<std::uint16_t>(cuda, fkc, cn)) written += b != 0x7777;
      EXPECT_GT(written, static_cast<std::size_t>(rows) * n_kv * hd / 2) << what;
    }
}

// argmax and the sampled draw exactly the reference's (ties to the lower index, NaN rules; the
// chunked draw of kernels/ref/token_choice.h, bit for bit), for every row and every draw.
TEST(CudaFused, TokenChoiceMatchesTheReference) {
  INFERLAB_REQUIRE_CUDA();
  auto dev = make_device(DeviceKind::kCuda, 0);
  CudaDevice& cuda = cuda_device(*dev, "cuda fused test");
  int compared = 0;
  for (const std::vector<float>& row : testing::token_choice_rows()) {
    const int vocab = static_cast<int>(row.size());
    // Eight copies of the row: several blocks, one per row.
    std::vector<float> rows;
    for (int r = 0; r < 8; ++r) rows.insert(rows.end(), row.begin(), row.end());
    Buffer d_rows = upload(cuda, rows), d_out = upload(cuda, std::vector<int>(8, -1));
    cuda::argmax_rows(d_rows.as<float>(), 8, vocab, d_out.as<int>(), cuda.stream());
    EXPECT_EQ(download<int>(cuda, d_out, 8), std::vector<int>(8, ref::argmax(row.data(), vocab))) << "vocab " << vocab;
    for (double t : {0.5, 1.0, 2.0}) {
      std::vector<double> u(8);
      Rng rng(static_cast<std::uint64_t>(vocab) * 7 + static_cast<std::uint64_t>(t * 10));
      for (double& x : u) x = rng.uniform();
      u[0] = 0.0;
      u[7] = 0.9999999999;
      Buffer d_u = upload(cuda, u);
      cuda::sample_rows(d_rows.as<float>(), 8, vocab, t, d_u.as<double>(), d_out.as<int>(), cuda.stream());
      const std::vector<int> got = download<int>(cuda, d_out, 8);
      for (int r = 0; r < 8; ++r) {
        const int want = ref::sample_row(row.data(), vocab, t, u[static_cast<std::size_t>(r)]);
        EXPECT_EQ(got[static_cast<std::size_t>(r)], want) << "vocab " << vocab << " T " << t << " u " << u[r];
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 16 * 24);
}

#endif  // INFERLAB_HAVE_CUDA

// A 150-token prefill then 6 decode steps; every row's logits.
std::vector<float> run(Model& model, Attention& attention, const KvFormat& format = {}) {
  testing::SequenceRunner runner(model, attention, 16, 0, format);
  std::vector<int> prompt(150);
  for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int>((37 * i + 5) % 500);
  std::vector<float> all = runner.feed_all_logits(prompt);
  for (int t : {3, 17, 60, 2, 11, 250}) {
    const std::vector<float>& l = runner.feed({t});
    all.insert(all.end(), l.begin(), l.end());
  }
  return all;
}

// The model on CUDA, fused or not: the same logits bit for bit, for fp32 linears (fused norm and
// RoPE + KV write) and W8A8 int8 (which also take the fused activation blocks).
TEST(CudaFused, ModelLogitsAreBitIdenticalFusedOrNot) {
  INFERLAB_REQUIRE_CUDA();
  auto dev = make_device(DeviceKind::kCuda, 0);
  Registry registry(Registry::default_search_path());
  ModelConfig c = preset_config("stories260k");
  c.qkv_bias = true;  // the bias adds sit between the linears and the fused RoPE + KV write
  const ModelWeights w = random_weights(c, 5);
  auto attention =
      registry.create_attention("flash", registry.resolve(PluginKind::kAttention, "flash", {}, "test"), *dev);
  const std::vector<std::pair<std::string, std::map<std::string, ParamValue>>> quants = {
      {"none", {}}, {"int8", {{"activations", std::string("int8")}}}};
  for (const auto& [name, params] : quants) {
    SCOPED_TRACE(name);
    auto quant = registry.create_quantization(name, registry.resolve(PluginKind::kQuantization, name, params, "test"), *dev);
    Model model(w, *quant, *dev);
    compute_device(*dev, "test").set_fuse(false);
    const std::vector<float> unfused = run(model, *attention);
    compute_device(*dev, "test").set_fuse(true);
    const std::vector<float> fused = run(model, *attention);
    compute_device(*dev, "test").set_fuse(false);
    expect_same_bits(fused, unfused, "logits");
  }
  // f16 / bf16 KV: the fused RoPE + KV write (rope_kv_write_half) against rope then kv_write_half.
  auto quant = registry.create_quantization("none", registry.resolve(PluginKind::kQuantization, "none", {}, "test"), *dev);
  Model model(w, *quant, *dev);
  for (KvDtype dtype : {KvDtype::kF16, KvDtype::kBf16}) {
    SCOPED_TRACE(kv_dtype_name(dtype));
    compute_device(*dev, "test").set_fuse(false);
    const std::vector<float> unfused = run(model, *attention, KvFormat(dtype));
    compute_device(*dev, "test").set_fuse(true);
    const std::vector<float> fused = run(model, *attention, KvFormat(dtype));
    compute_device(*dev, "test").set_fuse(false);
    expect_same_bits(fused, unfused, "logits");
  }
}

}  // namespace
}  // namespace inferlab
