// Attention strategy interface. Reads K/V only through block tables (paged is the only
// layout). One batch mixes prefill chunks and decode tokens; several query rows per sequence
// are the norm (chunked prefill, speculative verification); GQA maps head h to kv head
// h / (n_heads / n_kv_heads). The model writes this step's K/V into the cache before the call.
#pragma once
#include <span>
#include <vector>

#include "inferlab/kv_cache.h"
#include "inferlab/thread_pool.h"

namespace inferlab {

struct AttentionBatch {
  // Sequence s owns query rows [query_start[s], query_start[s+1]). Its context holds
  // context_len[s] tokens (this step's included); query row i of s sits at position
  // context_len[s] - n_q(s) + i and attends causally to positions [0, that position].
  std::span<const int> query_start;               // [n_seqs + 1]
  std::span<const int> context_len;               // [n_seqs]
  std::span<const std::span<const int>> block_tables;  // [n_seqs][blocks]
  int n_heads = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
  float scale = 1.0f;  // usually 1 / sqrt(head_dim)

  int n_seqs() const { return static_cast<int>(context_len.size()); }
  int rows() const { return query_start.empty() ? 0 : query_start.back(); }
};

class Attention {
 public:
  virtual ~Attention() = default;
  // q:   [rows, n_heads, head_dim]
  // out: [rows, n_heads, head_dim]
  virtual void forward(const AttentionBatch& batch, const KvLayerView& kv, const float* q,
                       float* out, ThreadPool& pool) = 0;
};

}  // namespace inferlab
