// FlashDecoding work planning for the CUDA tiled attention kernel (see decode_split.h).
#include "plugins/common/attention/decode_split.h"

#include <algorithm>
#include <string>

#include "inferlab/error.h"

namespace inferlab::cuda {

int decode_splits(int context_len, int base_blocks, int sm_count) {
  if (context_len <= 0 || base_blocks <= 0 || sm_count <= 0) return 1;
  const long long target = static_cast<long long>(kSplitBlocksPerSm) * sm_count;
  const long long wanted = (target + base_blocks - 1) / base_blocks;
  const long long most = std::min<long long>(kMaxSplits, context_len / kMinSplitPositions);
  return static_cast<int>(std::max<long long>(1, std::min(wanted, most)));
}

void add_row_block(TiledPlan& plan, int seq, int row_begin, int row_end, int n_q, int ctx, int splits,
                   int n_kv_heads, int group) {
  plan.max_item_rows = std::max(plan.max_item_rows, row_end - row_begin);
  if (splits <= 1) {  // the rows' whole causal prefix: up to the last row's position
    plan.items.push_back({seq, row_begin, row_end, 0, ctx - n_q + row_end, -1});
    return;
  }
  check(splits <= ctx, [&] {
    return "attention plan: " + std::to_string(splits) + " splits of a context of " + std::to_string(ctx) +
           " positions (each chunk needs one)";
  });
  const long long vectors = static_cast<long long>(row_end - row_begin) * group;
  plan.merges.push_back({seq, row_begin, row_end - row_begin, splits, static_cast<int>(plan.partial_vectors)});
  for (int j = 0; j < splits; ++j) {
    // Chunk j: [ctx*j/n, ctx*(j+1)/n), never empty since n <= ctx.
    const auto begin = static_cast<int>(static_cast<long long>(ctx) * j / splits);
    const auto end = static_cast<int>(static_cast<long long>(ctx) * (j + 1) / splits);
    plan.items.push_back(
        {seq, row_begin, row_end, begin, end, static_cast<int>(plan.partial_vectors + j * n_kv_heads * vectors)});
  }
  plan.partial_vectors += static_cast<long long>(splits) * n_kv_heads * vectors;
  check(plan.partial_vectors < (1LL << 31), "attention plan: too many partial states for one batch");
}

TiledPlan flash_plan(const AttentionBatch& b, int query_rows, bool split, int sm_count) {
  check(query_rows > 0, "attention plan: query_rows must be positive");
  const int n_seqs = b.n_seqs(), group = b.n_heads / b.n_kv_heads;
  long long unsplit_items = 0;
  for (int s = 0; s < n_seqs; ++s) {
    const int n_q = b.query_start[s + 1] - b.query_start[s];
    unsplit_items += (n_q + query_rows - 1) / query_rows;
  }
  const long long base = unsplit_items * b.n_kv_heads;
  const int base_blocks = static_cast<int>(std::min<long long>(base, 1 << 30));
  TiledPlan plan;
  for (int s = 0; s < n_seqs; ++s) {
    const int n_q = b.query_start[s + 1] - b.query_start[s];
    const int ctx = b.context_len[s];
    const int splits = split && n_q > 0 && n_q <= query_rows ? decode_splits(ctx, base_blocks, sm_count) : 1;
    for (int r = 0; r < n_q; r += query_rows)
      add_row_block(plan, s, r, std::min(r + query_rows, n_q), n_q, ctx, splits, b.n_kv_heads, group);
  }
  return plan;
}

}  // namespace inferlab::cuda
