// fp32 matmul: register tiles of R token rows x C output channels, AVX-512 or AVX2/FMA when
// available (compile-time: -march=native), a scalar omp-simd loop otherwise.
// See matmul.h for the contract and the roofline.
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/simd.h"

#include <algorithm>
#include <cstddef>

#if defined(__AVX512F__)
#include <immintrin.h>
#define INFERLAB_MATMUL_AVX512 1
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define INFERLAB_MATMUL_AVX2 1
#endif

namespace inferlab::cpu {
namespace {

#if INFERLAB_MATMUL_AVX2 || INFERLAB_MATMUL_AVX512
using cpu::hsum;  // kernels/cpu/simd.h (__m256 and __m512)
#endif

// y[r, c] for R rows of x and C rows of w: each w vector loaded once feeds R FMAs, each x
// vector C FMAs; R*C accumulators stay in registers (R*C + C + 1 <= 16 ymm).
template <int R, int C>
inline void tile(const float* x, std::size_t x_stride, const float* w, std::size_t w_stride, float* y,
                 std::size_t y_stride, int in) {
  int k = 0;
  float acc[R][C] = {};
#if INFERLAB_MATMUL_AVX512
  __m512 vacc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) vacc[r][c] = _mm512_setzero_ps();
  for (; k + 16 <= in; k += 16) {
    __m512 wv[C];
    for (int c = 0; c < C; ++c) wv[c] = _mm512_loadu_ps(w + c * w_stride + k);
    for (int r = 0; r < R; ++r) {
      const __m512 xv = _mm512_loadu_ps(x + r * x_stride + k);
      for (int c = 0; c < C; ++c) vacc[r][c] = _mm512_fmadd_ps(xv, wv[c], vacc[r][c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = hsum(vacc[r][c]);
#elif INFERLAB_MATMUL_AVX2
  __m256 vacc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) vacc[r][c] = _mm256_setzero_ps();
  for (; k + 8 <= in; k += 8) {
    __m256 wv[C];
    for (int c = 0; c < C; ++c) wv[c] = _mm256_loadu_ps(w + c * w_stride + k);
    for (int r = 0; r < R; ++r) {
      const __m256 xv = _mm256_loadu_ps(x + r * x_stride + k);
      for (int c = 0; c < C; ++c) vacc[r][c] = _mm256_fmadd_ps(xv, wv[c], vacc[r][c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = hsum(vacc[r][c]);
#endif
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) {
      const float* xr = x + r * x_stride;
      const float* wc = w + c * w_stride;
      float a = 0.0f;
#pragma omp simd reduction(+ : a)
      for (int kk = k; kk < in; ++kk) a += xr[kk] * wc[kk];
      y[r * y_stride + c] = acc[r][c] + a;
    }
}

// Output channels per tile for n >= 3: a 4 x C tile needs 4*C + C + 1 vector registers
// (32 with AVX-512, 16 with AVX2).
#if INFERLAB_MATMUL_AVX512
constexpr int kBatchChannels = 4;
#else
constexpr int kBatchChannels = 2;
#endif

// Rows [0, n) x output channels [o0, o1). Output channels are the outer loop so each block of
// C weight rows is streamed from memory once and reused across all token rows, which stay in
// cache (n * in floats).
template <int C>
void run_channels(const float* x, const float* w, float* y, int n, int out, int in, int o0, int o1) {
  const std::size_t xs = static_cast<std::size_t>(in), ws = static_cast<std::size_t>(in),
                    ys = static_cast<std::size_t>(out);
  int o = o0;
  for (; o + C <= o1; o += C) {
    const float* wb = w + static_cast<std::size_t>(o) * ws;
    int r = 0;
    for (; r + 4 <= n; r += 4) tile<4, C>(x + r * xs, xs, wb, ws, y + r * ys + o, ys, in);
    switch (n - r) {
      case 3: tile<3, C>(x + r * xs, xs, wb, ws, y + r * ys + o, ys, in); break;
      case 2: tile<2, C>(x + r * xs, xs, wb, ws, y + r * ys + o, ys, in); break;
      case 1: tile<1, C>(x + r * xs, xs, wb, ws, y + r * ys + o, ys, in); break;
      default: break;
    }
  }
  for (; o < o1; ++o) {
    const float* wb = w + static_cast<std::size_t>(o) * ws;
    for (int r = 0; r < n; ++r) tile<1, 1>(x + r * xs, xs, wb, ws, y + r * ys + o, ys, in);
  }
}

}  // namespace

void matmul_f32(const float* x, const float* w, float* y, int n, int out, int in, ThreadPool& pool) {
  if (n <= 0 || out <= 0) return;
  // Work units of 8 output channels; a chunk should carry at least ~64K multiply-adds so the
  // dispatch cost stays small against it.
  constexpr int kUnit = 8;
  const std::size_t units = static_cast<std::size_t>((out + kUnit - 1) / kUnit);
  const std::size_t work_per_unit = static_cast<std::size_t>(kUnit) * static_cast<std::size_t>(in) *
                                    static_cast<std::size_t>(n);
  const std::size_t grain = std::max<std::size_t>(1, (std::size_t{1} << 16) / std::max<std::size_t>(1, work_per_unit));
  // The lambda captures one reference so std::function stores it inline (no allocation per call).
  struct Args {
    const float *x, *w;
    float* y;
    int n, out, in;
  } a{x, w, y, n, out, in};
  pool.parallel_for(
      units,
      [&a](std::size_t begin, std::size_t end) {
        const int o0 = static_cast<int>(begin) * kUnit;
        const int o1 = std::min(a.out, static_cast<int>(end) * kUnit);
        // Decode (n <= 2) is bandwidth bound: four channels at a time for more loads in flight.
        if (a.n <= 2)
          run_channels<4>(a.x, a.w, a.y, a.n, a.out, a.in, o0, o1);
        else
          run_channels<kBatchChannels>(a.x, a.w, a.y, a.n, a.out, a.in, o0, o1);
      },
      grain);
}

}  // namespace inferlab::cpu
