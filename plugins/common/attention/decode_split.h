// Work planning of the CUDA tiled attention kernel (kernels/cuda/attention_flash.cu) with
// FlashDecoding's split over the context (Dao et al. 2023): host code only, compiled in every
// build, so the choices are unit-tested without a GPU (plugins/attention/flash/test_decode_split.cpp).
//
// A decode (or speculative-verify) sequence has few query rows: unsplit it is one work item per
// kv head, so a batch-1 TinyLlama step launches 4 thread blocks on a GPU of 132 SMs and reads its
// K/V at a fraction of the bandwidth. Split, its context is cut into chunks that run as their own
// items (each leaving an un-normalised softmax state) and a second small kernel merges them
// (merge_partial_attention, kernels/cuda/attention_split_k.cu).
#pragma once
#include <vector>

#include "inferlab/plugin/attention.h"
#include "kernels/cuda/attention.h"

namespace inferlab::cuda {

// Thread blocks per SM the split aims for: several 128-thread blocks in flight per SM keep
// enough loads outstanding to stream K/V at HBM bandwidth.
inline constexpr int kSplitBlocksPerSm = 4;
// The fewest context positions one chunk takes: fewer would spend a block on staging Q and on
// its merge state for less K/V than two warps' score chunks.
inline constexpr int kMinSplitPositions = 64;
// The most chunks of one sequence (bounds the partial states and the merge's loop).
inline constexpr int kMaxSplits = 128;

// Chunks for one few-row sequence of `context_len` positions when the batch, unsplit, launches
// `base_blocks` thread blocks on a GPU of `sm_count` SMs: ceil(kSplitBlocksPerSm * sm_count /
// base_blocks), at most context_len / kMinSplitPositions and kMaxSplits, at least 1 (a batch
// that already fills the GPU, or a short context, is not split).
int decode_splits(int context_len, int base_blocks, int sm_count);

// The tiled kernel's work for one batch: items (grid.x), merges of split sequences, and the
// partial-state vectors the split items write.
struct TiledPlan {
  std::vector<AttentionItem> items;
  std::vector<AttentionMerge> merges;
  long long partial_vectors = 0;
  int max_item_rows = 0;
};

// Appends rows [row_begin, row_end) of sequence `seq` (n_q query rows, context ctx): one item over
// the rows' whole causal prefix when splits <= 1, else `splits` items over the chunks
// [ctx * j / splits, ctx * (j + 1) / splits) and their merge (kv head h of chunk j at vector
// partial + (j * n_kv_heads + h) * rows * group). splits must not exceed ctx.
void add_row_block(TiledPlan& plan, int seq, int row_begin, int row_end, int n_q, int ctx, int splits,
                   int n_kv_heads, int group);

// The flash plugin's plan of a host batch: each sequence's rows in items of query_rows; with
// split on, a sequence whose rows fit one item is split by decode_splits over the blocks the
// unsplit batch would launch. Throws Error when the partial states outgrow an int index.
TiledPlan flash_plan(const AttentionBatch& host_batch, int query_rows, bool split, int sm_count);

}  // namespace inferlab::cuda
