// Split-K paged attention (Flash-Decoding, Dao et al. 2023) on the CPU. A sequence with few
// query rows (decode, speculative verify: at most `max_query_rows`) has its K/V range cut into
// `splits` chunks that run as independent work items, each an online softmax over its chunk
// that leaves an un-normalised partial (running max, denominator, weighted V sum); a second
// pass merges a sequence's partials with a log-sum-exp rescale. This gives a long-context decode
// n_kv_heads * splits items instead of n_kv_heads. Sequences with more rows (prefill chunks)
// run a tiled online softmax over their whole causal prefix, without splitting.
#pragma once
#include <vector>

#include "inferlab/plugin/attention.h"

namespace inferlab::plugins {

class SplitKAttention final : public Attention {
 public:
  static constexpr int kAutoSplits = 0;
  static constexpr int kDefaultMinSplitTokens = 256;
  static constexpr int kDefaultMaxQueryRows = 4;
  static constexpr int kMaxSplits = 4096;
  // Query rows of a prefill sequence processed together on the tiled path.
  static constexpr int kPrefillRowBlock = 16;

  // splits: K/V chunks per split-path sequence (0 = auto, see plan()). min_split_tokens:
  // smallest chunk auto will make. max_query_rows: most rows a sequence may have and still split.
  explicit SplitKAttention(int splits = kAutoSplits, int min_split_tokens = kDefaultMinSplitTokens,
                           int max_query_rows = kDefaultMaxQueryRows);

  // q:   [rows, n_heads, head_dim]
  // out: [rows, n_heads, head_dim]
  void forward(const AttentionBatch& batch, const KvLayerView& kv, const float* q, float* out,
               Device& device) override;

  // Chunks per sequence: [n_seqs]. 0 for a sequence with no rows or more than max_query_rows
  // rows (tiled path). Otherwise forced splits, or with splits = 0 the smallest count with
  // n_split_seqs * n_kv_heads * splits >= 4 * threads, lowered so that every chunk holds at
  // least min_split_tokens tokens (but at least 1); never more than the context length.
  std::vector<int> plan(const AttentionBatch& batch, int threads) const;

  // No score rows; each split of a sequence of at most max_query_rows rows leaves a partial
  // (head_dim outputs, running max and denominator, fp32) written and read back by the merge:
  // `splits` per (row, head), or with automatic splits one per min_split_tokens keys.
  AttentionTraffic traffic(int head_dim) const override {
    const double partial = (head_dim + 2) * 4.0 * 2;
    if (splits_ > 0) return {true, 0, splits_ * partial, 0, max_query_rows_};
    return {true, 0, 0, partial / min_split_tokens_, max_query_rows_};
  }

  int splits() const { return splits_; }
  int min_split_tokens() const { return min_split_tokens_; }
  int max_query_rows() const { return max_query_rows_; }

 private:
  int splits_;
  int min_split_tokens_;
  int max_query_rows_;
};

}  // namespace inferlab::plugins
