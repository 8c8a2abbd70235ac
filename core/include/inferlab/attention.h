// Attention strategy interface. Reads K/V only through block tables (paged is the only layout).
// One batch mixes prefill chunks and decode tokens; several query rows per sequence are the
// norm (chunked prefill, speculative verification); GQA maps head h to kv head
// h / (n_heads / n_kv_heads). The model writes this step's K/V into the cache before the call.
// Every array of the batch is flat and lives where the device wants it, so a whole batch
// uploads in one transfer.
#pragma once
#include <span>

#include "inferlab/device.h"
#include "inferlab/kv_cache.h"

namespace inferlab {

struct AttentionBatch {
  // Sequence s owns query rows [query_start[s], query_start[s+1]). Its context holds
  // context_len[s] tokens (this step's included); query row i of s sits at position
  // context_len[s] - n_q(s) + i and attends causally to positions [0, that position].
  std::span<const int> query_start;  // [n_seqs + 1]
  std::span<const int> context_len;  // [n_seqs]
  // Row s holds sequence s's physical blocks in order, padded with -1 to max_blocks.
  std::span<const int> block_table;  // [n_seqs, max_blocks]
  int max_blocks = 0;
  // When the three arrays above are device memory (a CUDA step): the same arrays on the host,
  // if whoever built the batch kept them (Model::forward does: they are what it uploaded);
  // empty otherwise. A CUDA strategy plans its launches from these instead of downloading the
  // arrays, which costs three synchronising copies per layer (cuda::mirror_batch).
  std::span<const int> host_query_start;
  std::span<const int> host_context_len;
  std::span<const int> host_block_table;
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  float scale = 1.0f;  // usually 1 / sqrt(head_dim)

  int n_seqs() const { return static_cast<int>(context_len.size()); }
  int rows() const { return query_start.empty() ? 0 : query_start.back(); }
  // Sequence s's row of the block table (max_blocks entries, the used ones first).
  std::span<const int> table(int s) const {
    return block_table.subspan(static_cast<std::size_t>(s) * static_cast<std::size_t>(max_blocks),
                               static_cast<std::size_t>(max_blocks));
  }
};

// Throws inferlab::Error naming `who` and the first inconsistency: array sizes, head counts,
// a sequence with more query rows than context, a block table too short for its context or a
// block outside the pool. Cheap (O(n_seqs)); every attention strategy calls it before touching
// memory.
void check_attention_batch(const AttentionBatch& batch, const KvLayerView& kv, const char* who);

// The memory a strategy moves beyond reading Q, each sequence's K/V once (in the KV format's
// bytes) and writing its output: what the simulator charges it (docs/simulation.md, "What a
// strategy costs"). A strategy that does not declare it (the default) cannot be simulated:
// `validate` refuses it on [device] kind = "sim".
struct AttentionTraffic {
  bool declared = false;
  // Bytes per (query row, head, attended key) written to memory and read back: materialised
  // scores S and probabilities P (fp32: S written, read, P written, read = 16); 0 for a tiled
  // online softmax that keeps them on chip.
  double score_bytes = 0;
  // Partial results written and read back to be combined (split-K: each split's output and
  // softmax statistics), for sequences of at most partial_max_rows query rows (0 = any): bytes
  // per (query row, head), and per (query row, head, attended key) when the split count grows
  // with the context.
  double partial_bytes = 0;
  double partial_bytes_per_key = 0;
  int partial_max_rows = 0;
};

class Attention {
 public:
  virtual ~Attention() = default;
  // This strategy's traffic for heads of `head_dim` values (see AttentionTraffic); undeclared
  // by default.
  virtual AttentionTraffic traffic(int head_dim) const {
    (void)head_dim;
    return {};
  }
  // q:   [rows, n_heads, head_dim]
  // out: [rows, n_heads, head_dim]
  virtual void forward(const AttentionBatch& batch, const KvLayerView& kv, const float* q, float* out,
                       Device& device) = 0;
};

}  // namespace inferlab
