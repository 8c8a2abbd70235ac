// cuda_kernel_roofline: times the CUDA attention and quantized-linear kernels through their
// plugins on the first GPU and prints one markdown row per op with the achieved bandwidth
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

// One decode problem: `seqs` sequences x 1 row at context 4096, f32 KV, through each variant
// (plugin name, its parameters, the row's label).
struct AttentionVariant {
  std::string plugin;
  std::map<std::string, ParamValue> params;
  std::string label;
};
void attention_rows(const Registry& registry, Device& device, int seqs, int n_heads, int n_kv_heads, int head_dim,
                    const std::vector<AttentionVariant>& variants) {
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
  const std::string shape = std::to_string(seqs) + " seqs x ctx 4096, " + std::to_string(n_heads) + "/" +
                            std::to_string(n_kv_heads) + " heads, d " + std::to_string(head_dim) + ", f32 KV";
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
  inferlab::testing::linear_rows(registry, *device);
  return 0;
}
