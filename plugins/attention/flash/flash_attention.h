// Flash paged attention (FlashAttention-2 style, on CPU): K/V are streamed in tiles of `tile`
// tokens through the block table and each query keeps a running max, denominator and
// un-normalised output, rescaled when the max grows (online softmax); no score row over the
// whole context ever exists. The query rows of one (sequence, kv head) — up to `query_rows`
// rows times every query head of the GQA group — share each K/V tile, so a prefill chunk
// reads its K/V once per row tile instead of once per (row, head).
#pragma once
#include "inferlab/plugin/attention.h"

namespace inferlab::plugins {

class FlashAttention final : public Attention {
 public:
  static constexpr int kDefaultTile = 64;
  static constexpr int kDefaultQueryRows = 16;

  // tile: K/V tokens per tile (>= 1). query_rows: rows of one sequence processed together.
  // lanes: one-row items whose GQA group fits a machine vector (decode) run the lane kernels
  // (flash_tile_kernels.h); false runs them as any other item (the ablation of that path, CPU).
  explicit FlashAttention(int tile = kDefaultTile, int query_rows = kDefaultQueryRows, bool lanes = true);

  // q:   [rows, n_heads, head_dim]
  // out: [rows, n_heads, head_dim]
  // Work items (sequence, kv head, query-row tile) are split over the pool's threads.
  void forward(const AttentionBatch& batch, const KvLayerView& kv, const float* q, float* out,
               Device& device) override;
  // Online softmax over K/V tiles: scores stay on chip; nothing beyond Q, K/V and the output.
  AttentionTraffic traffic(int) const override { return {true, 0, 0}; }

  int tile() const { return tile_; }
  int query_rows() const { return query_rows_; }
  bool lanes() const { return lanes_; }

 private:
  int tile_;
  int query_rows_;
  bool lanes_;
};

}  // namespace inferlab::plugins
