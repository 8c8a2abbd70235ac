#include "naive_attention.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "kernels/ref/attention.h"

namespace inferlab::plugins {

namespace {

// One (row, head): scores[p] for p in [0, pos], softmax, weighted V sum into out_h.
void attend_one(const AttentionBatch& batch, const KvLayerView& kv, std::span<const int> table,
                int pos, const float* q_h, int kv_head, float* scores, float* out_h, float* row) {
  const int d = batch.head_dim;
  const int bs = kv.block_size;
  float max_score = -INFINITY;
  for (int p = 0; p <= pos; ++p) {
    const float* k = kv.k_row(table[static_cast<std::size_t>(p / bs)] * bs + p % bs, kv_head, row);
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (int c = 0; c < d; ++c) dot += q_h[c] * k[c];
    scores[p] = dot * batch.scale;
    max_score = std::max(max_score, scores[p]);
  }
  float denom = 0.0f;
  for (int p = 0; p <= pos; ++p) {
    scores[p] = std::exp(scores[p] - max_score);
    denom += scores[p];
  }
  const float inv = 1.0f / denom;
  std::fill(out_h, out_h + d, 0.0f);
  for (int p = 0; p <= pos; ++p) {
    const float* v = kv.v_row(table[static_cast<std::size_t>(p / bs)] * bs + p % bs, kv_head, row);
    const float w = scores[p] * inv;
#pragma omp simd
    for (int c = 0; c < d; ++c) out_h[c] += w * v[c];
  }
}

}  // namespace

void NaiveAttention::forward(const AttentionBatch& batch, const KvLayerView& kv, const float* q,
                             float* out, Device& device) {
  check_attention_batch(batch, kv, "attention 'naive'");
  ThreadPool& pool = cpu_pool(device, "attention 'naive'");
  const int rows = batch.rows();
  if (rows == 0) return;
  const int n_heads = batch.n_heads;
  const int group = n_heads / batch.n_kv_heads;
  const int first_row = batch.query_start[0];

  // Which sequence each row belongs to, and the position it queries.
  std::vector<int> row_seq(static_cast<std::size_t>(rows - first_row));  // [rows]
  std::vector<int> row_pos(row_seq.size());                              // [rows]
  int max_ctx = 0;
  for (int s = 0; s < batch.n_seqs(); ++s) {
    const int r0 = batch.query_start[s], r1 = batch.query_start[s + 1];
    for (int r = r0; r < r1; ++r) {
      row_seq[static_cast<std::size_t>(r - first_row)] = s;
      row_pos[static_cast<std::size_t>(r - first_row)] = batch.context_len[s] - (r1 - r0) + (r - r0);
    }
    if (r1 > r0) max_ctx = std::max(max_ctx, batch.context_len[s]);
  }

  const std::size_t items = row_seq.size() * static_cast<std::size_t>(n_heads);
  if (items == 0) return;
  pool.parallel_for(items, [&](std::size_t begin, std::size_t end) {
    std::vector<float> scores(static_cast<std::size_t>(max_ctx));  // [context] one score row
    std::vector<float> row(static_cast<std::size_t>(batch.head_dim));  // [head_dim] a dequantized K/V row
    for (std::size_t item = begin; item < end; ++item) {
      const std::size_t local_row = item / static_cast<std::size_t>(n_heads);
      const int h = static_cast<int>(item % static_cast<std::size_t>(n_heads));
      const int s = row_seq[local_row];
      const std::size_t offset =
          ((local_row + static_cast<std::size_t>(first_row)) * n_heads + h) * batch.head_dim;
      attend_one(batch, kv, batch.table(s), row_pos[local_row],
                 q + offset, h / group, scores.data(), out + offset, row.data());
    }
  }, /*grain=*/4);
}

}  // namespace inferlab::plugins
