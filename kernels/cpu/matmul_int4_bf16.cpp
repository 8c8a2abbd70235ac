// The AVX-512 BF16 decode path of matmul_int4 (matmul_int4_bf16.h).
//
// A 64-byte load holds 128 codes: 16-bit word j carries codes 4j .. 4j+3 in its four nibbles.
// Nibble q of every word is moved to bits 3..6 and ORed with 0x3F80, which makes the bfloat16
// 1 + c/16 (exact): one shift and one ternary-logic op per 32 codes, no conversion. vdpbf16ps
// pairs words 2i and 2i+1 into fp32 lane i, so lane i sees codes 8i .. 8i+7 of the chunk and,
// every group size dividing 128 or a multiple of it being a multiple of 8, lies in one group.
// Per chunk and token row, sum over q of x·(1 + c/16) per lane is scaled by the lanes' group
// scales in one FMA. With w = s (c - z) = s (16 (1 + c/16) - 16 - z), the offset and the zero
// point come off once per row from the groups' sums X_g of x: y = 16 * sum - sum_g s_g z_g X_g
// (int4_zero_term) - 16 sum_g s_g X_g. The activations are laid out once per call in that order, each as two
// bfloat16 (hi = round(x), lo = round(x - hi)), zero past `in` so that the masked last chunk
// contributes nothing.
#include "kernels/cpu/matmul_int4_bf16.h"

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "inferlab/error.h"
#include "kernels/cpu/decode_prefetch.h"
#include "kernels/cpu/int4_zero_term.h"
#include "kernels/ref/half.h"
#include "kernels/ref/matmul_int4.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512BF16__)
#include <immintrin.h>

#include "kernels/cpu/simd.h"
#define INFERLAB_INT4_BF16 1
#endif

namespace inferlab::cpu {

bool int4_bf16_supported(int group_size) {
#if INFERLAB_INT4_BF16
  return group_size > 0 && group_size % 8 == 0 && (128 % group_size == 0 || group_size % 128 == 0);
#else
  (void)group_size;
  return false;
#endif
}

#if INFERLAB_INT4_BF16
namespace {

constexpr int kChunk = 128;            // codes per 64-byte load
constexpr int kChunkBytes = kChunk / 2;
constexpr int kWords = 32;             // bfloat16 per plane

// The activations of one call in the kernel's order (thread-local buffers of the calling thread).
struct Prepared {
  const std::uint16_t* xb;  // [n, chunks, 4 planes, hi/lo, 32]
  const float* gx;          // [n, groups]: each group's sum of (hi + lo)
  std::size_t chunks, groups;
};

Prepared prepare(const float* x, int n, int in, int group_size) {
  thread_local std::vector<std::uint16_t> xb;
  thread_local std::vector<float> gx;
  const std::size_t chunks = static_cast<std::size_t>((in + kChunk - 1) / kChunk);
  const std::size_t groups = static_cast<std::size_t>(ref::int4_groups(in, group_size));
  xb.assign(static_cast<std::size_t>(n) * chunks * 8 * kWords, 0);
  gx.assign(static_cast<std::size_t>(n) * groups, 0.0f);
  for (int r = 0; r < n; ++r)
    for (int k = 0; k < in; ++k) {
      const float v = x[static_cast<std::size_t>(r) * in + k];
      const std::uint16_t hi = ref::float_to_bf16(v);
      const std::uint16_t lo = ref::float_to_bf16(v - ref::bf16_to_float(hi));
      const std::size_t c = static_cast<std::size_t>(k / kChunk), rc = static_cast<std::size_t>(r) * chunks + c;
      const int p = k % kChunk, q = p % 4, j = p / 4;
      xb[(rc * 8 + 2 * q) * kWords + j] = hi;
      xb[(rc * 8 + 2 * q + 1) * kWords + j] = lo;
      gx[static_cast<std::size_t>(r) * groups + k / group_size] += ref::bf16_to_float(hi) + ref::bf16_to_float(lo);
    }
  return {xb.data(), gx.data(), chunks, groups};
}

// The weight matrix and what the row kernel needs of its geometry.
struct Matrix {
  const std::uint8_t* packed;
  const float* scale;
  const std::uint8_t* zero;  // or null (symmetric)
  std::size_t row_bytes;
  int group_size, groups;
};

// Plane q of a 64-byte chunk: nibble q of each 16-bit word at bits 3..6, ORed with 0x3F80.
template <int Q>
inline __m512i plane(__m512i v) {
  constexpr __mmask32 kAll = 0xFFFFFFFF;  // zero-mask forms: GCC 12 (see gemm_panels_int8.cpp)
  __m512i s;
  if constexpr (Q == 0) s = _mm512_maskz_slli_epi16(kAll, v, 3);
  else s = _mm512_maskz_srli_epi16(kAll, v, 4 * Q - 3);
  // (s & 0x0078) | 0x3F80: A = s, B = mask, C = exponent bits; table (A & B) | C = 0xEA.
  return _mm512_ternarylogic_epi32(s, _mm512_set1_epi16(0x0078), _mm512_set1_epi16(0x3F80), 0xEA);
}

// Walks a weight row's group scales chunk by chunk, without divisions: lane i of a chunk holds
// codes 8i .. 8i+7, so with groups smaller than a chunk (per = 128 / group_size of them) lane i
// takes scale i >> log2(group_size / 8) of the chunk's groups; with larger groups all lanes take
// one scale, the next every group_size / 128 chunks.
struct ScaleWalk {
  int per = 0;             // groups per chunk (group_size < 128), else 0
  int chunks_per_group = 1;  // group_size / 128 (group_size >= 128)
  __m512i idx;             // lane -> group within the chunk
  explicit ScaleWalk(int group_size) : idx(_mm512_setzero_si512()) {
    if (group_size < kChunk) {
      per = kChunk / group_size;
      const int shift = __builtin_ctz(static_cast<unsigned>(group_size / 8));
      idx = _mm512_maskz_srli_epi32(0xFFFF, _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                    shift);
    } else {
      chunks_per_group = group_size / kChunk;
    }
  }
};

// sum_g s_g X_g (masked tail).
inline float scaled_sum(const float* s, const float* gx, int groups) {
  __m512 acc = _mm512_setzero_ps();
  for (int g = 0; g < groups; g += 16) {
    const __mmask16 m = groups - g >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << (groups - g)) - 1);
    acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, s + g), _mm512_maskz_loadu_ps(m, gx + g), acc);
  }
  return hsum(acc);
}

inline __m512bh as_bh(__m512i v) { return reinterpret_cast<__m512bh&>(v); }
inline __m512bh load_bh(const std::uint16_t* p) { return as_bh(_mm512_loadu_si512(p)); }

// y[r * ys] = x[r, :] · W[o, :] for R token rows (Prepared rows r0 .. r0 + R).
template <int R>
void row_tile(const Prepared& a, int r0, const Matrix& m, const ScaleWalk& walk, int o, float* y, std::size_t ys,
              int ahead, int ahead_scales) {
  const std::uint8_t* row = m.packed + static_cast<std::size_t>(o) * m.row_bytes;
  const float* sw = m.scale + static_cast<std::size_t>(o) * m.groups;
  const std::size_t full = m.row_bytes / kChunkBytes;
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  int g = 0, in_group = 0;  // the chunk's first group; chunks of it passed (group_size >= 128)
  for (std::size_t c = 0; c < a.chunks; ++c) {
    const std::uint8_t* p = row + c * kChunkBytes;
    __m512i v;
    if (c < full) {
      v = _mm512_loadu_si512(p);
    } else {  // the last, partial chunk: bytes past the row read as code 0 against x = 0
      const std::size_t left = m.row_bytes - c * kChunkBytes;
      v = _mm512_maskz_loadu_epi8((__mmask64{1} << left) - 1, p);
    }
    prefetch_ahead(p, kChunkBytes, ahead);
    if ((c & 3) == 0) prefetch_ahead(sw + g, 64, ahead_scales);
    const __m512bh w0 = as_bh(plane<0>(v)), w1 = as_bh(plane<1>(v)), w2 = as_bh(plane<2>(v)), w3 = as_bh(plane<3>(v));
    __m512 sv;
    if (walk.per > 0) {
      const int count = std::min(walk.per, m.groups - g);
      sv = _mm512_maskz_permutexvar_ps(0xFFFF, walk.idx,
                                       _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << count) - 1u), sw + g));
      g += walk.per;
    } else {
      sv = _mm512_set1_ps(sw[g]);
      if (++in_group == walk.chunks_per_group) in_group = 0, ++g;
    }
    for (int r = 0; r < R; ++r) {
      const std::size_t rc = static_cast<std::size_t>(r0 + r) * a.chunks + c;
      const std::uint16_t* xp = a.xb + rc * 8 * kWords;
      __m512 hi = _mm512_dpbf16_ps(_mm512_setzero_ps(), load_bh(xp), w0);
      __m512 lo = _mm512_dpbf16_ps(_mm512_setzero_ps(), load_bh(xp + kWords), w0);
      hi = _mm512_dpbf16_ps(hi, load_bh(xp + 2 * kWords), w1);
      lo = _mm512_dpbf16_ps(lo, load_bh(xp + 3 * kWords), w1);
      hi = _mm512_dpbf16_ps(hi, load_bh(xp + 4 * kWords), w2);
      lo = _mm512_dpbf16_ps(lo, load_bh(xp + 5 * kWords), w2);
      hi = _mm512_dpbf16_ps(hi, load_bh(xp + 6 * kWords), w3);
      lo = _mm512_dpbf16_ps(lo, load_bh(xp + 7 * kWords), w3);
      acc[r] = _mm512_fmadd_ps(_mm512_add_ps(hi, lo), sv, acc[r]);
    }
  }
  const std::uint8_t* zo = m.zero ? m.zero + static_cast<std::size_t>(o) * m.groups : nullptr;
  for (int r = 0; r < R; ++r) {
    const float* gx = a.gx + static_cast<std::size_t>(r0 + r) * a.groups;
    y[static_cast<std::size_t>(r) * ys] =
        16.0f * (hsum(acc[r]) - scaled_sum(sw, gx, m.groups)) - int4_zero_term(sw, zo, gx, m.groups);
  }
}

// Channels [o0, o1) of all n token rows: each weight row once, tiles of up to 4 token rows.
void run_rows(const Prepared& a, const Matrix& m, float* y, int n, int out, int o0, int o1) {
  const std::size_t ys = static_cast<std::size_t>(out);
  const int ahead = decode_prefetch_bytes(), ahead_scales = ahead * 8 / m.group_size;  // scales: 8/gs of the codes' bytes
  const ScaleWalk walk(m.group_size);
  for (int o = o0; o < o1; ++o) {
    int r = 0;
    for (; r + 4 <= n; r += 4) row_tile<4>(a, r, m, walk, o, y + r * ys + o, ys, ahead, ahead_scales);
    switch (n - r) {
      case 3: row_tile<3>(a, r, m, walk, o, y + r * ys + o, ys, ahead, ahead_scales); break;
      case 2: row_tile<2>(a, r, m, walk, o, y + r * ys + o, ys, ahead, ahead_scales); break;
      case 1: row_tile<1>(a, r, m, walk, o, y + r * ys + o, ys, ahead, ahead_scales); break;
      default: break;
    }
  }
}

}  // namespace
#endif

void matmul_int4_bf16(const float* x, const std::uint8_t* packed, const float* scale, const std::uint8_t* zero,
                      float* y, int n, int out, int in, int group_size, ThreadPool& pool) {
  check(int4_bf16_supported(group_size) && n >= 1 && n <= kInt4Bf16MaxRows,
        "matmul_int4_bf16: needs AVX-512 BF16, group_size dividing 128 or a multiple of it and 1.." +
            std::to_string(kInt4Bf16MaxRows) + " rows, got group_size " + std::to_string(group_size) + ", " +
            std::to_string(n) + " rows");
#if INFERLAB_INT4_BF16
  if (out <= 0) return;
  const Prepared a = prepare(x, n, in, group_size);
  const Matrix m{packed, scale, zero, ref::int4_row_bytes(in), group_size, ref::int4_groups(in, group_size)};
  constexpr int kUnit = 8;  // channels per unit; a chunk of units should carry ~64K multiply-adds
  const std::size_t units = static_cast<std::size_t>((out + kUnit - 1) / kUnit);
  const std::size_t per_unit = static_cast<std::size_t>(kUnit) * static_cast<std::size_t>(std::max(in, 1)) *
                               static_cast<std::size_t>(n);
  const std::size_t grain = std::max<std::size_t>(1, (std::size_t{1} << 16) / per_unit);
  pool.parallel_for(units, [&](std::size_t begin, std::size_t end) {
    run_rows(a, m, y, n, out, static_cast<int>(begin) * kUnit, std::min(out, static_cast<int>(end) * kUnit));
  }, grain);
#else
  (void)x, (void)packed, (void)scale, (void)zero, (void)y, (void)out, (void)in, (void)pool;
#endif
}

}  // namespace inferlab::cpu
