// Weight-only int4 matmul with group-wise scales: register tiles of R token rows x C output
// channels. For small batches each 8-code word of a weight row is unpacked, offset by its
// group's zero point and scaled in registers once per tile and feeds R FMAs; from
// kDequantOnceRows rows on (and always without AVX2), a block of C weight rows is dequantized
// once into a float buffer shared by all token rows. AVX2/FMA when available, `omp simd` loops
// otherwise. With AVX-512, up to kInt4RowsMaxRows token rows go to matmul_int4_rows instead;
// with the AMX bf16 tiles, kInt4AmxCodesMinRows (groups of whole tile steps) or kInt4AmxMinRows and
// more to gemm_amx_dequant (rows by dequant_row_lut).
// Contract and roofline: matmul_int4.h; format: kernels/ref/matmul_int4.h.
#include "kernels/cpu/matmul_int4.h"
#include "kernels/cpu/amx.h"
#include "kernels/cpu/dot_tile.h"
#include "kernels/cpu/gemm_amx_dequant.h"
#include "kernels/cpu/matmul_int4_rows.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>

#include "inferlab/error.h"
#include "kernels/ref/matmul_int4.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define INFERLAB_MATMUL_INT4_AVX2 1
#endif

namespace inferlab::cpu {
namespace {

// The vector the dequantized rows are multiplied in (dot_tile.h): 8 lanes with AVX2, also under
// AVX-512 (whose few-row batches go to matmul_int4_rows instead).
#if INFERLAB_MATMUL_INT4_AVX2
using DequantLanes = Vec256;
#else
using DequantLanes = VecScalar;
#endif

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

#if INFERLAB_AMX_BF16
// dequant_row for the AMX path, 16 codes per step and the reference's rounding: per group a
// table t[u] = (u - z) * s of the 16 code values, then the codes (a broadcast word shifted per
// lane) as vpermps indices, which read only their low 4 bits. codes: the integers u - z instead
// (s = 1), for the group-scaled tiles.
void dequant_row_lut(const Int4Matrix& m, int o, float* w, bool codes) {
  const std::uint8_t* row = m.row(o);
  const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const __m512i pick = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
  const __m512i shifts = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28);
  for (int g = 0, k0 = 0; k0 < m.in; ++g, k0 += m.group_size) {
    const int k1 = std::min(m.in, k0 + m.group_size);
    const float s = codes ? 1.0f : m.scale_of(o, g);
    const int z = m.zero_of(o, g);
    const __m512 table = _mm512_mul_ps(_mm512_sub_ps(iota, _mm512_set1_ps(static_cast<float>(z))), _mm512_set1_ps(s));
    int k = k0;
    for (; k + 8 <= k1; k += 16) {  // k is even: codes k.. start on a byte
      const bool full = k + 16 <= k1;
      std::uint64_t word = 0;  // constant sizes: an inlined load, not a call
      if (full) std::memcpy(&word, row + k / 2, 8);
      else std::memcpy(&word, row + k / 2, 4);
      // zero-mask forms: GCC 12 warns on the plain ones (see gemm_panels_int8.cpp)
      const __m512i idx = _mm512_maskz_srlv_epi32(
          0xFFFF, _mm512_maskz_permutexvar_epi32(0xFFFF, pick, _mm512_set1_epi64(static_cast<long long>(word))), shifts);
      _mm512_mask_storeu_ps(w + k, full ? __mmask16{0xFFFF} : __mmask16{0x00FF},
                            _mm512_maskz_permutexvar_ps(0xFFFF, idx, table));
      if (!full) k -= 8;
    }
    for (; k < k1; ++k) w[k] = static_cast<float>(code_at(row, k) - z) * s;
  }
}
#endif

#if INFERLAB_MATMUL_INT4_AVX2
// y[r, c] = x[r, :] · W[o + c, :] for R token rows and C channels, unpacking the codes in
// registers: each 8-weight vector is dequantized once and used by all R rows. Only the last
// group can end off an 8-boundary (in % 8 != 0); its tail is scalar.
template <int R, int C>
inline void tile_int4(const float* x, std::size_t xs, const Int4Matrix& m, int o, float* y,
                      std::size_t ys) {
  const std::uint8_t* rows[C];
#pragma GCC unroll 16
  for (int c = 0; c < C; ++c) rows[c] = m.row(o + c);
  float acc[R][C] = {};
  __m256 vacc[R][C];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) vacc[r][c] = _mm256_setzero_ps();
  for (int g = 0, k0 = 0; k0 < m.in; ++g, k0 += m.group_size) {
    const int k1 = std::min(m.in, k0 + m.group_size);
    float s[C];
    int z[C];
    __m256 vs[C], vb[C];
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) {
      s[c] = m.scale_of(o + c, g);
      z[c] = m.zero_of(o + c, g);
      vs[c] = _mm256_set1_ps(s[c]);
      vb[c] = _mm256_set1_ps(-s[c] * static_cast<float>(z[c]));
    }
    int k = k0;
    for (; k + 8 <= k1; k += 8) {
      __m256 wv[C];
#pragma GCC unroll 16
      for (int c = 0; c < C; ++c) wv[c] = dequant8(rows[c], k, vs[c], vb[c]);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const __m256 xv = _mm256_loadu_ps(x + r * xs + k);
#pragma GCC unroll 16
        for (int c = 0; c < C; ++c) vacc[r][c] = _mm256_fmadd_ps(xv, wv[c], vacc[r][c]);
      }
    }
    for (; k < k1; ++k)
#pragma GCC unroll 16
      for (int c = 0; c < C; ++c) {
        const float wk = static_cast<float>(code_at(rows[c], k) - z[c]) * s[c];
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) acc[r][c] += x[r * xs + k] * wk;
      }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) y[r * ys + c] = hsum(vacc[r][c]) + acc[r][c];
}

// All n token rows for channels [o, o + C), in-register unpacking.
template <int C>
void rows_int4(const float* x, std::size_t xs, const Int4Matrix& m, int o, float* y,
               std::size_t ys, int n) {
  for_row_tiles(n, [&]<int R>(int r) { tile_int4<R, C>(x + r * xs, xs, m, o, y + r * ys, ys); });
}

// Token rows at which a block of weight rows is dequantized once into a float buffer and then
// shared by every token row, instead of being unpacked again for each tile of 4 rows.
constexpr int kDequantOnceRows = 8;
#else
constexpr int kDequantOnceRows = 1;  // no in-register path: always dequantize once
#endif

// All n token rows for output channels [o0, o1), in blocks of C channels; x stays in cache
// while each block of weight rows is streamed once.
template <int C>
void run_channels(const float* x, const Int4Matrix& m, float* y, int n, int out, int o0, int o1) {
  const std::size_t xs = static_cast<std::size_t>(m.in), ys = static_cast<std::size_t>(out);
  if (n >= kDequantOnceRows) {
    for_channel_blocks<C>(o0, o1, [&]<int CB>(int o) {
      dot_rows_widened<DequantLanes, CB>(
          x, xs, n, m.in, [&](int c, float* w) { dequant_row(m, o + c, w); }, y + o, ys, PlainDot{});
    });
    return;
  }
#if INFERLAB_MATMUL_INT4_AVX2
  for_channel_blocks<C>(o0, o1, [&]<int CB>(int o) { rows_int4<CB>(x, xs, m, o, y + o, ys, n); });
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
  // The row-major codes (not the panels): the lookup, the tiles or the dequantised rows.
  const CpuKernel k = plan_cpu_linear(
      CpuFormat::kW4A16, n, CpuLinearShape{.out = out, .in = in, .group_size = group_size, .packed = false}, CpuIsa::host());
  if (k == CpuKernel::kInt4Rows) {
    matmul_int4_rows(x, packed, scale, zero, y, n, out, in, group_size, pool);
    return;
  }
#if INFERLAB_AMX_BF16
  if (k == CpuKernel::kAmxDequant) {
    const bool codes = group_size % 32 == 0;  // groups of whole tile steps: the codes, scaled per group
    AmxDequantWeights w;
    w.ctx = &m;
    w.out = out;
    w.in = in;
    if (codes) {  // u - z: one exact bf16 term
      w.row = [](const void* ctx, int o, float* dst) { dequant_row_lut(*static_cast<const Int4Matrix*>(ctx), o, dst, true); };
      w.weight_terms = 1;
      w.group_scale = scale;
      w.group_size = group_size;
    } else {  // s * (u - z) is a general fp32 value: three bf16 terms per weight (exact)
      w.row = [](const void* ctx, int o, float* dst) { dequant_row_lut(*static_cast<const Int4Matrix*>(ctx), o, dst, false); };
      w.weight_terms = 3;
    }
    gemm_amx_dequant(x, n, w, y, pool);
    return;
  }
#endif
  parallel_for_channels(pool, n, out, in, [&](int o0, int o1) {
    if (n <= 2)
      run_channels<4>(x, m, y, n, out, o0, o1);  // more weight loads in flight
    else
      run_channels<2>(x, m, y, n, out, o0, o1);
  });
}

}  // namespace inferlab::cpu
