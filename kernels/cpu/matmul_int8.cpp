// Weight-only int8 matmul: register tiles of R token rows x C output channels. For small
// batches each 8-wide int8 weight vector is sign-extended and converted to float in registers
// once per tile and feeds R FMAs; from kInt8WidenOnceRows rows on (linear_plan.h), a block of C weight rows is
// widened once into a float buffer shared by all token rows. With AVX-512, batches below
// kInt8WidenOnceRows stream one weight row at a time instead (row_stream: one sequential read per
// thread). With the AMX bf16 tiles, kInt8AmxMinRows..kInt8AmxMaxRows token rows go to
// matmul_int8_amx and more rows (of 32 inputs or more) to gemm_amx_dequant: the choice is
// plan_cpu_linear's (linear_plan.h). AVX2/FMA when available, an `omp simd` loop otherwise. Contract and roofline:
// matmul_int8.h.
#include "kernels/cpu/matmul_int8.h"
#include "kernels/cpu/amx.h"
#include "kernels/cpu/decode_prefetch.h"
#include "kernels/cpu/dot_tile.h"
#include "kernels/cpu/linear_plan.h"
#include "kernels/cpu/gemm_amx_dequant.h"
#include "kernels/cpu/matmul_int8_amx.h"

#include <algorithm>
#include <cstddef>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define INFERLAB_MATMUL_INT8_AVX2 1
#endif
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)  // as CpuIsa::avx512
#define INFERLAB_MATMUL_INT8_AVX512 1
#endif

namespace inferlab::cpu {
namespace {

// The vector the C-row tiles widen int8 weights into (dot_tile.h): 8 lanes with AVX2, also under
// AVX-512 (whose batches below kInt8WidenOnceRows take row_stream instead).
#if INFERLAB_MATMUL_INT8_AVX2
using TileLanes = Vec256;
#else
using TileLanes = VecScalar;
#endif

#if INFERLAB_MATMUL_INT8_AVX512
// y[r * ys + c] = scale[c] * x[r, :] · q[c * qs, + in) for R token rows and C (1 or 2) weight
// rows, each read front to back: one sequential stream per weight row (the C-row tiles above walk
// C interleaved streams 8 bytes at a time and stall on their loads at decode), prefetched `ahead`
// bytes on (decode_prefetch.h: with ~3 vector instructions per 16 bytes the out-of-order window
// alone kept too few lines in flight). 4 independent accumulators per token row and weight row
// (2 when C = 2) hide the FMA latency. From 2 token rows on, C = 2 weight rows (two streams of 32
// bytes a step) share each x load: 5-12 % less time at 2-4 rows; one row keeps one stream (two
// were ~10 % slower there; Xeon, 2026-12-06).
template <int R, int C>
inline void row_stream(const float* x, std::size_t xs, const std::int8_t* q, std::size_t qs, const float* scale, float* y,
                       std::size_t ys, int in, int ahead) {
  constexpr int U = C == 1 ? 4 : 2;
  __m512 acc[R][C][U];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c)
#pragma GCC unroll 16
      for (int u = 0; u < U; ++u) acc[r][c][u] = _mm512_setzero_ps();
  int k = 0;
  for (; k + 16 * U <= in; k += 16 * U) {
    __m512 w[C][U];
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) {
      prefetch_ahead(q + c * qs + k, 16 * U, ahead);
#pragma GCC unroll 16
      for (int u = 0; u < U; ++u) w[c][u] = Vec512::load(q + c * qs + k + 16 * u);
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int u = 0; u < U; ++u) {
        const __m512 xv = _mm512_loadu_ps(x + r * xs + k + 16 * u);
#pragma GCC unroll 16
        for (int c = 0; c < C; ++c) acc[r][c][u] = _mm512_fmadd_ps(xv, w[c][u], acc[r][c][u]);
      }
  }
  for (; k + 16 <= in; k += 16)
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) {
      const __m512 w = Vec512::load(q + c * qs + k);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) acc[r][c][0] = _mm512_fmadd_ps(_mm512_loadu_ps(x + r * xs + k), w, acc[r][c][0]);
    }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) {
#pragma GCC unroll 16
      for (int u = 1; u < U; ++u) acc[r][c][0] = _mm512_add_ps(acc[r][c][0], acc[r][c][u]);
      float a = hsum(acc[r][c][0]);
      for (int kk = k; kk < in; ++kk) a += x[r * xs + kk] * static_cast<float>(q[c * qs + kk]);
      y[r * ys + c] = a * scale[c];
    }
}

// Channels [o0, o1) of n < kInt8WidenOnceRows token rows: pairs of weight rows from 2 token rows on,
// else one weight row at a time (row_stream).
void run_rows_streamed(const float* x, const std::int8_t* q, const float* scale, float* y, int n, int out, int in,
                       int o0, int o1) {
  const std::size_t xs = static_cast<std::size_t>(in), ys = static_cast<std::size_t>(out);
  const int ahead = decode_prefetch_bytes();
  int o = o0;
  for (; n >= 2 && o + 2 <= o1; o += 2) {  // two weight rows per tile: each x load feeds both
    const std::int8_t* qo = q + static_cast<std::size_t>(o) * xs;
    for_row_tiles(n, [&]<int R>(int r) {
      row_stream<R, 2>(x + r * xs, xs, qo, xs, scale + o, y + r * ys + o, ys, in, ahead);
    });
  }
  for (; o < o1; ++o) {
    const std::int8_t* qo = q + static_cast<std::size_t>(o) * xs;
    for_row_tiles(n, [&]<int R>(int r) {
      row_stream<R, 1>(x + r * xs, xs, qo, xs, scale + o, y + r * ys + o, ys, in, ahead);
    });
  }
}
#endif

// w[0, in) = the codes of one weight row as exact floats.
inline void widen_row(const std::int8_t* q, int in, float* w) {
#pragma omp simd
  for (int k = 0; k < in; ++k) w[k] = static_cast<float>(q[k]);
}

// All n rows for output channels [o0, o1): each block of C weight rows is streamed once and
// reused across every token row (x stays in cache), widened once into a buffer from
// kInt8WidenOnceRows rows on, else in registers by every tile; the single channels left over are
// always widened in registers (without AVX2 the two orders of the `omp simd` sum differ in the
// last bits, and this keeps a channel's result what it has been).
template <int C>
void run_channels(const float* x, const std::int8_t* q, const float* scale, float* y, int n,
                  int out, int in, int o0, int o1) {
  const std::size_t xs = static_cast<std::size_t>(in), ys = static_cast<std::size_t>(out);
  for_channel_blocks<C>(o0, o1, [&]<int CB>(int o) {
    const std::int8_t* qb = q + static_cast<std::size_t>(o) * xs;
    const ScaledDot out_step{scale + o};
    if (CB > 1 && n >= kInt8WidenOnceRows) {
      dot_rows_widened<TileLanes, CB>(
          x, xs, n, in,
          [&](int c, float* w) { widen_row(qb + static_cast<std::size_t>(c) * xs, in, w); },
          y + o, ys, out_step);
      return;
    }
    for_row_tiles(n, [&]<int R>(int r) {
      dot_tile<TileLanes, R, CB>(x + r * xs, xs, qb, xs, y + r * ys + o, ys, in, out_step);
    });
  });
}

}  // namespace

void matmul_int8(const float* x, const std::int8_t* q, const float* scale, float* y, int n,
                 int out, int in, ThreadPool& pool) {
  if (n <= 0 || out <= 0) return;
  const CpuKernel k = plan_cpu_linear(CpuFormat::kW8A16, n, CpuLinearShape{.out = out, .in = in, .packed = false},
                                      CpuIsa::host());
  if (k == CpuKernel::kInt8Amx) {
    matmul_int8_amx(x, q, scale, y, n, out, in, pool);
    return;
  }
  if (k == CpuKernel::kAmxDequant) {
    // Codes are exact in bf16: one weight term, the channel scale on the fp32 sums.
    struct Rows {
      const std::int8_t* q;
      int in;
    } rows{q, in};
    AmxDequantWeights w;
    w.row = [](const void* ctx, int o, float* dst) {
      const auto& m = *static_cast<const Rows*>(ctx);
      widen_row(m.q + static_cast<std::size_t>(o) * m.in, m.in, dst);
    };
    w.ctx = &rows;
    w.out = out;
    w.in = in;
    w.weight_terms = 1;
    w.channel_scale = scale;
    gemm_amx_dequant(x, n, w, y, pool);
    return;
  }
  parallel_for_channels(pool, n, out, in, [&](int o0, int o1) {
#if INFERLAB_MATMUL_INT8_AVX512
    if (k == CpuKernel::kInt8Stream) {
      run_rows_streamed(x, q, scale, y, n, out, in, o0, o1);
      return;
    }
#endif
    if (n <= 2)
      run_channels<4>(x, q, scale, y, n, out, in, o0, o1);  // more loads in flight
    else
      run_channels<2>(x, q, scale, y, n, out, in, o0, o1);
  });
}

}  // namespace inferlab::cpu
