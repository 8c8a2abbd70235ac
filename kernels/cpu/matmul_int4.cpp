// Weight-only int4 matmul with group-wise scales: register tiles of R token rows x C output
// channels. For small batches each 8-code word of a weight row is unpacked, offset by its
// group's zero point and scaled in registers once per tile and feeds R FMAs; from
// kDequantOnceRows rows on (and always without AVX2), a block of C weight rows is dequantized
// once into a float buffer shared by all token rows. AVX2/FMA when available, `omp simd` loops
// otherwise. Contract and roofline: matmul_int4.h; format: kernels/ref/matmul_int4.h.
#include "kernels/cpu/matmul_int4.h"
#include "kernels/cpu/int4_zero_term.h"
#include "kernels/cpu/simd.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "inferlab/error.h"
#include "kernels/ref/matmul_int4.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define INFERLAB_MATMUL_INT4_AVX2 1
#endif
#if defined(__AVX512F__)
#define INFERLAB_MATMUL_INT4_AVX512 1
#endif

namespace inferlab::cpu {
namespace {

// The quantized matrix and its geometry.
struct Int4Matrix {
  const std::uint8_t* packed;  // [out, row_bytes]
  const float* scale;          // [out, groups]
  const std::uint8_t* zero;    // [out, groups] or nullptr (symmetric)
  std::size_t row_bytes, groups;
  int in, group_size;

  const std::uint8_t* row(int o) const { return packed + static_cast<std::size_t>(o) * row_bytes; }
  float scale_of(int o, int g) const { return scale[static_cast<std::size_t>(o) * groups + g]; }
  int zero_of(int o, int g) const {
    return zero ? zero[static_cast<std::size_t>(o) * groups + g] : ref::kInt4SymmetricZero;
  }
};

inline int code_at(const std::uint8_t* row, int i) { return (row[i >> 1] >> ((i & 1) * 4)) & 0xF; }

#if INFERLAB_MATMUL_INT4_AVX2

// Weights k..k+7 of a row (k a multiple of 8): one 32-bit word holds their codes at bit
// offsets 0, 4, ..., 28; broadcast, shift each lane by its offset, mask, convert, then
// scale * u + bias with bias = -scale * zero (the group's dequantization as one FMA).
inline __m256 dequant8(const std::uint8_t* row, int k, __m256 vscale, __m256 vbias) {
  std::uint32_t word;
  std::memcpy(&word, row + k / 2, sizeof word);
  const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
  const __m256i codes = _mm256_and_si256(
      _mm256_srlv_epi32(_mm256_set1_epi32(static_cast<int>(word)), shifts), _mm256_set1_epi32(0xF));
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(codes), vscale, vbias);
}
#endif

// w[0, in) = dequantized row o.
void dequant_row(const Int4Matrix& m, int o, float* w) {
  const std::uint8_t* row = m.row(o);
  for (int g = 0, k0 = 0; k0 < m.in; ++g, k0 += m.group_size) {
    const int k1 = std::min(m.in, k0 + m.group_size);
    const float s = m.scale_of(o, g);
    const int z = m.zero_of(o, g);
    int k = k0;
#if INFERLAB_MATMUL_INT4_AVX2
    const __m256 vs = _mm256_set1_ps(s), vb = _mm256_set1_ps(-s * static_cast<float>(z));
    for (; k + 8 <= k1; k += 8) _mm256_storeu_ps(w + k, dequant8(row, k, vs, vb));
#endif
#pragma omp simd
    for (int kk = k; kk < k1; ++kk) w[kk] = static_cast<float>(code_at(row, kk) - z) * s;
  }
}

// y[r, c] = x[r, :] · w[c, :] for R token rows and C dequantized weight rows.
// x: [R, in] stride xs; w: [C, in] stride in; y: [R, C] stride ys.
template <int R, int C>
inline void tile_f32(const float* x, std::size_t xs, const float* w, float* y, std::size_t ys,
                     int in) {
  const std::size_t ws = static_cast<std::size_t>(in);
  float acc[R][C] = {};
  int k = 0;
#if INFERLAB_MATMUL_INT4_AVX2
  __m256 vacc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) vacc[r][c] = _mm256_setzero_ps();
  for (; k + 8 <= in; k += 8) {
    __m256 wv[C];
    for (int c = 0; c < C; ++c) wv[c] = _mm256_loadu_ps(w + c * ws + k);
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
      const float* wc = w + c * ws;
      float a = 0.0f;
#pragma omp simd reduction(+ : a)
      for (int kk = k; kk < in; ++kk) a += xr[kk] * wc[kk];
      y[r * ys + c] = acc[r][c] + a;
    }
}

#if INFERLAB_MATMUL_INT4_AVX2
// y[r, c] = x[r, :] · W[o + c, :] for R token rows and C channels, unpacking the codes in
// registers: each 8-weight vector is dequantized once and used by all R rows. Only the last
// group can end off an 8-boundary (in % 8 != 0); its tail is scalar.
template <int R, int C>
inline void tile_int4(const float* x, std::size_t xs, const Int4Matrix& m, int o, float* y,
                      std::size_t ys) {
  const std::uint8_t* rows[C];
  for (int c = 0; c < C; ++c) rows[c] = m.row(o + c);
  float acc[R][C] = {};
  __m256 vacc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) vacc[r][c] = _mm256_setzero_ps();
  for (int g = 0, k0 = 0; k0 < m.in; ++g, k0 += m.group_size) {
    const int k1 = std::min(m.in, k0 + m.group_size);
    float s[C];
    int z[C];
    __m256 vs[C], vb[C];
    for (int c = 0; c < C; ++c) {
      s[c] = m.scale_of(o + c, g);
      z[c] = m.zero_of(o + c, g);
      vs[c] = _mm256_set1_ps(s[c]);
      vb[c] = _mm256_set1_ps(-s[c] * static_cast<float>(z[c]));
    }
    int k = k0;
    for (; k + 8 <= k1; k += 8) {
      __m256 wv[C];
      for (int c = 0; c < C; ++c) wv[c] = dequant8(rows[c], k, vs[c], vb[c]);
      for (int r = 0; r < R; ++r) {
        const __m256 xv = _mm256_loadu_ps(x + r * xs + k);
        for (int c = 0; c < C; ++c) vacc[r][c] = _mm256_fmadd_ps(xv, wv[c], vacc[r][c]);
      }
    }
    for (; k < k1; ++k)
      for (int c = 0; c < C; ++c) {
        const float wk = static_cast<float>(code_at(rows[c], k) - z[c]) * s[c];
        for (int r = 0; r < R; ++r) acc[r][c] += x[r * xs + k] * wk;
      }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) y[r * ys + c] = hsum(vacc[r][c]) + acc[r][c];
}

// All n token rows for channels [o, o + C), in-register unpacking.
template <int C>
void rows_int4(const float* x, std::size_t xs, const Int4Matrix& m, int o, float* y,
               std::size_t ys, int n) {
  int r = 0;
  for (; r + 4 <= n; r += 4) tile_int4<4, C>(x + r * xs, xs, m, o, y + r * ys, ys);
  switch (n - r) {
    case 3: tile_int4<3, C>(x + r * xs, xs, m, o, y + r * ys, ys); break;
    case 2: tile_int4<2, C>(x + r * xs, xs, m, o, y + r * ys, ys); break;
    case 1: tile_int4<1, C>(x + r * xs, xs, m, o, y + r * ys, ys); break;
    default: break;
  }
}

// Token rows at which a block of weight rows is dequantized once into a float buffer and then
// shared by every token row, instead of being unpacked again for each tile of 4 rows.
constexpr int kDequantOnceRows = 8;
#else
constexpr int kDequantOnceRows = 1;  // no in-register path: always dequantize once
#endif

#if INFERLAB_MATMUL_INT4_AVX512
// Decode path (n < kDequantOnceRows, group_size a multiple of 32): each weight row is read front
// to back, one sequential stream per thread, and 32 codes (16 bytes) at a time are unpacked
// without reordering: byte j holds codes 2j (low nibble) and 2j + 1 (high nibble), so the low
// nibbles meet the even inputs and the high nibbles the odd ones. x is deinterleaved once per
// call into that order (stream_x), the codes stay in place. The zero point is pulled
// out: x · W[o] = sum_g s_g (u_g · x_g) - sum_g s_g z_g sum(x_g) (int4_zero_term, with the group
// sums of x taken once per call), so per 32 codes: one widening load, a mask, a shift, two
// conversions and two multiply-adds, and per group one FMA by its scale.
constexpr int kChunk = 32;

// The per-call activation layout of row_stream (thread-local buffers of the calling thread).
struct StreamX {
  const float* x;   // [n, in] as given (the tail past the last full chunk)
  const float* xd;  // [n, in]: per full chunk, its 16 even inputs then its 16 odd ones
  const float* gx;  // [n, groups]: sum of x over each group's full chunks
  std::size_t xs, gs;  // row strides
};

StreamX stream_x(const float* x, int n, int in, int group_size) {
  thread_local std::vector<float> xd, gx;
  const int groups = ref::int4_groups(in, group_size);
  const std::size_t s = static_cast<std::size_t>(in), gs = static_cast<std::size_t>(groups);
  xd.resize(static_cast<std::size_t>(n) * s);
  gx.assign(static_cast<std::size_t>(n) * gs, 0.0f);
  for (int r = 0; r < n; ++r)
    for (int k = 0; k + kChunk <= in; k += kChunk) {
      float sum = 0.0f;
      for (int i = 0; i < kChunk / 2; ++i) {
        xd[r * s + k + i] = x[r * s + k + 2 * i];
        xd[r * s + k + kChunk / 2 + i] = x[r * s + k + 2 * i + 1];
        sum += x[r * s + k + 2 * i] + x[r * s + k + 2 * i + 1];
      }
      gx[r * gs + static_cast<std::size_t>(k / group_size)] += sum;
    }
  return {x, xd.data(), gx.data(), s, gs};
}

// y[r * ys] = x[r, :] · W[o, :] for R token rows. Two accumulators per row alternate between
// groups to hide the FMA latency.
template <int R>
inline void row_stream(const StreamX& a, const Int4Matrix& m, int o, float* y, std::size_t ys) {
  constexpr __mmask16 kAll = 0xFFFF;  // zero-mask forms: GCC 12 (see gemm_panels_int8.cpp)
  const std::uint8_t* row = m.row(o);
  const float* sw = m.scale + static_cast<std::size_t>(o) * m.groups;
  const __m512i nibble = _mm512_set1_epi32(0xF);
  __m512 acc[R][2];
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm512_setzero_ps();
  const int full = m.in / kChunk * kChunk;  // inputs covered by whole chunks
  // Group g into accumulator A = g % 2 (a compile-time index, so the accumulators stay in registers).
  auto group = [&](auto parity, int g, int k0) {
    constexpr int A = decltype(parity)::value;
    const int k1 = std::min(full, k0 + m.group_size);
    __m512 ga[R];
    for (int r = 0; r < R; ++r) ga[r] = _mm512_setzero_ps();
    for (int k = k0; k < k1; k += kChunk) {
      const __m512i b = _mm512_maskz_cvtepu8_epi32(kAll, _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + k / 2)));
      const __m512 ue = _mm512_maskz_cvtepi32_ps(kAll, _mm512_and_si512(b, nibble));           // codes k, k+2, ..
      const __m512 uo = _mm512_maskz_cvtepi32_ps(kAll, _mm512_maskz_srli_epi32(kAll, b, 4));  // codes k+1, k+3, ..
      for (int r = 0; r < R; ++r) {
        ga[r] = _mm512_fmadd_ps(_mm512_loadu_ps(a.xd + r * a.xs + k), ue, ga[r]);
        ga[r] = _mm512_fmadd_ps(_mm512_loadu_ps(a.xd + r * a.xs + k + kChunk / 2), uo, ga[r]);
      }
    }
    const __m512 sv = _mm512_set1_ps(sw[g]);
    for (int r = 0; r < R; ++r) acc[r][A] = _mm512_fmadd_ps(ga[r], sv, acc[r][A]);
  };
  int g = 0, k0 = 0;
  for (; k0 + m.group_size < full; k0 += 2 * m.group_size, g += 2) {
    group(std::integral_constant<int, 0>{}, g, k0);
    group(std::integral_constant<int, 1>{}, g + 1, k0 + m.group_size);
  }
  if (k0 < full) group(std::integral_constant<int, 0>{}, g, k0);
  const std::uint8_t* zo = m.zero ? m.zero + static_cast<std::size_t>(o) * m.groups : nullptr;
  for (int r = 0; r < R; ++r) {
    float t = hsum(_mm512_add_ps(acc[r][0], acc[r][1])) -
              int4_zero_term(sw, zo, a.gx + r * a.gs, static_cast<int>(m.groups));
    for (int k = full; k < m.in; ++k) {  // the last group's tail: at most 31 inputs
      const int gk = k / m.group_size;
      t += a.x[r * a.xs + k] * (static_cast<float>(code_at(row, k) - m.zero_of(o, gk)) * m.scale_of(o, gk));
    }
    y[r * ys] = t;
  }
}

// Channels [o0, o1) of n token rows through row_stream, 4 rows at a time.
void run_rows_streamed(const StreamX& a, const Int4Matrix& m, float* y, int n, int out, int o0, int o1) {
  const std::size_t ys = static_cast<std::size_t>(out);
  for (int o = o0; o < o1; ++o) {
    StreamX at = a;
    int r = 0;
    for (; r + 4 <= n; r += 4, at.x += 4 * at.xs, at.xd += 4 * at.xs, at.gx += 4 * at.gs)
      row_stream<4>(at, m, o, y + r * ys + o, ys);
    switch (n - r) {
      case 3: row_stream<3>(at, m, o, y + r * ys + o, ys); break;
      case 2: row_stream<2>(at, m, o, y + r * ys + o, ys); break;
      case 1: row_stream<1>(at, m, o, y + r * ys + o, ys); break;
      default: break;
    }
  }
}
#endif

// All n token rows against C weight rows already dequantized into w: [C, in].
template <int C>
void rows_f32(const float* x, std::size_t xs, const float* w, float* y, std::size_t ys, int n,
              int in) {
  int r = 0;
  for (; r + 4 <= n; r += 4) tile_f32<4, C>(x + r * xs, xs, w, y + r * ys, ys, in);
  for (; r < n; ++r) tile_f32<1, C>(x + r * xs, xs, w, y + r * ys, ys, in);
}

// All n token rows for output channels [o0, o1), in blocks of C channels; x stays in cache
// while each block of weight rows is streamed once.
template <int C>
void run_channels(const float* x, const Int4Matrix& m, float* y, int n, int out, int o0, int o1) {
  const std::size_t xs = static_cast<std::size_t>(m.in), ys = static_cast<std::size_t>(out);
  if (n >= kDequantOnceRows) {
    thread_local std::vector<float> w;  // [C, in]: this worker's buffer, reused across calls
    w.resize(static_cast<std::size_t>(C) * m.in);
    int o = o0;
    for (; o + C <= o1; o += C) {
      for (int c = 0; c < C; ++c) dequant_row(m, o + c, w.data() + c * xs);
      rows_f32<C>(x, xs, w.data(), y + o, ys, n, m.in);
    }
    for (; o < o1; ++o) {
      dequant_row(m, o, w.data());
      rows_f32<1>(x, xs, w.data(), y + o, ys, n, m.in);
    }
    return;
  }
#if INFERLAB_MATMUL_INT4_AVX2
  int o = o0;
  for (; o + C <= o1; o += C) rows_int4<C>(x, xs, m, o, y + o, ys, n);
  for (; o < o1; ++o) rows_int4<1>(x, xs, m, o, y + o, ys, n);
#endif
}

}  // namespace

void matmul_int4(const float* x, const std::uint8_t* packed, const float* scale,
                 const std::uint8_t* zero, float* y, int n, int out, int in, int group_size,
                 ThreadPool& pool) {
  check(group_size > 0 && group_size % 8 == 0,
        "matmul_int4: group_size must be a positive multiple of 8, got " +
            std::to_string(group_size));
  if (n <= 0 || out <= 0) return;
  const Int4Matrix m{packed, scale, zero, ref::int4_row_bytes(in),
                     static_cast<std::size_t>(ref::int4_groups(in, group_size)), in, group_size};
  // Units of 8 channels; a chunk should carry ~64K multiply-adds to amortise dispatch.
  constexpr int kUnit = 8;
  const std::size_t units = static_cast<std::size_t>((out + kUnit - 1) / kUnit);
  const std::size_t work_per_unit = static_cast<std::size_t>(kUnit) *
                                    static_cast<std::size_t>(std::max(in, 1)) *
                                    static_cast<std::size_t>(n);
  const std::size_t grain = std::max<std::size_t>(1, (std::size_t{1} << 16) / work_per_unit);
#if INFERLAB_MATMUL_INT4_AVX512
  if (n < kDequantOnceRows && group_size % kChunk == 0) {
    const StreamX a = stream_x(x, n, in, group_size);
    pool.parallel_for(units, [&](std::size_t begin, std::size_t end) {
      run_rows_streamed(a, m, y, n, out, static_cast<int>(begin) * kUnit, std::min(out, static_cast<int>(end) * kUnit));
    }, grain);
    return;
  }
#endif
  pool.parallel_for(
      units,
      [&](std::size_t begin, std::size_t end) {
        const int o0 = static_cast<int>(begin) * kUnit;
        const int o1 = std::min(out, static_cast<int>(end) * kUnit);
        if (n <= 2)
          run_channels<4>(x, m, y, n, out, o0, o1);  // more weight loads in flight
        else
          run_channels<2>(x, m, y, n, out, o0, o1);
      },
      grain);
}

}  // namespace inferlab::cpu
