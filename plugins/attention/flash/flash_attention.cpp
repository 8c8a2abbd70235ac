#include "flash_attention.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "inferlab/error.h"
#include "kernels/ref/attention.h"

namespace inferlab::plugins {

namespace {

// One unit of parallel work: rows [row_begin, row_end) (local to the sequence) of seq, all
// query heads mapped to kv_head.
struct WorkItem {
  int seq;
  int kv_head;
  int row_begin;
  int row_end;
};

// Per-work-item scratch, reused across items handled by one chunk.
struct Scratch {
  std::vector<float> max;     // [vectors] running max of scores
  std::vector<float> denom;   // [vectors] running sum of exp(score - max)
  std::vector<float> acc;     // [vectors, head_dim] running un-normalised output
  std::vector<float> scores;  // [tile]
  std::vector<const float*> k_rows, v_rows;  // [tile] K/V vectors of the tile's positions
};

void run_item(const AttentionBatch& batch, const KvLayerView& kv, const float* q, float* out,
              const WorkItem& item, int tile, Scratch& w) {
  const int d = batch.head_dim;
  const int group = batch.n_heads / batch.n_kv_heads;
  const int bs = kv.block_size;
  const int row0 = batch.query_start[static_cast<std::size_t>(item.seq)];
  const int n_q = batch.query_start[static_cast<std::size_t>(item.seq) + 1] - row0;
  const int ctx = batch.context_len[static_cast<std::size_t>(item.seq)];
  const auto table = batch.block_tables[static_cast<std::size_t>(item.seq)];
  const int first_pos = ctx - n_q;  // position of local row 0
  const int n_rows = item.row_end - item.row_begin;
  const std::size_t vectors = static_cast<std::size_t>(n_rows) * group;  // query vectors

  w.max.assign(vectors, -INFINITY);
  w.denom.assign(vectors, 0.0f);
  w.acc.assign(vectors * d, 0.0f);

  // Positions this item needs: [0, position of its last row].
  const int end_pos = first_pos + item.row_end;  // exclusive
  for (int t0 = 0; t0 < end_pos; t0 += tile) {
    const int t1 = std::min(t0 + tile, end_pos);
    // Resolve the tile's positions through the block table once for all query vectors.
    for (int p = t0; p < t1; ++p) {
      const int slot = table[static_cast<std::size_t>(p / bs)] * bs + p % bs;
      w.k_rows[static_cast<std::size_t>(p - t0)] = kv.k_at(slot, item.kv_head);
      w.v_rows[static_cast<std::size_t>(p - t0)] = kv.v_at(slot, item.kv_head);
    }
    for (int r = item.row_begin; r < item.row_end; ++r) {
      // Causal: row r sees positions <= first_pos + r.
      const int n_valid = std::min(t1, first_pos + r + 1) - t0;
      if (n_valid <= 0) continue;
      for (int g = 0; g < group; ++g) {
        const int h = item.kv_head * group + g;
        const std::size_t vec = static_cast<std::size_t>(r - item.row_begin) * group + g;
        const float* q_h = q + (static_cast<std::size_t>(row0 + r) * batch.n_heads + h) * d;
        float* acc = w.acc.data() + vec * d;
        float* s = w.scores.data();

        float tile_max = -INFINITY;
        for (int j = 0; j < n_valid; ++j) {
          const float* k = w.k_rows[static_cast<std::size_t>(j)];
          float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
          for (int c = 0; c < d; ++c) dot += q_h[c] * k[c];
          s[j] = dot * batch.scale;
          tile_max = std::max(tile_max, s[j]);
        }
        // Online softmax: rescale what was accumulated under the old max.
        const float new_max = std::max(w.max[vec], tile_max);
        if (new_max > w.max[vec]) {
          const float alpha = std::exp(w.max[vec] - new_max);  // 0 on the first tile
          w.denom[vec] *= alpha;
#pragma omp simd
          for (int c = 0; c < d; ++c) acc[c] *= alpha;
          w.max[vec] = new_max;
        }
        float denom = w.denom[vec];
        for (int j = 0; j < n_valid; ++j) {
          const float p = std::exp(s[j] - new_max);
          denom += p;
          const float* v = w.v_rows[static_cast<std::size_t>(j)];
#pragma omp simd
          for (int c = 0; c < d; ++c) acc[c] += p * v[c];
        }
        w.denom[vec] = denom;
      }
    }
  }

  for (int r = item.row_begin; r < item.row_end; ++r)
    for (int g = 0; g < group; ++g) {
      const int h = item.kv_head * group + g;
      const std::size_t vec = static_cast<std::size_t>(r - item.row_begin) * group + g;
      const float inv = 1.0f / w.denom[vec];
      const float* acc = w.acc.data() + vec * d;
      float* o = out + (static_cast<std::size_t>(row0 + r) * batch.n_heads + h) * d;
      for (int c = 0; c < d; ++c) o[c] = acc[c] * inv;
    }
}

}  // namespace

FlashAttention::FlashAttention(int tile, int query_rows) : tile_(tile), query_rows_(query_rows) {
  check(tile >= 1 && tile <= 4096,
        "attention 'flash': tile must lie in [1, 4096], got " + std::to_string(tile));
  check(query_rows >= 1 && query_rows <= 1024,
        "attention 'flash': query_rows must lie in [1, 1024], got " + std::to_string(query_rows));
}

void FlashAttention::forward(const AttentionBatch& batch, const KvLayerView& kv, const float* q,
                             float* out, ThreadPool& pool) {
  ref::check_attention_batch(batch, kv, "attention 'flash'");
  std::vector<WorkItem> items;
  for (int s = 0; s < batch.n_seqs(); ++s) {
    const int n_q = batch.query_start[static_cast<std::size_t>(s) + 1] -
                    batch.query_start[static_cast<std::size_t>(s)];
    for (int kvh = 0; kvh < batch.n_kv_heads; ++kvh)
      for (int r = 0; r < n_q; r += query_rows_)
        items.push_back({s, kvh, r, std::min(r + query_rows_, n_q)});
  }
  if (items.empty()) return;
  // Longest contexts first so a long item does not start last and leave threads idle.
  std::stable_sort(items.begin(), items.end(), [&](const WorkItem& a, const WorkItem& b) {
    const auto cost = [&](const WorkItem& i) {
      const int n_q = batch.query_start[static_cast<std::size_t>(i.seq) + 1] -
                      batch.query_start[static_cast<std::size_t>(i.seq)];
      return static_cast<long long>(batch.context_len[static_cast<std::size_t>(i.seq)] - n_q +
                                    i.row_end) * (i.row_end - i.row_begin);
    };
    return cost(a) > cost(b);
  });

  pool.parallel_for(items.size(), [&](std::size_t begin, std::size_t end) {
    Scratch w;
    w.scores.resize(static_cast<std::size_t>(tile_));
    w.k_rows.resize(static_cast<std::size_t>(tile_));
    w.v_rows.resize(static_cast<std::size_t>(tile_));
    for (std::size_t i = begin; i < end; ++i) run_item(batch, kv, q, out, items[i], tile_, w);
  });
}

}  // namespace inferlab::plugins
