#include "flash_attention.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
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
  std::vector<float> scores;  // [tile_pad]
  std::vector<float> k_t;     // [head_dim, tile_pad] the tile's K, transposed
  std::vector<const float*> k_rows, v_rows;  // [tile] K/V vectors of the tile's positions
  std::vector<float> k_deq, v_deq;           // [tile, head_dim] those rows dequantized (int8 KV)
};

// exp(x) for x <= 0, written so `omp simd` loops vectorise it (the libm call does not): clamp,
// split x = n ln2 + r with |r| <= ln2/2, a degree-6 polynomial for e^r, then scale by 2^n via
// the exponent bits. Relative error ~2 ulp, far inside the attention tolerance; results below
// e^-87 flush to ~1e-38 instead of 0, which no softmax sum can see.
#pragma omp declare simd
inline float exp_nonpositive(float x) {
  x = std::max(x, -87.0f);
  const float n = std::floor(x * 1.44269504f + 0.5f);  // round(x / ln2), in [-126, 0]
  const float r = (x - n * 0.693359375f) + n * 2.12194440e-4f;  // x - n ln2, two-part ln2
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  return p * std::bit_cast<float>((static_cast<std::int32_t>(n) + 127) << 23);
}

// acc[c] += sum_j p[j] * v_rows[j][c]. Columns go in 16-float chunks held in a register across
// the whole j loop: updating acc in memory per j chains every step through a store and a
// reload. A GCC/Clang vector type pins the vectorisation to the column axis (left to itself
// GCC vectorises over j with gathers).
using Vec16 = float __attribute__((vector_size(64)));
constexpr int kAccBlock = 16;

void accumulate_pv(const float* p, const float* const* v_rows, int n, int d, float* acc) {
  int c0 = 0;
  for (; c0 + kAccBlock <= d; c0 += kAccBlock) {
    Vec16 a;
    std::memcpy(&a, acc + c0, sizeof a);
    for (int j = 0; j < n; ++j) {
      Vec16 v;
      std::memcpy(&v, v_rows[j] + c0, sizeof v);
      a += p[j] * v;
    }
    std::memcpy(acc + c0, &a, sizeof a);
  }
  for (; c0 < d; ++c0) {  // head_dim not a multiple of kAccBlock
    float a = acc[c0];
    for (int j = 0; j < n; ++j) a += p[j] * v_rows[j][c0];
    acc[c0] = a;
  }
}

// Below this many query vectors per item (decode: one row times the GQA group) transposing a
// K tile costs more than the horizontal sums it saves, so scores are plain dot products.
constexpr std::size_t kTransposeMinVectors = 8;

// Score columns computed together: 32 floats = 4 AVX2 accumulators the compiler keeps in
// registers, one broadcast q[c] per K^T row.
constexpr int kScoreBlock = 32;

int padded_tile(int tile) { return (tile + kScoreBlock - 1) / kScoreBlock * kScoreBlock; }

// s[j] = scale * sum_c q[c] * k_t[c][j] for j in [0, n) rounded up to kScoreBlock (columns past
// the tile's valid ones hold stale finite values and are ignored by the caller).
void tile_scores(const float* q, const float* k_t, int d, int stride, int n, float scale,
                 float* s) {
  for (int j0 = 0; j0 < n; j0 += kScoreBlock) {
    float a[kScoreBlock] = {};
    for (int c = 0; c < d; ++c) {
      const float qc = q[c];
      const float* row = k_t + static_cast<std::size_t>(c) * stride + j0;
#pragma omp simd
      for (int u = 0; u < kScoreBlock; ++u) a[u] += qc * row[u];
    }
#pragma omp simd
    for (int u = 0; u < kScoreBlock; ++u) s[j0 + u] = a[u] * scale;
  }
}

void run_item(const AttentionBatch& batch, const KvLayerView& kv, const float* q, float* out,
              const WorkItem& item, int tile, Scratch& w) {
  const int d = batch.head_dim;
  const int group = batch.n_heads / batch.n_kv_heads;
  const int bs = kv.block_size;
  const int row0 = batch.query_start[static_cast<std::size_t>(item.seq)];
  const int n_q = batch.query_start[static_cast<std::size_t>(item.seq) + 1] - row0;
  const int ctx = batch.context_len[static_cast<std::size_t>(item.seq)];
  const auto table = batch.table(item.seq);
  const int first_pos = ctx - n_q;  // position of local row 0
  const int n_rows = item.row_end - item.row_begin;
  const std::size_t vectors = static_cast<std::size_t>(n_rows) * group;  // query vectors
  const int stride = padded_tile(tile);
  const bool transpose = vectors >= kTransposeMinVectors;

  w.max.assign(vectors, -INFINITY);
  w.denom.assign(vectors, 0.0f);
  w.acc.assign(vectors * d, 0.0f);

  // Positions this item needs: [0, position of its last row].
  const int end_pos = first_pos + item.row_end;  // exclusive
  for (int t0 = 0; t0 < end_pos; t0 += tile) {
    const int t1 = std::min(t0 + tile, end_pos);
    // Resolve the tile's positions through the block table once for all query vectors.
    // K goes in transposed so scores vectorise over positions, without horizontal sums.
    for (int p = t0; p < t1; ++p) {
      const int slot = table[static_cast<std::size_t>(p / bs)] * bs + p % bs;
      const std::size_t j = static_cast<std::size_t>(p - t0) * static_cast<std::size_t>(d);
      const float* k = kv.k_row(slot, item.kv_head, w.k_deq.data() + j);
      w.k_rows[static_cast<std::size_t>(p - t0)] = k;
      if (transpose)
        for (int c = 0; c < d; ++c) w.k_t[static_cast<std::size_t>(c) * stride + (p - t0)] = k[c];
      w.v_rows[static_cast<std::size_t>(p - t0)] = kv.v_row(slot, item.kv_head, w.v_deq.data() + j);
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

        if (transpose) {
          tile_scores(q_h, w.k_t.data(), d, stride, n_valid, batch.scale, s);
        } else {
          for (int j = 0; j < n_valid; ++j) {
            const float* k = w.k_rows[static_cast<std::size_t>(j)];
            float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
            for (int c = 0; c < d; ++c) dot += q_h[c] * k[c];
            s[j] = dot * batch.scale;
          }
        }
        float tile_max = -INFINITY;
        for (int j = 0; j < n_valid; ++j) tile_max = std::max(tile_max, s[j]);
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
#pragma omp simd reduction(+ : denom)
        for (int j = 0; j < n_valid; ++j) {
          s[j] = exp_nonpositive(s[j] - new_max);
          denom += s[j];
        }
        w.denom[vec] = denom;
        accumulate_pv(s, w.v_rows.data(), n_valid, d, acc);
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
                             float* out, Device& device) {
#if INFERLAB_HAVE_CUDA
  if (device.kind() == DeviceKind::kCuda) {
    forward_cuda(batch, kv, q, out, device);
    return;
  }
#endif
  check_attention_batch(batch, kv, "attention 'flash'");
  ThreadPool& pool = cpu_pool(device, "attention 'flash'");
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
    const auto pad = static_cast<std::size_t>(padded_tile(tile_));
    w.scores.resize(pad);
    w.k_t.assign(pad * static_cast<std::size_t>(batch.head_dim), 0.0f);
    w.k_rows.resize(static_cast<std::size_t>(tile_));
    w.v_rows.resize(static_cast<std::size_t>(tile_));
    w.k_deq.resize(static_cast<std::size_t>(tile_) * static_cast<std::size_t>(batch.head_dim));
    w.v_deq.resize(w.k_deq.size());
    for (std::size_t i = begin; i < end; ++i) run_item(batch, kv, q, out, items[i], tile_, w);
  });
}

}  // namespace inferlab::plugins
