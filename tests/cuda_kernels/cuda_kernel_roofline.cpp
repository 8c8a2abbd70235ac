// cuda_kernel_roofline: times the CUDA attention and quantized-linear kernels (int8, int4, and
// gguf on a file's own blocks) through their plugins on the first GPU and prints one markdown row per op with the achieved bandwidth
// (bytes the op must move / median time). scripts/gpu_check.sh prints these rows in its op
// table. Without a CUDA device it prints why and exits 0.
//   build/bin/cuda_kernel_roofline
// Warm-up 3 calls, then 20 timed calls (each synchronised); median and the min-max spread.
// The attention batch carries its host arrays, as Model::forward passes it, so the plugins plan
// their launches without downloading; each timed call still ends in a synchronisation.
// A second table times each tensor-core / 128-bit GEMV kernel against the CUDA-core kernel it
// replaces (kernels/cuda/linear_plan.h), launched directly on the same data, in the same run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "attention_fixtures.h"
#include "cuda_test_support.h"
#include "gguf_block_fixtures.h"
#include "inferlab/device/cuda_device.h"
#include "inferlab/error.h"
#include "inferlab/plugin/registry.h"
#include "inferlab/support/rng.h"
#include "test_support.h"

#if INFERLAB_HAVE_CUDA
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemm_lt.h"
#include "kernels/cuda/tensor_core_linear.h"
#include "kernels/ref/matmul_int4.h"
#include "kernels/ref/matmul_int8.h"
#endif

namespace inferlab::testing {
namespace {

struct Timing {
  double median_s = 0, min_s = 0, max_s = 0;
};

Timing time_op(Device& device, const std::function<void()>& op) {
  for (int i = 0; i < 3; ++i) op();
  device.synchronize();
  std::vector<double> t;
  for (int i = 0; i < 20; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    op();
    device.synchronize();
    t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], t.front(), t.back()};
}

void row(const std::string& op, const std::string& shape, double bytes, const Timing& t) {
  std::printf("| %s | %s | %.1f | %.1f-%.1f | %.1f |\n", op.c_str(), shape.c_str(), t.median_s * 1e6, t.min_s * 1e6,
              t.max_s * 1e6, bytes / t.median_s / 1e9);
}

// One decode problem: `seqs` sequences x 1 row at context 4096, K/V stored as `dtype` (f32, or
// f16 / bf16: the bytes moved halve), through each variant (plugin name, its parameters, the
// row's label).
struct AttentionVariant {
  std::string plugin;
  std::map<std::string, ParamValue> params;
  std::string label;
};
void attention_rows(const Registry& registry, Device& device, int seqs, int n_heads, int n_kv_heads, int head_dim,
                    const std::vector<AttentionVariant>& variants, KvDtype dtype = KvDtype::kF32) {
  AttentionProblemSpec spec;
  spec.seqs.assign(static_cast<std::size_t>(seqs), {4096, 1});
  spec.n_heads = n_heads;
  spec.n_kv_heads = n_kv_heads;
  spec.head_dim = head_dim;
  spec.block_size = 16;
  spec.seed = 3;
  const AttentionProblem problem(spec);
  const AttentionBatch hb = problem.batch();
  KvLayerView kv = problem.kv();
  const std::size_t floats = static_cast<std::size_t>(kv.num_blocks) * kv.block_size * kv.n_kv_heads * kv.head_dim;
  Buffer k, v;
  if (kv_dtype_half(dtype)) {  // the 2-byte codes KvStorage would hold (rounded as kv_write_half)
    std::vector<std::uint16_t> hk(floats), hv(floats);
    kv_quantize_row(dtype, 1, static_cast<const float*>(kv.k), static_cast<int>(floats), hk.data(), nullptr);
    kv_quantize_row(dtype, 1, static_cast<const float*>(kv.v), static_cast<int>(floats), hv.data(), nullptr);
    k = to_device(device, hk);
    v = to_device(device, hv);
    kv.k_dtype = kv.v_dtype = dtype;
  } else {
    k = to_device(device, std::vector<float>(static_cast<const float*>(kv.k), static_cast<const float*>(kv.k) + floats));
    v = to_device(device, std::vector<float>(static_cast<const float*>(kv.v), static_cast<const float*>(kv.v) + floats));
  }
  kv.k = k.data();
  kv.v = v.data();
  const std::vector<int> qs(hb.query_start.begin(), hb.query_start.end()),
      cl(hb.context_len.begin(), hb.context_len.end()), bt(hb.block_table.begin(), hb.block_table.end());
  Buffer d_qs = to_device(device, qs), d_cl = to_device(device, cl), d_bt = to_device(device, bt);
  AttentionBatch db = hb;
  db.query_start = {d_qs.as<const int>(), qs.size()};
  db.context_len = {d_cl.as<const int>(), cl.size()};
  db.block_table = {d_bt.as<const int>(), bt.size()};
  db.host_query_start = qs;  // as Model::forward passes the batch: planned without a download
  db.host_context_len = cl;
  db.host_block_table = bt;
  Buffer q = to_device(device, std::vector<float>(problem.q(), problem.q() + problem.out_size()));
  Buffer out = to_device(device, std::vector<float>(problem.out_size()));
  const double bytes = static_cast<double>(problem.kv_floats_read()) * (kv_dtype_half(dtype) ? 2.0 : 4.0);  // K, V once
  const std::string shape = std::to_string(seqs) + " seqs x ctx 4096, " + std::to_string(n_heads) + "/" +
                            std::to_string(n_kv_heads) + " heads, d " + std::to_string(head_dim) + ", " +
                            kv_dtype_name(dtype) + " KV";
  for (const AttentionVariant& v : variants) {
    auto attention = registry.create_attention(
        v.plugin, registry.resolve(PluginKind::kAttention, v.plugin, v.params, "roofline"), device);
    const Timing t = time_op(device, [&] { attention->forward(db, kv, q.as<const float>(), out.as<float>(), device); });
    row("decode attention " + v.label, shape, bytes, t);
  }
}

void linear_rows(const Registry& registry, Device& device) {
  const int out = 4096, in = 4096;
  Rng rng(5);
  std::vector<float> w(static_cast<std::size_t>(out) * in);
  for (float& x : w) x = static_cast<float>(rng.uniform() * 2.0 - 1.0);
  struct Case {
    std::string plugin;
    std::map<std::string, ParamValue> params;
    double weight_bytes;  // what one pass over W moves
    std::string label;
  };
  const double n_w = static_cast<double>(out) * in;
  const std::vector<Case> cases = {
      {"int8", {}, n_w + 4.0 * out, "int8 GEMV (W8A16)"},
      {"int8", {{"activations", std::string("int8")}}, n_w + 4.0 * out, "int8 GEMV (W8A8 dp4a)"},
      {"int4", {{"group_size", std::int64_t{128}}}, n_w / 2 + 5.0 * n_w / 128, "int4 GEMV g128"},
      {"int4", {{"group_size", std::int64_t{128}}, {"activations", std::string("int8")}}, n_w / 2 + 5.0 * n_w / 128,
       "int4 GEMV g128 (W4A8 dp4a)"},
      {"smoothquant", {}, n_w + 4.0 * out, "smoothquant W8A8 per token"},
      {"bf16", {}, 2.0 * n_w, "bf16 (cuBLASLt)"},
  };
  for (const Case& c : cases) {
    auto quant = registry.create_quantization(c.plugin, registry.resolve(PluginKind::kQuantization, c.plugin, c.params, "roofline"), device);
    auto linear = quant->make_linear("layers.0.wq", w, out, in);
    for (int n : {1, 512}) {
      Buffer x = to_device(device, std::vector<float>(static_cast<std::size_t>(n) * in, 0.5f));
      Buffer y = to_device(device, std::vector<float>(static_cast<std::size_t>(n) * out));
      const Timing t = time_op(device, [&] { linear->forward(x.as<const float>(), y.as<float>(), n, device); });
      const double bytes = c.weight_bytes + 4.0 * n * (in + out);
      row(c.label + (n == 1 ? "" : " prefill"), std::to_string(n) + " x 4096 -> 4096", bytes, t);
      if (n > 1)
        std::printf("|   (prefill above: %.1f GFLOP/s) | | | | |\n", 2.0 * n * n_w / t.median_s / 1e9);
    }
  }
}

#if INFERLAB_HAVE_CUDA
// Each new kernel against the one it replaces, 4096 x 4096 weights, decode (1 row) and prefill
// (512 rows); "x old" = old median / new median.
void tensor_core_ab_rows(Device& device) {
  const int out = 4096, in = 4096, gs = 128;
  CudaDevice& cuda = cuda_device(device, "roofline");
  CUstream_st* st = cuda.stream();
  Rng rng(6);
  std::vector<std::int8_t> q(static_cast<std::size_t>(out) * in);
  for (auto& v : q) v = static_cast<std::int8_t>(static_cast<int>(rng.uniform() * 255.0) - 127);
  std::vector<std::uint8_t> packed(static_cast<std::size_t>(out) * ref::int4_row_bytes(in));
  for (auto& v : packed) v = static_cast<std::uint8_t>(rng.uniform() * 256.0);
  const std::vector<float> scale(static_cast<std::size_t>(out) * ref::int4_groups(in, gs), 0.01f);
  const std::vector<std::uint16_t> half(static_cast<std::size_t>(out) * in, 0x3c00);
  Buffer dq = to_device(device, q), dp = to_device(device, packed), ds = to_device(device, scale),
         dh = to_device(device, half);
  const cuda::Int8Weights w8{dq.as<std::int8_t>(), ds.as<float>()};
  const cuda::Int4Weights w4{dp.as<std::uint8_t>(), ds.as<float>(), nullptr, gs};
  cuda::GemmLt lt;
  std::printf("\n| kernel | rows | old us | new us | x old |\n|---|---|---|---|---|\n");
  for (int n : {1, 512}) {
    const std::size_t nx = static_cast<std::size_t>(n) * in, ny = static_cast<std::size_t>(n) * out;
    Buffer x = to_device(device, std::vector<float>(nx, 0.5f)), y(device, ny * sizeof(float));
    Buffer xq = to_device(device, std::vector<std::int8_t>(nx, 3));
    Buffer xh = to_device(device, std::vector<std::uint16_t>(nx, 0x3c00));
    Buffer xs32 = to_device(device, std::vector<float>(static_cast<std::size_t>(n) * ref::act_blocks(in), 0.01f));
    Buffer acc(device, ny * sizeof(std::int32_t));
    const float* xf = x.as<const float>();
    const std::int8_t* xqp = xq.as<std::int8_t>();
    const float* xsp = xs32.as<float>();
    float* yp = y.as<float>();
    struct Pair {
      const char* name;
      std::function<void()> old_op, new_op;
    };
    const std::vector<Pair> pairs = {
        {"W8A8 blocks of 32 (dp4a -> s8 mma / gemv128)",
         [&] { cuda::int8_act_linear(xqp, xsp, 32, w8, yp, n, out, in, st); },
         [&] {
           if (n <= cuda::kDecodeMaxRows)
             cuda::int8_act_linear_gemv128(xqp, xsp, 32, w8, yp, n, out, in, st);
           else
             cuda::int8_act_linear_mma(xqp, xsp, 32, w8, yp, n, out, in, st);
         }},
        {"W8A8 per token (dp4a -> cuBLASLt int8 / gemv128)",
         [&] { cuda::int8_act_linear(xqp, xsp, in, w8, yp, n, out, in, st); },
         [&] {
           if (n <= cuda::kDecodeMaxRows) {
             cuda::int8_act_linear_gemv128(xqp, xsp, in, w8, yp, n, out, in, st);
           } else {
             if (!lt.int8(xqp, w8.q, acc.as<std::int32_t>(), n, out, in, st))
               throw Error("cuBLASLt has no int8 algorithm for 512 x 4096 x 4096");
             cuda::scale_int32_output(acc.as<std::int32_t>(), xsp, w8.scale, yp, n, out, st);
           }
         }},
        {"W4A8 g128 (dp4a -> s8 mma / gemv128)", [&] { cuda::int4_act_linear(xqp, xsp, w4, yp, n, out, in, st); },
         [&] {
           if (n <= cuda::kDecodeMaxRows)
             cuda::int4_act_linear_gemv128(xqp, xsp, w4, yp, n, out, in, st);
           else
             cuda::int4_act_linear_mma(xqp, xsp, w4, yp, n, out, in, st);
         }},
        {"W4A16 g128 (fp32 cores -> bf16 mma / gemv128)", [&] { cuda::int4_linear(xf, w4, yp, n, out, in, st); },
         [&] {
           if (n <= cuda::kDecodeMaxRows)
             cuda::int4_linear_gemv128(xf, w4, yp, n, out, in, st);
           else
             cuda::int4_linear_mma(xf, w4, yp, n, out, in, st);
         }},
        {"W8A16 (fp32 cores -> bf16 mma / gemv128)", [&] { cuda::int8_linear(xf, w8, yp, n, out, in, st); },
         [&] {
           if (n <= cuda::kDecodeMaxRows)
             cuda::int8_linear_gemv128(xf, w8, yp, n, out, in, st);
           else
             cuda::int8_linear_mma(xf, w8, yp, n, out, in, st);
         }},
        {"bf16 (cublasGemmEx -> cuBLASLt)",
         [&] {
           cuda::gemm_half(cuda.cublas(), xh.as<std::uint16_t>(), dh.as<std::uint16_t>(), yp, n, out, in,
                           cuda::HalfType::kBF16);
         },
         [&] {
           lt.half(xh.as<std::uint16_t>(), dh.as<std::uint16_t>(), yp, n, out, in, cuda::HalfType::kBF16, nullptr,
                   false, st);
         }},
    };
    for (const Pair& p : pairs) {
      const Timing a = time_op(device, p.old_op), b = time_op(device, p.new_op);
      std::printf("| %s | %d | %.1f | %.1f | %.2f |\n", p.name, n, a.median_s * 1e6, b.median_s * 1e6,
                  a.median_s / b.median_s);
    }
  }
}
#endif
// quantization/gguf's linears on a GGUF file's own blocks (random blocks of each type CUDA runs):
// the dp4a GEMV at 1 and 32 rows (decode, batched decode), the f16 tiles + cuBLAS at 512.
void gguf_rows(const Registry& registry, Device& device) {
  const int out = 4096, in = 4096;
  const Params params = registry.resolve(PluginKind::kQuantization, "gguf", {}, "roofline");
  for (GgmlType type : {GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ8_0, GgmlType::kQ4_K, GgmlType::kQ6_K}) {
    ModelWeights weights;
    weights.layers.resize(1);
    weights.config.source_linear_types["layers.0.wq"] = static_cast<std::uint32_t>(type);
    std::vector<std::uint8_t> blocks = random_gguf_blocks(type, out, in, 5);
    const double weight_bytes = static_cast<double>(blocks.size());
    weights.set_source_blocks("layers.0.wq", SourceBlocks{static_cast<std::uint32_t>(type), std::move(blocks)});
    auto quant = registry.create_quantization("gguf", params, device, &weights);
    auto linear = quant->make_linear("layers.0.wq", std::vector<float>{}, out, in);
    const std::string name = ggml_type_name(static_cast<std::uint32_t>(type));
    for (int n : {1, 32, 512}) {
      Buffer x = to_device(device, std::vector<float>(static_cast<std::size_t>(n) * in, 0.5f));
      Buffer y = to_device(device, std::vector<float>(static_cast<std::size_t>(n) * out));
      const Timing t = time_op(device, [&] { linear->forward(x.as<const float>(), y.as<float>(), n, device); });
      row("gguf " + name + (n == 512 ? " prefill (f16 tiles + cuBLAS)" : " GEMV (dp4a)"),
          std::to_string(n) + " x 4096 -> 4096", weight_bytes + 4.0 * n * (in + out), t);
      if (n == 512)
        std::printf("|   (prefill above: %.1f GFLOP/s) | | | | |\n", 2.0 * n * out * in / t.median_s / 1e9);
    }
  }
}

}  // namespace
}  // namespace inferlab::testing

int main() {
  using namespace inferlab;
  std::string why;
  if (!cuda_device_visible(why)) {
    std::printf("cuda_kernel_roofline: skipped, no CUDA device visible: %s\n", why.c_str());
    return 0;
  }
  auto device = make_device(DeviceKind::kCuda, 1);
  const Registry registry({inferlab::testing::plugin_dir()});
  std::printf("| op | shape | median us | min-max us | GB/s |\n|---|---|---|---|---|\n");
  using inferlab::testing::attention_rows;
  // 8 sequences of a 32/8-head, d 128 model; then batch 1 of TinyLlama's 32/4 heads, d 64, where
  // flash unsplit launches 4 thread blocks (its decode split: FlashDecoding).
  attention_rows(registry, *device, 8, 32, 8, 128,
                 {{"naive", {}, "naive"}, {"flash", {}, "flash"}, {"split_k", {}, "split_k"}});
  attention_rows(registry, *device, 1, 32, 4, 64,
                 {{"flash", {}, "flash"}, {"flash", {{"decode_split", false}}, "flash decode_split=false"},
                  {"split_k", {}, "split_k"}});
  // The same with bf16 / f16 KV read natively: half the bytes, so at bandwidth half the time.
  attention_rows(registry, *device, 8, 32, 8, 128,
                 {{"naive", {}, "naive"}, {"flash", {}, "flash"}, {"split_k", {}, "split_k"}}, inferlab::KvDtype::kBf16);
  attention_rows(registry, *device, 1, 32, 4, 64, {{"flash", {}, "flash"}, {"split_k", {}, "split_k"}},
                 inferlab::KvDtype::kF16);
  inferlab::testing::linear_rows(registry, *device);
  inferlab::testing::gguf_rows(registry, *device);
#if INFERLAB_HAVE_CUDA
  inferlab::testing::tensor_core_ab_rows(*device);
#endif
  return 0;
}
