// Weight-only int8 matmul: register tiles of R token rows x C output channels. For small
// batches each 8-wide int8 weight vector is sign-extended and converted to float in registers
// once per tile and feeds R FMAs; from kWidenOnceRows rows on, a block of C weight rows is
// widened once into a float buffer shared by all token rows. With AVX-512, batches below
// kWidenOnceRows stream one weight row at a time instead (row_stream: one sequential read per
// thread). With the AMX bf16 tiles, kInt8AmxMinRows..kInt8AmxMaxRows token rows go to
// matmul_int8_amx. AVX2/FMA when available, an `omp simd` loop otherwise. Contract and roofline:
// matmul_int8.h.
#include "kernels/cpu/matmul_int8.h"
#include "kernels/cpu/amx.h"
#include "kernels/cpu/decode_prefetch.h"
#include "kernels/cpu/matmul_int8_amx.h"
#include "kernels/cpu/simd.h"

#include <algorithm>
#include <cstddef>
#include <vector>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define INFERLAB_MATMUL_INT8_AVX2 1
#endif
#if defined(__AVX512F__)
#define INFERLAB_MATMUL_INT8_AVX512 1
#endif

namespace inferlab::cpu {
namespace {

#if INFERLAB_MATMUL_INT8_AVX2

// 8 weights as floats: int8 are widened in registers, floats (pre-widened rows) just loaded.
inline __m256 load8(const std::int8_t* p) {
  __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
}
inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
#endif

// y[r, c] = scale[c] * x[r, :] · q[c, :] for R rows of x and C channels. Q is int8, or the same
// integers already widened to float. x: [R, in] stride xs; q: [C, in] stride in; y: [R, C]
// stride ys.
template <int R, int C, class Q>
inline void tile(const float* x, std::size_t xs, const Q* q, const float* scale, float* y,
                 std::size_t ys, int in) {
  const std::size_t qs = static_cast<std::size_t>(in);
  float acc[R][C] = {};
  int k = 0;
#if INFERLAB_MATMUL_INT8_AVX2
  __m256 vacc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) vacc[r][c] = _mm256_setzero_ps();
  for (; k + 8 <= in; k += 8) {
    __m256 wv[C];
    for (int c = 0; c < C; ++c) wv[c] = load8(q + c * qs + k);
    for (int r = 0; r < R; ++r) {
      const __m256 xv = _mm256_loadu_ps(x + r * xs + k);
      for (int c = 0; c < C; ++c) vacc[r][c] = _mm256_fmadd_ps(xv, wv[c], vacc[r][c]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] = hsum(vacc[r][c]);
#endif
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) {
      const float* xr = x + r * xs;
      const Q* qc = q + c * qs;
      float a = 0.0f;
#pragma omp simd reduction(+ : a)
      for (int kk = k; kk < in; ++kk) a += xr[kk] * static_cast<float>(qc[kk]);
      y[r * ys + c] = (acc[r][c] + a) * scale[c];
    }
}

#if INFERLAB_MATMUL_INT8_AVX512
// 16 int8 weights as floats (the all-lanes zero-mask forms: GCC 12's unmasked intrinsics trip
// -Werror=maybe-uninitialized, see gemm_panels_int8.cpp).
inline __m512 widen16(const std::int8_t* p) {
  constexpr __mmask16 kAll = 0xFFFF;
  const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  return _mm512_maskz_cvtepi32_ps(kAll, _mm512_maskz_cvtepi8_epi32(kAll, b));
}

// y[r * ys] = scale * x[r, :] · q[0, in) for R token rows and ONE weight row, read front to
// back: a single sequential stream per thread (the C-row tiles above walk C interleaved streams
// 8 bytes at a time and stall on their loads at decode), prefetched `ahead` bytes on
// (decode_prefetch.h: with ~3 vector instructions per 16 bytes the out-of-order window alone kept
// too few lines in flight). 4 independent accumulators per token row hide the FMA latency.
template <int R>
inline void row_stream(const float* x, std::size_t xs, const std::int8_t* q, float scale, float* y, std::size_t ys,
                       int in, int ahead) {
  constexpr int U = 4;
  __m512 acc[R][U];
  for (int r = 0; r < R; ++r)
    for (int u = 0; u < U; ++u) acc[r][u] = _mm512_setzero_ps();
  int k = 0;
  for (; k + 16 * U <= in; k += 16 * U) {
    prefetch_ahead(q + k, 16 * U, ahead);
    __m512 w[U];
    for (int u = 0; u < U; ++u) w[u] = widen16(q + k + 16 * u);
    for (int r = 0; r < R; ++r)
      for (int u = 0; u < U; ++u)
        acc[r][u] = _mm512_fmadd_ps(_mm512_loadu_ps(x + r * xs + k + 16 * u), w[u], acc[r][u]);
  }
  for (; k + 16 <= in; k += 16) {
    const __m512 w = widen16(q + k);
    for (int r = 0; r < R; ++r) acc[r][0] = _mm512_fmadd_ps(_mm512_loadu_ps(x + r * xs + k), w, acc[r][0]);
  }
  for (int r = 0; r < R; ++r) {
    for (int u = 1; u < U; ++u) acc[r][0] = _mm512_add_ps(acc[r][0], acc[r][u]);
    float a = hsum(acc[r][0]);
    for (int kk = k; kk < in; ++kk) a += x[r * xs + kk] * static_cast<float>(q[kk]);
    y[r * ys] = a * scale;
  }
}

// Channels [o0, o1) of n < kWidenOnceRows token rows, one weight row at a time (row_stream).
void run_rows_streamed(const float* x, const std::int8_t* q, const float* scale, float* y, int n, int out, int in,
                       int o0, int o1) {
  const std::size_t xs = static_cast<std::size_t>(in), ys = static_cast<std::size_t>(out);
  const int ahead = decode_prefetch_bytes();
  for (int o = o0; o < o1; ++o) {
    const std::int8_t* qo = q + static_cast<std::size_t>(o) * xs;
    int r = 0;
    for (; r + 4 <= n; r += 4) row_stream<4>(x + r * xs, xs, qo, scale[o], y + r * ys + o, ys, in, ahead);
    switch (n - r) {
      case 3: row_stream<3>(x + r * xs, xs, qo, scale[o], y + r * ys + o, ys, in, ahead); break;
      case 2: row_stream<2>(x + r * xs, xs, qo, scale[o], y + r * ys + o, ys, in, ahead); break;
      case 1: row_stream<1>(x + r * xs, xs, qo, scale[o], y + r * ys + o, ys, in, ahead); break;
      default: break;
    }
  }
}
#endif

// Rows of a batch at which a block of weight rows is widened once into a float buffer and then
// shared by every token row, instead of being re-widened for each tile of 4 rows.
constexpr int kWidenOnceRows = 8;

// All n rows for output channels [o0, o1): each block of C weight rows is streamed once and
// reused across every token row (x stays in cache).
template <int C>
void run_channels(const float* x, const std::int8_t* q, const float* scale, float* y, int n,
                  int out, int in, int o0, int o1) {
  const std::size_t xs = static_cast<std::size_t>(in), ys = static_cast<std::size_t>(out);
  thread_local std::vector<float> widened;  // [C, in] when n >= kWidenOnceRows: this worker's, reused
  if (n >= kWidenOnceRows) widened.resize(static_cast<std::size_t>(C) * in);
  int o = o0;
  for (; o + C <= o1; o += C) {
    const float* sb = scale + o;
    if (n >= kWidenOnceRows) {
      const std::int8_t* qb = q + static_cast<std::size_t>(o) * in;
#pragma omp simd
      for (std::size_t i = 0; i < widened.size(); ++i) widened[i] = static_cast<float>(qb[i]);
      const float* wb = widened.data();
      int r = 0;
      for (; r + 4 <= n; r += 4) tile<4, C>(x + r * xs, xs, wb, sb, y + r * ys + o, ys, in);
      for (; r < n; ++r) tile<1, C>(x + r * xs, xs, wb, sb, y + r * ys + o, ys, in);
      continue;
    }
    const std::int8_t* qb = q + static_cast<std::size_t>(o) * in;
    int r = 0;
    for (; r + 4 <= n; r += 4) tile<4, C>(x + r * xs, xs, qb, sb, y + r * ys + o, ys, in);
    switch (n - r) {
      case 3: tile<3, C>(x + r * xs, xs, qb, sb, y + r * ys + o, ys, in); break;
      case 2: tile<2, C>(x + r * xs, xs, qb, sb, y + r * ys + o, ys, in); break;
      case 1: tile<1, C>(x + r * xs, xs, qb, sb, y + r * ys + o, ys, in); break;
      default: break;
    }
  }
  for (; o < o1; ++o) {
    const std::int8_t* qb = q + static_cast<std::size_t>(o) * in;
    for (int r = 0; r < n; ++r) tile<1, 1>(x + r * xs, xs, qb, scale + o, y + r * ys + o, ys, in);
  }
}

}  // namespace

void matmul_int8(const float* x, const std::int8_t* q, const float* scale, float* y, int n,
                 int out, int in, ThreadPool& pool) {
  if (n <= 0 || out <= 0) return;
  if (n >= kInt8AmxMinRows && n <= kInt8AmxMaxRows && amx_bf16_enabled()) {
    matmul_int8_amx(x, q, scale, y, n, out, in, pool);
    return;
  }
  // Units of 8 channels; a chunk should carry ~64K multiply-adds to amortise dispatch.
  constexpr int kUnit = 8;
  const std::size_t units = static_cast<std::size_t>((out + kUnit - 1) / kUnit);
  const std::size_t work_per_unit = static_cast<std::size_t>(kUnit) *
                                    static_cast<std::size_t>(std::max(in, 1)) *
                                    static_cast<std::size_t>(n);
  const std::size_t grain = std::max<std::size_t>(1, (std::size_t{1} << 16) / work_per_unit);
  pool.parallel_for(
      units,
      [&](std::size_t begin, std::size_t end) {
        const int o0 = static_cast<int>(begin) * kUnit;
        const int o1 = std::min(out, static_cast<int>(end) * kUnit);
#if INFERLAB_MATMUL_INT8_AVX512
        if (n < kWidenOnceRows) {
          run_rows_streamed(x, q, scale, y, n, out, in, o0, o1);
          return;
        }
#endif
        if (n <= 2)
          run_channels<4>(x, q, scale, y, n, out, in, o0, o1);  // more loads in flight
        else
          run_channels<2>(x, q, scale, y, n, out, in, o0, o1);
      },
      grain);
}

}  // namespace inferlab::cpu
