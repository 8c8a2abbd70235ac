// One-pass attention: each (query row, head) streams its context once, block by block, with an
// online softmax (running max m, running sum l, an accumulator rescaled when m grows), so no
// score row is ever stored. The example of docs/writing-a-plugin.md, section 8.
#include <algorithm>
#include <cmath>
#include <vector>

#include "inferlab/plugin/plugin.h"

namespace {

using namespace inferlab;

class OnePassAttention : public Attention {
 public:
  // q, out: [rows, n_heads, head_dim]; K/V read through the block table, any KV dtype.
  void forward(const AttentionBatch& batch, const KvLayerView& kv, const float* q, float* out,
               Device& device) override {
    check_attention_batch(batch, kv, "attention 'onepass'");
    const int d = batch.head_dim, bs = kv.block_size, heads = batch.n_heads, group = heads / batch.n_kv_heads;
    for (int s = 0; s < batch.n_seqs(); ++s) {
      const int r0 = batch.query_start[s], rows = batch.query_start[s + 1] - r0;
      if (rows == 0) continue;
      const std::span<const int> table = batch.table(s);
      auto one = [&](std::size_t begin, std::size_t end) {
        std::vector<float> acc(static_cast<std::size_t>(d)), row(static_cast<std::size_t>(d));
        for (std::size_t item = begin; item < end; ++item) {
          const int i = static_cast<int>(item) / heads, h = static_cast<int>(item) % heads;
          const int pos = batch.context_len[s] - rows + i;  // row i attends to positions [0, pos]
          const float* qh = q + (static_cast<std::size_t>(r0 + i) * heads + h) * d;
          float m = -INFINITY, l = 0.0f;
          std::fill(acc.begin(), acc.end(), 0.0f);
          for (int b = 0; b * bs <= pos; ++b) {  // each block of the context
            for (int p = b * bs; p <= std::min(pos, b * bs + bs - 1); ++p) {
              const int slot = table[static_cast<std::size_t>(b)] * bs + (p - b * bs);
              const float* k = kv.k_row(slot, h / group, row.data());
              float x = 0.0f;
              for (int c = 0; c < d; ++c) x += qh[c] * k[c];
              x *= batch.scale;
              const float m_new = std::max(m, x), rescale = std::exp(m - m_new), w = std::exp(x - m_new);
              const float* v = kv.v_row(slot, h / group, row.data());
              for (int c = 0; c < d; ++c) acc[c] = acc[c] * rescale + w * v[c];
              l = l * rescale + w;
              m = m_new;
            }
          }
          float* o = out + (static_cast<std::size_t>(r0 + i) * heads + h) * d;
          for (int c = 0; c < d; ++c) o[c] = acc[c] / l;
        }
      };
      cpu_pool(device, "attention 'onepass'").parallel_for(static_cast<std::size_t>(rows * heads), one);
    }
  }
};

PluginDescriptor describe() {
  PluginDescriptor d;
  d.kind = PluginKind::kAttention;
  d.name = "onepass";
  d.version = "0.1.0";
  d.summary = "One pass over the paged context per query row and head, online softmax";
  d.kv_dtypes = {KvDtype::kF32, KvDtype::kInt8, KvDtype::kInt4};  // read through k_row / v_row
  // Where it runs: the CPU (a CUDA implementation would be a second entry, kCuda).
  d.devices = {{DeviceKind::kCpu, [](const PluginContext&) { return std::make_unique<OnePassAttention>(); }}};
  return d;
}

}  // namespace

INFERLAB_PLUGIN(describe)
