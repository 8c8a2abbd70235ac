// Naive paged attention: for every (query row, head) materialise the full score row over the
// visible context in float, softmax it, then sum V weighted by it. Reads K/V once per head
// (GQA groups re-read their kv head), so it is the memory-traffic baseline flash improves on.
#pragma once
#include "inferlab/plugin/attention.h"

namespace inferlab::plugins {

class NaiveAttention final : public Attention {
 public:
  // q:   [rows, n_heads, head_dim]
  // out: [rows, n_heads, head_dim]
  // Work items (row, head) are split over the pool's threads.
  void forward(const AttentionBatch& batch, const KvLayerView& kv, const float* q, float* out,
               Device& device) override;
  // Materialises every score row: S and P in fp32, each written and read back (16 bytes per
  // row, head and key).
  AttentionTraffic traffic(int) const override { return {true, 16, 0}; }
};

}  // namespace inferlab::plugins
