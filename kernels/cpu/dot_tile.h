// The fp32 register tile and the row/channel walks shared by the row-streaming matmuls
// (matmul.cpp: fp32 weights; matmul_int8.cpp: int8 weights widened in registers or once into a
// buffer; matmul_int4.cpp: int4 groups dequantized once into a buffer). Written once here as
// templates over the vector type (simd.h: Vec512, Vec256, VecScalar), the weight type and the
// output step, so every caller inlines its own instance. The row-tile walk and the split of the
// output channels over the pool also serve the other row-major matmuls (matmul_int4_rows,
// matmul_int4_act, matmul_int8_act, matmul_gguf).
//
// Summation order: y[r, c] accumulates x[r, k] * w[c, k] in V::kWidth lanes over the vector part
// of k, sums the lanes (V::sum), then adds an `omp simd` sum of the rest of k. That order does not
// depend on R or C, so for one weight type W a row gives the same bits whatever tile it is in.
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "inferlab/thread_pool.h"
#include "kernels/cpu/simd.h"

namespace inferlab::cpu {

// Output steps for dot_tile: y = dot, or y = dot * scale[c] (per-channel weight scales).
struct PlainDot {
  float operator()(int /*c*/, float dot) const { return dot; }
};
struct ScaledDot {
  const float* scale;  // [C]
  float operator()(int c, float dot) const { return dot * scale[c]; }
};

// y[r * ys + c] = out(c, x[r, :] · w[c, :]) for R token rows and C weight rows: each weight
// vector is loaded once and feeds R FMAs, each x vector C FMAs; the R*C accumulators stay in
// registers (R*C + C + 1 vector registers: 16 ymm with AVX2, 32 zmm with AVX-512).
// x: [R, in] fp32, row stride xs; w: [C, in] fp32 or int8 (V::load widens it), row stride ws;
// y: [R, C], row stride ys. V = VecScalar has no vector loop (all of k in the `omp simd` loop).
template <class V, int R, int C, class W, class Out>
inline void dot_tile(const float* x, std::size_t xs, const W* w, std::size_t ws, float* y, std::size_t ys, int in,
                     Out out) {
  float acc[R][C] = {};
  int k = 0;
  if constexpr (V::kWidth > 1) {
    typename V::V vacc[R][C];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int c = 0; c < C; ++c) vacc[r][c] = V::zero();
    for (; k + V::kWidth <= in; k += V::kWidth) {
      typename V::V wv[C];
#pragma GCC unroll 16
      for (int c = 0; c < C; ++c) wv[c] = V::load(w + c * ws + k);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const typename V::V xv = V::load(x + r * xs + k);
#pragma GCC unroll 16
        for (int c = 0; c < C; ++c) vacc[r][c] = V::fmadd(xv, wv[c], vacc[r][c]);
      }
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int c = 0; c < C; ++c) acc[r][c] = V::sum(vacc[r][c]);
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) {
      const float* xr = x + r * xs;
      const W* wc = w + c * ws;
      float a = 0.0f;
#pragma omp simd reduction(+ : a)
      for (int kk = k; kk < in; ++kk) a += xr[kk] * static_cast<float>(wc[kk]);
      y[r * ys + c] = out(c, acc[r][c] + a);
    }
}

// Token rows [0, n) as tiles: f.template operator()<R>(r) for the tile of rows [r, r + R),
// tiles of 4 rows, then one tile of the 3, 2 or 1 rows left.
template <class F>
inline void for_row_tiles(int n, F&& f) {
  int r = 0;
  for (; r + 4 <= n; r += 4) f.template operator()<4>(r);
  switch (n - r) {
    case 3: f.template operator()<3>(r); break;
    case 2: f.template operator()<2>(r); break;
    case 1: f.template operator()<1>(r); break;
    default: break;
  }
}

// Output channels [o0, o1) as blocks: f.template operator()<C>(o) for channels [o, o + C) while
// C fit, then f.template operator()<1>(o) for each channel left.
template <int C, class F>
inline void for_channel_blocks(int o0, int o1, F&& f) {
  int o = o0;
  for (; o + C <= o1; o += C) f.template operator()<C>(o);
  for (; o < o1; ++o) f.template operator()<1>(o);
}

// Output channels [0, out) of an n-row, in-wide matmul split over the pool: fn(o0, o1) runs
// channels [o0, o1). Units of kChannelUnit channels; a chunk carries at least ~64K multiply-adds
// so the dispatch cost stays small against it. fn is captured by reference, so std::function
// holds the wrapper inline (no allocation per call).
inline constexpr int kChannelUnit = 8;
template <class F>
void parallel_for_channels(ThreadPool& pool, int n, int out, int in, const F& fn) {
  const std::size_t units = static_cast<std::size_t>((out + kChannelUnit - 1) / kChannelUnit);
  const std::size_t work_per_unit = static_cast<std::size_t>(kChannelUnit) *
                                    static_cast<std::size_t>(std::max(in, 1)) *
                                    static_cast<std::size_t>(std::max(n, 1));
  const std::size_t grain = std::max<std::size_t>(1, (std::size_t{1} << 16) / work_per_unit);
  pool.parallel_for(
      units,
      [&fn, out](std::size_t begin, std::size_t end) {
        fn(static_cast<int>(begin) * kChannelUnit, std::min(out, static_cast<int>(end) * kChannelUnit));
      },
      grain);
}

// This thread's fp32 scratch of at least `floats` elements, reused across calls.
inline float* thread_scratch(std::size_t floats) {
  thread_local std::vector<float> buffer;
  if (buffer.size() < floats) buffer.resize(floats);
  return buffer.data();
}

// All n token rows against C weight rows that widen(c, dst) first writes as fp32 into this
// thread's scratch (dst: [in]), each weight row widened once for every token row:
// y[r * ys + c] = out(c, x[r, :] · row c). x: [n, in] stride xs; y: [n, C] stride ys.
template <class V, int C, class Widen, class Out>
void dot_rows_widened(const float* x, std::size_t xs, int n, int in, const Widen& widen, float* y, std::size_t ys,
                      Out out) {
  const std::size_t ws = static_cast<std::size_t>(in);
  float* w = thread_scratch(static_cast<std::size_t>(C) * ws);  // [C, in]
#pragma GCC unroll 16
  for (int c = 0; c < C; ++c) widen(c, w + c * ws);
  for_row_tiles(n, [&]<int R>(int r) { dot_tile<V, R, C>(x + r * xs, xs, w, ws, y + r * ys, ys, in, out); });
}

}  // namespace inferlab::cpu
