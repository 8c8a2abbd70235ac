// Online-softmax attention of a block of query vectors over a range of K/V positions, keeping
// the un-normalised state (running max, denominator, weighted V sum) so that partial results
// over disjoint ranges can be merged later with a log-sum-exp rescale. Shared by split_k's
// split-K decode path (one range per split) and its tiled fallback (one range: the whole
// causal prefix). Not a plugin interface; lives in the split_k folder only.
#pragma once
#include <cstddef>
#include <span>
#include <vector>

#include "inferlab/plugin/attention.h"
#include "inferlab/kv/kv_cache.h"

namespace inferlab::plugins::split_k {

// Query rows [row_begin, row_end) (local to the sequence) of `seq`, every query head of the
// GQA group of `kv_head`. Vector v = (r - row_begin) * group + g is query head
// kv_head * group + g of local row r.
struct QueryBlock {
  int seq = 0;
  int kv_head = 0;
  int row_begin = 0;
  int row_end = 0;
  int vectors(int group) const { return (row_end - row_begin) * group; }
};

// Un-normalised softmax state of a block's vectors. A vector that has seen no position has
// max -inf, denom 0 and acc 0, and contributes nothing to a merge.
struct PartialView {
  float* max;    // [vectors]
  float* denom;  // [vectors]
  float* acc;    // [vectors, head_dim]
};

// Sets every vector's state to "nothing seen".
void reset_partial(PartialView state, int vectors, int head_dim);

// Reusable per-thread buffers for attend_range.
struct RangeScratch {
  std::vector<const float*> k_rows, v_rows;  // [tile] K/V vectors of the current tile
  std::vector<float> k_deq, v_deq;           // [tile, head_dim] those rows dequantized (int8 KV)
  std::vector<float> scores;                 // [group, tile]
};

// K/V positions resolved through the block table per tile.
inline constexpr int kPositionTile = 64;

// Folds positions [pos_begin, pos_end) into `state`, each row clipped to the positions it may
// see (causal: position <= its own). q: [rows, n_heads, head_dim] (the batch's).
void attend_range(const AttentionBatch& batch, const KvLayerView& kv, const float* q,
                  const QueryBlock& block, int pos_begin, int pos_end, PartialView state,
                  RangeScratch& scratch);

// out rows of the block = acc / denom. out: [rows, n_heads, head_dim] (the batch's).
void write_normalised(const AttentionBatch& batch, const QueryBlock& block, PartialView state,
                      float* out);

// Merges `parts.size()` partial states of the same block (disjoint position ranges) into out:
// with M = max_j max_j(v), out(v) = sum_j e^(max_j - M) acc_j / sum_j e^(max_j - M) denom_j.
// Every vector must have seen at least one position in some part.
void merge_partials(const AttentionBatch& batch, const QueryBlock& block,
                    std::span<const PartialView> parts, float* out);

}  // namespace inferlab::plugins::split_k
