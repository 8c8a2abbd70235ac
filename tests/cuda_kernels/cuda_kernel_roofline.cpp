// cuda_kernel_roofline: times the CUDA attention and quantized-linear kernels (int8, int4, and
// gguf on a file's own blocks) through their plugins on the first GPU and prints one markdown row per op with the achieved bandwidth
// (bytes the op must move / median time). scripts/gpu_check.sh prints these rows in its op
// table. Without a CUDA device it prints why and exits 0.
//   build/bin/cuda_kernel_roofline
// Warm-up 3 calls, then 20 timed calls (each synchronised); median and the min-max spread.
// The attention batch carries its host arrays, as Model::forward passes it, so the plugins plan
// their launches without downloading; each timed call still ends in a synchronisation.
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
#include "inferlab/plugin/registry.h"
#include "inferlab/support/rng.h"
#include "test_support.h"

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

void attention_rows(const Registry& registry, Device& device) {
  // Decode: 8 sequences x 1 row at context 4096, 32 heads over 8 kv heads, head_dim 128, f32 KV.
  AttentionProblemSpec spec;
  spec.seqs.assign(8, {4096, 1});
  spec.n_heads = 32;
  spec.n_kv_heads = 8;
  spec.head_dim = 128;
  spec.block_size = 16;
  spec.seed = 3;
  const AttentionProblem problem(spec);
  const AttentionBatch hb = problem.batch();
  KvLayerView kv = problem.kv();
  const std::size_t floats = static_cast<std::size_t>(kv.num_blocks) * kv.block_size * kv.n_kv_heads * kv.head_dim;
  Buffer k = to_device(device, std::vector<float>(static_cast<const float*>(kv.k), static_cast<const float*>(kv.k) + floats));
  Buffer v = to_device(device, std::vector<float>(static_cast<const float*>(kv.v), static_cast<const float*>(kv.v) + floats));
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
  const double bytes = static_cast<double>(problem.kv_floats_read()) * 4.0;  // K and V once
  for (const std::string name : {"naive", "flash", "split_k"}) {
    auto attention = registry.create_attention(name, registry.resolve(PluginKind::kAttention, name, {}, "roofline"), device);
    const Timing t = time_op(device, [&] { attention->forward(db, kv, q.as<const float>(), out.as<float>(), device); });
    row("decode attention " + name, "8 seqs x ctx 4096, 32/8 heads, d 128, f32 KV", bytes, t);
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
  inferlab::testing::attention_rows(registry, *device);
  inferlab::testing::linear_rows(registry, *device);
  inferlab::testing::gguf_rows(registry, *device);
  return 0;
}
