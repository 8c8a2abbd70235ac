#include "flash_attention.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <vector>

#include "flash_tile_kernels.h"
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
  std::vector<float> qs;      // [vectors, head_dim] the item's queries times the softmax scale
  std::vector<float> scores;  // [kBlockVectors, tile_pad] (lane path: [tile_pad, lanes]) scores, then weights
  std::vector<float> k_t;     // [head_dim, tile_pad] the tile's K, transposed
  std::vector<float> qt;      // [head_dim / L, lanes] one row's queries for the lane kernels (lane_queries)
  std::vector<const float*> k_rows, v_rows;  // [tile] K/V vectors of the tile's positions
  std::vector<float> k_deq, v_deq;           // [tile, head_dim] those rows dequantized (int8 KV)
};

// Below this many query vectors per item (decode: one row times the GQA group) transposing a
// K tile costs more than the horizontal sums it saves, so scores are plain dot products.
constexpr std::size_t kTransposeMinVectors = 8;

// Tile rows padded to whole score micro-kernel columns (a partial last Vec16 stays in bounds).
int padded_tile(int tile) { return (tile + flash::kBlockColumns - 1) / flash::kBlockColumns * flash::kBlockColumns; }

// KV not f32: the K (keys) or V rows of positions [t0, t1) widened into deq [t1 - t0, head_dim]
// by KvLayerView's inline rows, rows[i] pointing at position t0 + i's. A run of positions in one
// block takes one table lookup.
void widen_rows(const AttentionBatch& batch, const KvLayerView& kv, const WorkItem& item, int t0, int t1, bool keys,
                const float** rows, float* deq) {
  const int d = batch.head_dim, bs = kv.block_size;
  const auto table = batch.table(item.seq);
  for (int p = t0; p < t1;) {
    const int off = p % bs, run = std::min(bs - off, t1 - p);
    const int slot0 = table[static_cast<std::size_t>(p / bs)] * bs + off;
    for (int i = 0; i < run; ++i, ++p) {
      const auto at = static_cast<std::size_t>(p - t0);
      float* dst = deq + at * static_cast<std::size_t>(d);
      rows[at] = keys ? kv.k_row(slot0 + i, item.kv_head, dst) : kv.v_row(slot0 + i, item.kv_head, dst);
    }
  }
}

// Resolves positions [t0, t1) of the item's sequence through the block table once for all its
// query vectors: w.k_rows / w.v_rows point at each position's K / V vector (f32 in place, other
// dtypes widened into w.k_deq / w.v_deq by KvLayerView's inline rows). A run of positions in one
// block takes one table lookup.
void resolve_tile(const AttentionBatch& batch, const KvLayerView& kv, const WorkItem& item, int t0, int t1, Scratch& w) {
  const int d = batch.head_dim, bs = kv.block_size;
  const auto table = batch.table(item.seq);
  // f32: the rows in place, a run's rows a slot apart. A loop of its own: one loop over runs that
  // chose per position between this and k_row / v_row was not unswitched by GCC 12 and took
  // resolve_tile from 2 % to 13 % of a short decode's attention again (perf, Zen 3, 2026-12-07).
  if (kv.all_f32()) {
    const std::size_t step = static_cast<std::size_t>(kv.n_kv_heads) * static_cast<std::size_t>(d);
    for (int p = t0; p < t1;) {
      const int off = p % bs, run = std::min(bs - off, t1 - p);
      const int slot0 = table[static_cast<std::size_t>(p / bs)] * bs + off;
      const float* k = kv.k_at(slot0, item.kv_head);
      const float* v = kv.v_at(slot0, item.kv_head);
      for (int i = 0; i < run; ++i, ++p, k += step, v += step) {
        w.k_rows[static_cast<std::size_t>(p - t0)] = k;
        w.v_rows[static_cast<std::size_t>(p - t0)] = v;
      }
    }
    return;
  }
  widen_rows(batch, kv, item, t0, t1, true, w.k_rows.data(), w.k_deq.data());
  widen_rows(batch, kv, item, t0, t1, false, w.v_rows.data(), w.v_deq.data());
}

// Rows of a KV that is not f32 the lane path widens at a time: 16 rows of K and of V at head_dim
// 64 are 8 KiB of floats, where a tile of 64 positions widened at once took 32 KiB, all of L1,
// before the kernels read it back. SmolLM2 int4 g128, one 1500-token prompt decoding on 2
// threads, attention per decode step: int8 KV 8.9-9.1 -> 7.2-7.6 ms, f16 11.8 -> 11.1 (medians
// of five runs), f32 8.1-9.3 (alternating runs, Zen 3, 2026-12-07; whole tiles of 8 or 32
// positions instead of 16 were level with it).
constexpr int kWidenedRows = 16;

// One row whose GQA group fits the lanes of a machine vector (decode: every item is one row)
// runs the lane kernels (flash_tile_kernels.h): its vectors see the same positions, so the
// tile's scores, softmax and weights are computed for all of them at once, K read in place.
// Groups that would leave more than kMaxLaneChannels channels a lane group (AVX-512: groups of
// 1 and 2) take the block path, the faster one there.
bool lane_item(const WorkItem& item, int group, int d) {
  return item.row_end - item.row_begin == 1 && group <= flash::kNativeLanes &&
         flash::lane_channels(group, d) <= flash::kMaxLaneChannels;
}

// run_item's lane path: the item's `group` vectors (qs [group, d], pre-scaled) over positions
// [0, end_pos) tile by tile, into w.acc / w.denom as the block path leaves them.
void run_lanes(const AttentionBatch& batch, const KvLayerView& kv, const WorkItem& item, int group, int end_pos,
               int tile, Scratch& w) {
  const int d = batch.head_dim;
  constexpr int kL = flash::kNativeLanes;
  const int l = flash::lane_channels(group, d);  // channels a lane group holds (spare lanes)
  w.qt.resize(static_cast<std::size_t>(d) * kL);
  flash::lane_queries(w.qs.data(), group, d, l, w.qt.data());
  float max[kL], denom[kL], alpha[kL];
  std::fill(max, max + kL, -INFINITY);
  std::fill(denom, denom + kL, 0.0f);
  const bool widened = !kv.all_f32();
  float ones[kL];
  std::fill(ones, ones + kL, 1.0f);
  for (int t0 = 0; t0 < end_pos; t0 += tile) {
    const int t1 = std::min(t0 + tile, end_pos), n = t1 - t0;
    float* st = w.scores.data();  // [n rounded up to kLanePositions, lanes]
    if (!widened) {
      resolve_tile(batch, kv, item, t0, t1, w);
      flash::lane_scores(w.qt.data(), d, w.k_rows.data(), n, st, l);
    } else {
      // Widened rows a sub-tile at a time (kWidenedRows), K for the scores and then V for P·V, so
      // that they stay in L1 between their widening and their use; the same sums in the same
      // order as one pass over the tile (alpha scales the first sub-tile's P·V, 1 the others).
      for (int s0 = 0; s0 < n; s0 += kWidenedRows) {
        const int m = std::min(kWidenedRows, n - s0);
        widen_rows(batch, kv, item, t0 + s0, t0 + s0 + m, true, w.k_rows.data(), w.k_deq.data());
        flash::lane_scores(w.qt.data(), d, w.k_rows.data(), m, st + static_cast<std::size_t>(s0) * kL, l);
      }
    }
    flash::lane_softmax_step(st, n, max, denom, alpha);
    const int pv_step = widened ? kWidenedRows : n;  // f32: the whole tile in one P·V
    for (int s0 = 0; s0 < n; s0 += pv_step) {
      const int m = std::min(pv_step, n - s0);
      if (widened) widen_rows(batch, kv, item, t0 + s0, t0 + s0 + m, false, w.v_rows.data(), w.v_deq.data());
      for (int v0 = 0; v0 < group; v0 += flash::kBlockVectors) {
        const int mv = std::min(flash::kBlockVectors, group - v0);
        flash::block_pv(st + static_cast<std::size_t>(s0) * kL + v0, mv, 1, w.v_rows.data(), m,
                        (s0 == 0 ? alpha : ones) + v0, w.acc.data() + static_cast<std::size_t>(v0) * d, d, kL);
      }
    }
  }
  std::copy(denom, denom + group, w.denom.begin());
}

void run_item(const AttentionBatch& batch, const KvLayerView& kv, const float* q, float* out,
              const WorkItem& item, int tile, bool lanes, Scratch& w) {
  const int d = batch.head_dim;
  const int group = batch.n_heads / batch.n_kv_heads;
  const int row0 = batch.query_start[static_cast<std::size_t>(item.seq)];
  const int n_q = batch.query_start[static_cast<std::size_t>(item.seq) + 1] - row0;
  const int ctx = batch.context_len[static_cast<std::size_t>(item.seq)];
  const int first_pos = ctx - n_q;  // position of local row 0
  const int n_rows = item.row_end - item.row_begin;
  // Query vector v of the item is head kv_head * group + v % group of row row_begin + v / group:
  // the rows' group heads lie next to each other in q, and the rows (so the causal limits) grow
  // with v.
  const int vectors = n_rows * group;
  const auto n_vec = static_cast<std::size_t>(vectors);
  const int stride = padded_tile(tile);
  const bool transpose = n_vec >= kTransposeMinVectors;

  w.max.assign(n_vec, -INFINITY);
  w.denom.assign(n_vec, 0.0f);
  w.acc.assign(n_vec * d, 0.0f);
  w.qs.resize(n_vec * d);
  for (int r = 0; r < n_rows; ++r) {
    const float* src = q + (static_cast<std::size_t>(row0 + item.row_begin + r) * batch.n_heads +
                            static_cast<std::size_t>(item.kv_head) * group) * d;
    float* dst = w.qs.data() + static_cast<std::size_t>(r) * group * d;
    for (int i = 0; i < group * d; ++i) dst[i] = src[i] * batch.scale;
  }

  // Positions this item needs: [0, position of its last row].
  const int end_pos = first_pos + item.row_end;  // exclusive
  if (lanes && lane_item(item, group, d)) {
    run_lanes(batch, kv, item, group, end_pos, tile, w);
  } else {
    for (int t0 = 0; t0 < end_pos; t0 += tile) {
      const int t1 = std::min(t0 + tile, end_pos);
      // K goes in transposed so scores vectorise over positions, without horizontal sums.
      resolve_tile(batch, kv, item, t0, t1, w);
      if (transpose) flash::transpose_tile(w.k_rows.data(), t1 - t0, d, w.k_t.data(), stride);
      for (int v0 = 0; v0 < vectors; v0 += flash::kBlockVectors) {
        const int mv = std::min(flash::kBlockVectors, vectors - v0);
        // Causal: the vectors of row r see positions <= first_pos + r, here [t0, t0 + n_valid).
        int n_valid[flash::kBlockVectors];
        for (int v = 0; v < mv; ++v)
          n_valid[v] = std::min(t1, first_pos + item.row_begin + (v0 + v) / group + 1) - t0;
        const int n = n_valid[mv - 1];  // the block's widest vector (its last row)
        if (n <= 0) continue;
        const int n_pad = (n + flash::kLanes - 1) / flash::kLanes * flash::kLanes;
        const float* qs = w.qs.data() + static_cast<std::size_t>(v0) * d;
        float* s = w.scores.data();  // [mv, stride]
        if (transpose)
          flash::block_scores(qs, mv, d, w.k_t.data(), stride, n, s, stride);
        else
          for (int v = 0; v < mv; ++v)
            flash::dot_scores16(qs + static_cast<std::size_t>(v) * d, d, w.k_rows.data(), n_valid[v],
                                s + static_cast<std::size_t>(v) * stride);
        float alpha[flash::kBlockVectors];
        for (int v = 0; v < mv; ++v) {
          const auto vec = static_cast<std::size_t>(v0 + v);
          alpha[v] = flash::softmax_step(s + static_cast<std::size_t>(v) * stride, n_valid[v], n_pad,
                                         w.max[vec], w.denom[vec]);
        }
        flash::block_pv(s, mv, stride, w.v_rows.data(), n, alpha,
                        w.acc.data() + static_cast<std::size_t>(v0) * d, d);
      }
    }
  }

  for (int v = 0; v < vectors; ++v) {
    const int r = item.row_begin + v / group;
    const int h = item.kv_head * group + v % group;
    const auto vec = static_cast<std::size_t>(v);
    const float inv = 1.0f / w.denom[vec];
    const float* acc = w.acc.data() + vec * d;
    float* o = out + (static_cast<std::size_t>(row0 + r) * batch.n_heads + h) * d;
    for (int c = 0; c < d; ++c) o[c] = acc[c] * inv;
  }
}

}  // namespace

FlashAttention::FlashAttention(int tile, int query_rows, bool lanes)
    : tile_(tile), query_rows_(query_rows), lanes_(lanes) {
  check(tile >= 1 && tile <= 4096,
        "attention 'flash': tile must lie in [1, 4096], got " + std::to_string(tile));
  check(query_rows >= 1 && query_rows <= 1024,
        "attention 'flash': query_rows must lie in [1, 1024], got " + std::to_string(query_rows));
}

void FlashAttention::forward(const AttentionBatch& batch, const KvLayerView& kv, const float* q,
                             float* out, Device& device) {
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
    // Each thread keeps its scratch across calls (a decode step calls once per layer): sizes only
    // grow, so steady-state decode neither allocates nor clears it. k_t's padding columns past a
    // tile's last position are read by the score micro-kernel but never used; zeroed when they
    // first appear, they stay finite.
    thread_local Scratch w;
    const auto pad = static_cast<std::size_t>(padded_tile(tile_));
    const auto hd = static_cast<std::size_t>(batch.head_dim);
    const auto t = static_cast<std::size_t>(tile_);
    const std::size_t score_rows = std::max<std::size_t>(flash::kBlockVectors, flash::kNativeLanes);
    if (w.scores.size() < pad * score_rows) w.scores.resize(pad * score_rows);
    if (w.k_t.size() < pad * hd) w.k_t.assign(pad * hd, 0.0f);
    if (w.k_rows.size() < t) w.k_rows.resize(t);
    if (w.v_rows.size() < t) w.v_rows.resize(t);
    if (w.k_deq.size() < t * hd) w.k_deq.resize(t * hd);
    if (w.v_deq.size() < t * hd) w.v_deq.resize(t * hd);
    for (std::size_t i = begin; i < end; ++i) run_item(batch, kv, q, out, items[i], tile_, lanes_, w);
  });
}

}  // namespace inferlab::plugins
