#include "partial_attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace inferlab::plugins::split_k {

namespace {

// 16 floats: one AVX-512 register or two AVX2 ones. Output columns are accumulated in such a
// chunk held in registers across a whole tile of positions instead of being stored and
// reloaded per position.
using Lane16 = float __attribute__((vector_size(64)));
constexpr int kLane = 16;

// acc[c] += sum_j w[j] * v_rows[j][c] for j in [0, n).
void add_weighted_values(const float* w, const float* const* v_rows, int n, int d, float* acc) {
  int c = 0;
  for (; c + kLane <= d; c += kLane) {
    Lane16 sum;
    std::memcpy(&sum, acc + c, sizeof sum);
    for (int j = 0; j < n; ++j) {
      Lane16 v;
      std::memcpy(&v, v_rows[j] + c, sizeof v);
      sum += w[j] * v;
    }
    std::memcpy(acc + c, &sum, sizeof sum);
  }
  for (; c < d; ++c) {  // head_dim not a multiple of 16
    float sum = acc[c];
    for (int j = 0; j < n; ++j) sum += w[j] * v_rows[j][c];
    acc[c] = sum;
  }
}

}  // namespace

void reset_partial(PartialView state, int vectors, int head_dim) {
  std::fill(state.max, state.max + vectors, -INFINITY);
  std::fill(state.denom, state.denom + vectors, 0.0f);
  std::fill(state.acc, state.acc + static_cast<std::size_t>(vectors) * head_dim, 0.0f);
}

void attend_range(const AttentionBatch& batch, const KvLayerView& kv, const float* q,
                  const QueryBlock& block, int pos_begin, int pos_end, PartialView state,
                  RangeScratch& scratch) {
  const int d = batch.head_dim;
  const int group = batch.n_heads / batch.n_kv_heads;
  const int bs = kv.block_size;
  const auto seq = static_cast<std::size_t>(block.seq);
  const int row0 = batch.query_start[seq];
  const int n_q = batch.query_start[seq + 1] - row0;
  const int first_pos = batch.context_len[seq] - n_q;  // position of local row 0
  const auto table = batch.table(seq);
  // No row of the block sees past the position of its last row.
  pos_end = std::min(pos_end, first_pos + block.row_end);

  scratch.k_rows.resize(kPositionTile);
  scratch.v_rows.resize(kPositionTile);
  scratch.k_deq.resize(static_cast<std::size_t>(kPositionTile) * static_cast<std::size_t>(d));
  scratch.v_deq.resize(scratch.k_deq.size());
  scratch.scores.resize(static_cast<std::size_t>(group) * kPositionTile);

  for (int t0 = pos_begin; t0 < pos_end; t0 += kPositionTile) {
    const int t1 = std::min(t0 + kPositionTile, pos_end);
    for (int p = t0; p < t1; ++p) {
      const int slot = table[static_cast<std::size_t>(p / bs)] * bs + p % bs;
      const std::size_t j = static_cast<std::size_t>(p - t0) * static_cast<std::size_t>(d);
      scratch.k_rows[static_cast<std::size_t>(p - t0)] = kv.k_row(slot, block.kv_head, scratch.k_deq.data() + j);
      scratch.v_rows[static_cast<std::size_t>(p - t0)] = kv.v_row(slot, block.kv_head, scratch.v_deq.data() + j);
    }
    for (int r = block.row_begin; r < block.row_end; ++r) {
      const int n = std::min(t1, first_pos + r + 1) - t0;  // positions row r may see
      if (n <= 0) continue;
      // The group's query vectors of row r are contiguous: heads kv_head*group .. +group-1.
      const float* q_row = q + (static_cast<std::size_t>(row0 + r) * batch.n_heads +
                                static_cast<std::size_t>(block.kv_head) * group) * d;
      // scores [group, tile]: each K vector is loaded once for the whole group.
      for (int j = 0; j < n; ++j) {
        const float* k = scratch.k_rows[static_cast<std::size_t>(j)];
        for (int g = 0; g < group; ++g) {
          const float* qg = q_row + static_cast<std::size_t>(g) * d;
          float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
          for (int c = 0; c < d; ++c) dot += qg[c] * k[c];
          scratch.scores[static_cast<std::size_t>(g) * kPositionTile + j] = dot * batch.scale;
        }
      }
      for (int g = 0; g < group; ++g) {
        const std::size_t vec = static_cast<std::size_t>(r - block.row_begin) * group + g;
        float* s = scratch.scores.data() + static_cast<std::size_t>(g) * kPositionTile;
        float* acc = state.acc + vec * d;
        const float tile_max = *std::max_element(s, s + n);
        const float old_max = state.max[vec];
        if (tile_max > old_max) {  // rescale what was summed under the smaller max
          const float shrink = std::exp(old_max - tile_max);  // 0 when nothing was seen yet
          state.denom[vec] *= shrink;
#pragma omp simd
          for (int c = 0; c < d; ++c) acc[c] *= shrink;
          state.max[vec] = tile_max;
        }
        const float m = state.max[vec];
        float sum = 0.0f;
        for (int j = 0; j < n; ++j) {
          s[j] = std::exp(s[j] - m);
          sum += s[j];
        }
        state.denom[vec] += sum;
        add_weighted_values(s, scratch.v_rows.data(), n, d, acc);
      }
    }
  }
}

void write_normalised(const AttentionBatch& batch, const QueryBlock& block, PartialView state,
                      float* out) {
  const int d = batch.head_dim;
  const int group = batch.n_heads / batch.n_kv_heads;
  const int row0 = batch.query_start[static_cast<std::size_t>(block.seq)];
  for (int r = block.row_begin; r < block.row_end; ++r) {
    float* o = out + (static_cast<std::size_t>(row0 + r) * batch.n_heads +
                      static_cast<std::size_t>(block.kv_head) * group) * d;
    const std::size_t vec0 = static_cast<std::size_t>(r - block.row_begin) * group;
    for (int g = 0; g < group; ++g) {
      const float inv = 1.0f / state.denom[vec0 + g];
      const float* acc = state.acc + (vec0 + g) * d;
      for (int c = 0; c < d; ++c) o[static_cast<std::size_t>(g) * d + c] = acc[c] * inv;
    }
  }
}

void merge_partials(const AttentionBatch& batch, const QueryBlock& block,
                    std::span<const PartialView> parts, float* out) {
  const int d = batch.head_dim;
  const int group = batch.n_heads / batch.n_kv_heads;
  const int row0 = batch.query_start[static_cast<std::size_t>(block.seq)];
  for (int r = block.row_begin; r < block.row_end; ++r)
    for (int g = 0; g < group; ++g) {
      const std::size_t vec = static_cast<std::size_t>(r - block.row_begin) * group + g;
      float* o = out + (static_cast<std::size_t>(row0 + r) * batch.n_heads +
                        static_cast<std::size_t>(block.kv_head) * group + g) * d;
      float global_max = -INFINITY;
      for (const PartialView& part : parts) global_max = std::max(global_max, part.max[vec]);
      std::fill(o, o + d, 0.0f);
      float denom = 0.0f;
      for (const PartialView& part : parts) {
        if (part.denom[vec] == 0.0f) continue;  // this split lies past the row's position
        const float w = std::exp(part.max[vec] - global_max);
        denom += w * part.denom[vec];
        const float* acc = part.acc + vec * d;
#pragma omp simd
        for (int c = 0; c < d; ++c) o[c] += w * acc[c];
      }
      const float inv = 1.0f / denom;
      for (int c = 0; c < d; ++c) o[c] *= inv;
    }
}

}  // namespace inferlab::plugins::split_k
