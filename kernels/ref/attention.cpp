#include "kernels/ref/attention.h"

#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <vector>

#include "inferlab/error.h"

namespace inferlab::ref {

void ref_paged_attention(const AttentionBatch& batch, const KvLayerView& kv, const float* q,
                         float* out) {
  check_attention_batch(batch, kv, "ref_paged_attention");
  const int d = batch.head_dim;
  const int group = batch.n_heads / batch.n_kv_heads;  // query heads per kv head
  std::vector<double> scores;                           // [context_len]
  std::vector<double> acc(static_cast<std::size_t>(d));  // [head_dim]
  std::vector<float> widened(static_cast<std::size_t>(d));  // a stored row that is not f32, widened

  for (int s = 0; s < batch.n_seqs(); ++s) {
    const int row0 = batch.query_start[s];
    const int n_q = batch.query_start[s + 1] - row0;
    const int ctx = batch.context_len[s];
    const auto table = batch.table(s);
    for (int i = 0; i < n_q; ++i) {
      const int pos = ctx - n_q + i;  // this row attends to positions [0, pos]
      const int row = row0 + i;
      for (int h = 0; h < batch.n_heads; ++h) {
        const int kvh = h / group;
        const float* qh = q + (static_cast<std::size_t>(row) * batch.n_heads + h) * d;
        scores.assign(static_cast<std::size_t>(pos) + 1, 0.0);
        double max_score = -std::numeric_limits<double>::infinity();
        for (int p = 0; p <= pos; ++p) {
          const int slot = table[p / kv.block_size] * kv.block_size + p % kv.block_size;
          const float* kp = kv.k_row(slot, kvh, widened.data());
          double dot = 0.0;
          for (int c = 0; c < d; ++c) dot += static_cast<double>(qh[c]) * kp[c];
          scores[static_cast<std::size_t>(p)] = dot * batch.scale;
          if (scores[static_cast<std::size_t>(p)] > max_score) max_score = scores[static_cast<std::size_t>(p)];
        }
        double denom = 0.0;
        for (double& sc : scores) {
          sc = std::exp(sc - max_score);
          denom += sc;
        }
        acc.assign(static_cast<std::size_t>(d), 0.0);
        for (int p = 0; p <= pos; ++p) {
          const int slot = table[p / kv.block_size] * kv.block_size + p % kv.block_size;
          const float* vp = kv.v_row(slot, kvh, widened.data());
          const double w = scores[static_cast<std::size_t>(p)] / denom;
          for (int c = 0; c < d; ++c) acc[static_cast<std::size_t>(c)] += w * vp[c];
        }
        float* oh = out + (static_cast<std::size_t>(row) * batch.n_heads + h) * d;
        for (int c = 0; c < d; ++c) oh[c] = static_cast<float>(acc[static_cast<std::size_t>(c)]);
      }
    }
  }
}

}  // namespace inferlab::ref
