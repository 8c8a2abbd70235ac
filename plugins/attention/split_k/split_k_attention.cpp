#include "split_k_attention.h"

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "inferlab/error.h"
#include "kernels/ref/attention.h"
#include "partial_attention.h"

namespace inferlab::plugins {

namespace split_k {
namespace {

// One parallel work item: a block of query vectors over positions [pos_begin, pos_end).
// partial < 0: the range is the block's whole causal prefix and the item writes `out` itself.
// partial >= 0: the item is one split of a sequence and leaves its state at that offset (in
// vectors) of the partial buffers, for the merge pass.
struct Item {
  QueryBlock block;
  int pos_begin;
  int pos_end;
  std::ptrdiff_t partial;
  long long cost() const {
    return static_cast<long long>(pos_end - pos_begin) * (block.row_end - block.row_begin);
  }
};

// A split sequence's kv head whose partials need merging: `splits` consecutive partial states
// of block.vectors(group) vectors each, starting at `partial`.
struct Merge {
  QueryBlock block;
  int splits;
  std::ptrdiff_t partial;
};

}  // namespace
}  // namespace split_k

SplitKAttention::SplitKAttention(int splits, int min_split_tokens, int max_query_rows)
    : splits_(splits), min_split_tokens_(min_split_tokens), max_query_rows_(max_query_rows) {
  check(splits >= 0 && splits <= kMaxSplits,
        "attention 'split_k': splits must lie in [0, 4096] (0 = auto), got " +
            std::to_string(splits));
  check(min_split_tokens >= 1 && min_split_tokens <= (1 << 20),
        "attention 'split_k': min_split_tokens must lie in [1, 1048576], got " +
            std::to_string(min_split_tokens));
  check(max_query_rows >= 1 && max_query_rows <= 4096,
        "attention 'split_k': max_query_rows must lie in [1, 4096], got " +
            std::to_string(max_query_rows));
}

std::vector<int> SplitKAttention::plan(const AttentionBatch& batch, int threads) const {
  std::vector<int> splits(static_cast<std::size_t>(batch.n_seqs()), 0);
  const auto rows_of = [&](std::size_t s) {
    return batch.query_start[s + 1] - batch.query_start[s];
  };
  long long split_seqs = 0;
  for (std::size_t s = 0; s < splits.size(); ++s)
    if (rows_of(s) >= 1 && rows_of(s) <= max_query_rows_) ++split_seqs;
  if (split_seqs == 0) return splits;
  // Auto: enough items for 4 per thread, so uneven chunks and a busy machine still balance.
  const long long heads = split_seqs * std::max(batch.n_kv_heads, 1);
  const long long wanted = (4LL * std::max(threads, 1) + heads - 1) / heads;
  for (std::size_t s = 0; s < splits.size(); ++s) {
    if (rows_of(s) < 1 || rows_of(s) > max_query_rows_) continue;
    const int ctx = batch.context_len[s];
    long long n = splits_;
    if (n == kAutoSplits) n = std::min(wanted, std::max(1LL, ctx / static_cast<long long>(min_split_tokens_)));
    splits[s] = static_cast<int>(std::clamp(n, 1LL, static_cast<long long>(ctx)));
  }
  return splits;
}

void SplitKAttention::forward(const AttentionBatch& batch, const KvLayerView& kv, const float* q,
                              float* out, Device& device) {
  using split_k::Item;
  using split_k::Merge;
  using split_k::PartialView;
  using split_k::QueryBlock;
  check_attention_batch(batch, kv, "attention 'split_k'");
  ThreadPool& pool = cpu_pool(device, "attention 'split_k'");
  if (batch.rows() == 0) return;
  const int group = batch.n_heads / batch.n_kv_heads;
  const int d = batch.head_dim;
  const std::vector<int> splits = plan(batch, pool.size());

  std::vector<Item> items;
  std::vector<Merge> merges;
  std::ptrdiff_t partial_vectors = 0;  // total vectors of all partial states
  for (int s = 0; s < batch.n_seqs(); ++s) {
    const auto su = static_cast<std::size_t>(s);
    const int n_q = batch.query_start[su + 1] - batch.query_start[su];
    const int ctx = batch.context_len[su];
    const int n_split = splits[su];
    for (int h = 0; h < batch.n_kv_heads; ++h) {
      if (n_q == 0) break;
      if (n_split == 0) {  // prefill chunk: tiled, whole causal prefix per row block
        for (int r = 0; r < n_q; r += kPrefillRowBlock) {
          const QueryBlock block{s, h, r, std::min(r + kPrefillRowBlock, n_q)};
          items.push_back({block, 0, ctx - n_q + block.row_end, -1});
        }
      } else if (n_split == 1) {
        items.push_back({QueryBlock{s, h, 0, n_q}, 0, ctx, -1});
      } else {
        const QueryBlock block{s, h, 0, n_q};
        merges.push_back({block, n_split, partial_vectors});
        for (int j = 0; j < n_split; ++j) {
          // Chunk j: [ctx*j/n, ctx*(j+1)/n), never empty since n <= ctx.
          const auto begin = static_cast<int>(static_cast<long long>(ctx) * j / n_split);
          const auto end = static_cast<int>(static_cast<long long>(ctx) * (j + 1) / n_split);
          items.push_back({block, begin, end, partial_vectors});
          partial_vectors += block.vectors(group);
        }
      }
    }
  }

  // Partial states of every split: max/denom [partial_vectors], acc [partial_vectors, d].
  std::vector<float> part_max(static_cast<std::size_t>(partial_vectors));
  std::vector<float> part_denom(part_max.size());
  std::vector<float> part_acc(part_max.size() * static_cast<std::size_t>(d));
  const auto view_at = [&](std::ptrdiff_t offset) {
    const auto o = static_cast<std::size_t>(offset);
    return PartialView{part_max.data() + o, part_denom.data() + o,
                       part_acc.data() + o * static_cast<std::size_t>(d)};
  };

  // Longest first so that a long item does not start last and leave the other threads idle.
  std::stable_sort(items.begin(), items.end(),
                   [](const Item& a, const Item& b) { return a.cost() > b.cost(); });
  pool.parallel_for(items.size(), [&](std::size_t begin, std::size_t end) {
    split_k::RangeScratch scratch;
    std::vector<float> own_max, own_denom, own_acc;  // state of items that write out directly
    for (std::size_t i = begin; i < end; ++i) {
      const Item& item = items[i];
      const int vectors = item.block.vectors(group);
      PartialView state{};
      if (item.partial >= 0) {
        state = view_at(item.partial);
      } else {
        own_max.resize(static_cast<std::size_t>(vectors));
        own_denom.resize(own_max.size());
        own_acc.resize(own_max.size() * static_cast<std::size_t>(d));
        state = PartialView{own_max.data(), own_denom.data(), own_acc.data()};
      }
      split_k::reset_partial(state, vectors, d);
      split_k::attend_range(batch, kv, q, item.block, item.pos_begin, item.pos_end, state,
                            scratch);
      if (item.partial < 0) split_k::write_normalised(batch, item.block, state, out);
    }
  });

  if (merges.empty()) return;
  pool.parallel_for(merges.size(), [&](std::size_t begin, std::size_t end) {
    std::vector<PartialView> parts;
    for (std::size_t i = begin; i < end; ++i) {
      const Merge& m = merges[i];
      parts.clear();
      for (int j = 0; j < m.splits; ++j)
        parts.push_back(view_at(m.partial + static_cast<std::ptrdiff_t>(j) * m.block.vectors(group)));
      split_k::merge_partials(batch, m.block, parts, out);
    }
  });
}

}  // namespace inferlab::plugins
