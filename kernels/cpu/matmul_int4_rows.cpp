// The AVX-512 few-row path of matmul_int4 (matmul_int4_rows.h).
//
// A 64-byte load holds 128 codes: 32-bit lane i carries codes 8i .. 8i+7 in its eight nibbles.
// vpermps reads only the low 4 bits of each index lane, so permuting the table {0, 1, .., 15} by the
// lanes shifted right by 4q gives plane q = codes 8i + q as exact floats: 7 shifts and 8 lookups per
// 128 codes, on the shuffle port beside the FMAs. Every group size dividing 128 or a multiple of it
// is a multiple of 8, so lane i lies in one group. Per chunk and token row, sum over q of x * c per
// lane is scaled by the lanes' group scales in one FMA; the zero points come off once per row from
// the groups' sums X_g of x: y = sum_g s_g (sum x c) - sum_g s_g z_g X_g, folded into the lanes before their sum. The
// activations are laid out once per call in plane order, zero past `in` so that the masked last
// chunk contributes nothing.
#include "kernels/cpu/matmul_int4_rows.h"

#include <algorithm>
#include <cstddef>
#include <string>
#include <vector>

#include "inferlab/error.h"
#include "kernels/cpu/decode_prefetch.h"
#include "kernels/cpu/dot_tile.h"
#include "kernels/cpu/int4_zero_term.h"
#include "kernels/ref/matmul_int4.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#include <immintrin.h>

#include "kernels/cpu/simd.h"
#define INFERLAB_INT4_ROWS 1
#endif

namespace inferlab::cpu {

bool int4_rows_supported(int group_size) {
#if INFERLAB_INT4_ROWS
  return group_size > 0 && group_size % 8 == 0 && (128 % group_size == 0 || group_size % 128 == 0);
#else
  (void)group_size;
  return false;
#endif
}

#if INFERLAB_INT4_ROWS
namespace {

constexpr int kChunk = 128;  // codes per 64-byte load
constexpr int kChunkBytes = kChunk / 2;
constexpr int kLanes = 16;

// The activations of one call in the kernel's order (thread-local buffers of the calling thread).
struct Prepared {
  const float* xp;  // [n, chunks, 8 planes, 16 lanes]: plane q, lane i = x[128 c + 8 i + q]
  const float* gx;  // [n, groups]: each group's sum of x
  std::size_t chunks, groups;
};

Prepared prepare(const float* x, int n, int in, int group_size) {
  thread_local std::vector<float> xp;
  thread_local std::vector<float> gx;
  const std::size_t chunks = static_cast<std::size_t>((in + kChunk - 1) / kChunk);
  const std::size_t groups = static_cast<std::size_t>(ref::int4_groups(in, group_size));
  xp.assign(static_cast<std::size_t>(n) * chunks * kChunk, 0.0f);
  gx.resize(static_cast<std::size_t>(n) * groups);
  // Without divisions: they made this single-threaded pass ~12 us of a 5632-wide row (2026-12-06).
  for (int r = 0; r < n; ++r) {
    const float* xr = x + static_cast<std::size_t>(r) * in;
    float* dst = xp.data() + static_cast<std::size_t>(r) * chunks * kChunk;
    for (int k0 = 0; k0 < in; k0 += kChunk, dst += kChunk) {
      if (in - k0 >= kChunk) {
        for (int i = 0; i < kLanes; ++i)
          for (int q = 0; q < 8; ++q) dst[q * kLanes + i] = xr[k0 + 8 * i + q];
      } else {
        for (int p = 0; p < in - k0; ++p) dst[(p % 8) * kLanes + p / 8] = xr[k0 + p];
      }
    }
    float* gr = gx.data() + static_cast<std::size_t>(r) * groups;
    for (int g = 0, k0 = 0; k0 < in; ++g, k0 += group_size) {
      float sum = 0.0f;
      for (int k = k0; k < std::min(in, k0 + group_size); ++k) sum += xr[k];
      gr[g] = sum;
    }
  }
  return {xp.data(), gx.data(), chunks, groups};
}

// The weight matrix and what the row kernel needs of its geometry.
struct Matrix {
  const std::uint8_t* packed;
  const float* scale;
  const std::uint8_t* zero;  // or null (symmetric)
  std::size_t row_bytes;
  int group_size, groups;
};

// Walks a weight row's group scales chunk by chunk, without divisions: lane i of a chunk holds
// codes 8i .. 8i+7, so with groups smaller than a chunk (per = 128 / group_size of them) lane i
// takes scale i >> log2(group_size / 8) of the chunk's groups; with larger groups all lanes take
// one scale, the next every group_size / 128 chunks.
struct ScaleWalk {
  int per = 0;               // groups per chunk (group_size < 128), else 0
  int chunks_per_group = 1;  // group_size / 128 (group_size >= 128)
  __m512i idx;               // lane -> group within the chunk
  __mmask16 load = 0;        // the chunk's `per` scales
  explicit ScaleWalk(int group_size) : idx(_mm512_setzero_si512()) {
    if (group_size < kChunk) {
      per = kChunk / group_size;
      load = static_cast<__mmask16>((1u << per) - 1u);
      const int shift = __builtin_ctz(static_cast<unsigned>(group_size / 8));
      idx = _mm512_maskz_srli_epi32(0xFFFF, _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                    static_cast<unsigned>(shift));
    } else {
      chunks_per_group = group_size / kChunk;
    }
  }
};

// Plane Q of a chunk: code 8i + Q of every lane i as a float (zero-mask forms: GCC 12, see
// gemm_panels_int8.cpp).
template <int Q>
inline __m512 plane(__m512i v, __m512 table) {
  constexpr __mmask16 kAll = 0xFFFF;
  if constexpr (Q == 0) return _mm512_maskz_permutexvar_ps(kAll, v, table);
  else return _mm512_maskz_permutexvar_ps(kAll, _mm512_maskz_srli_epi32(kAll, v, 4 * Q), table);
}

// acc[r][c] += lane scales sv[c] * (x[r] · codes of v[c]) over one chunk of C weight rows
// (Prepared rows xr[r] at the chunk): each row's 8 planes are unpacked once for all R token rows,
// each x vector is loaded once for the C weight rows; every (r, c) is one chain of 8 FMAs and one
// FMA with the scales (9 operations per 128 codes and token row, against 16 per weight row).
template <int R, int C>
inline void chunk_rows(const __m512i (&v)[C], const __m512 (&sv)[C], const float* const (&xr)[R],
                       __m512 (&acc)[R][C]) {
  const __m512 table = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  __m512 w[C][8];
#pragma GCC unroll 16
  for (int c = 0; c < C; ++c) {
    w[c][0] = plane<0>(v[c], table), w[c][1] = plane<1>(v[c], table), w[c][2] = plane<2>(v[c], table);
    w[c][3] = plane<3>(v[c], table), w[c][4] = plane<4>(v[c], table), w[c][5] = plane<5>(v[c], table);
    w[c][6] = plane<6>(v[c], table), w[c][7] = plane<7>(v[c], table);
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    __m512 d[C];
    const __m512 x0 = _mm512_loadu_ps(xr[r]);
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) d[c] = _mm512_mul_ps(x0, w[c][0]);
    for (int q = 1; q < 8; ++q) {
      const __m512 xq = _mm512_loadu_ps(xr[r] + q * kLanes);
#pragma GCC unroll 16
      for (int c = 0; c < C; ++c) d[c] = _mm512_fmadd_ps(xq, w[c][q], d[c]);
    }
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_fmadd_ps(d[c], sv[c], acc[r][c]);
  }
}

// y[r * ys + c] = x[r, :] · W[o + c, :] for R token rows (Prepared rows r0 .. r0 + R) and C weight
// rows. SmallGroups: group_size < 128 (walk.per groups per chunk). The full chunks run without a
// branch; the last, partial one (bytes past the row read as code 0 against x = 0) after them.
template <int R, int C, bool SmallGroups>
void row_tile(const Prepared& a, int r0, const Matrix& m, const ScaleWalk& walk, int o, float* y, std::size_t ys,
              int ahead, int ahead_scales) {
  const std::uint8_t* rows[C];
  const float* sw[C];
#pragma GCC unroll 16
  for (int c = 0; c < C; ++c) {
    rows[c] = m.packed + static_cast<std::size_t>(o + c) * m.row_bytes;
    sw[c] = m.scale + static_cast<std::size_t>(o + c) * m.groups;
  }
  const std::size_t full = m.row_bytes / kChunkBytes;
  const float* xr[R];
  __m512 acc[R][C];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    xr[r] = a.xp + static_cast<std::size_t>(r0 + r) * a.chunks * kChunk;
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) acc[r][c] = _mm512_setzero_ps();
  }
  int g = 0, in_group = 0;  // the chunk's first group; chunks of it passed (group_size >= 128)
  auto scales = [&](__mmask16 load, __m512 (&sv)[C]) {
    if constexpr (SmallGroups) {
#pragma GCC unroll 16
      for (int c = 0; c < C; ++c)
        sv[c] = _mm512_maskz_permutexvar_ps(0xFFFF, walk.idx, _mm512_maskz_loadu_ps(load, sw[c] + g));
      g += walk.per;
    } else {
      (void)load;
#pragma GCC unroll 16
      for (int c = 0; c < C; ++c) sv[c] = _mm512_set1_ps(sw[c][g]);
      if (++in_group == walk.chunks_per_group) in_group = 0, ++g;
    }
  };
  __m512i v[C];
  __m512 sv[C];
  for (std::size_t k = 0; k < full; ++k) {
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) {
      const std::uint8_t* p = rows[c] + k * kChunkBytes;
      prefetch_ahead(p, kChunkBytes, ahead);
      if ((k & 3) == 0) prefetch_ahead(sw[c] + g, 64, ahead_scales);
      v[c] = _mm512_loadu_si512(p);
    }
    scales(walk.load, sv);
    chunk_rows<R, C>(v, sv, xr, acc);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) xr[r] += kChunk;
  }
  if (full < a.chunks) {
    const __mmask64 left = (__mmask64{1} << (m.row_bytes - full * kChunkBytes)) - 1;
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) v[c] = _mm512_maskz_loadu_epi8(left, rows[c] + full * kChunkBytes);
    scales(static_cast<__mmask16>((1u << std::min(walk.per, m.groups - g)) - 1u), sv);
    chunk_rows<R, C>(v, sv, xr, acc);
  }
  // The zero points (int4_zero_term.h): acc -= s_g z_g X_g.
#pragma GCC unroll 16
  for (int c = 0; c < C; ++c) {
    const std::uint8_t* zo = m.zero ? m.zero + static_cast<std::size_t>(o + c) * m.groups : nullptr;
    fold_int4_zero_points<R>(sw[c], zo, a.gx + static_cast<std::size_t>(r0) * a.groups, a.groups, m.groups,
                             [&acc, c](int r) -> __m512& { return acc[r][c]; });
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) y[static_cast<std::size_t>(r) * ys + c] = hsum(acc[r][c]);
  }
}

// Channels [o0, o1) of all n token rows: each weight row once, tiles of up to 4 token rows; one
// token row takes two weight rows at a time (two independent streams and chains, each x load
// feeding both).
template <bool SmallGroups>
void run_rows(const Prepared& a, const Matrix& m, const ScaleWalk& walk, float* y, int n, int out, int o0, int o1) {
  const std::size_t ys = static_cast<std::size_t>(out);
  const int ahead = decode_prefetch_bytes(), ahead_scales = ahead * 8 / m.group_size;  // scales: 8/gs of the codes' bytes
  int o = o0;
  for (; o + 2 <= o1; o += 2)
    for_row_tiles(n, [&]<int R>(int r) {
      row_tile<R, 2, SmallGroups>(a, r, m, walk, o, y + r * ys + o, ys, ahead, ahead_scales);
    });
  for (; o < o1; ++o)
    for_row_tiles(n, [&]<int R>(int r) {
      row_tile<R, 1, SmallGroups>(a, r, m, walk, o, y + r * ys + o, ys, ahead, ahead_scales);
    });
}

}  // namespace
#endif

void matmul_int4_rows(const float* x, const std::uint8_t* packed, const float* scale, const std::uint8_t* zero,
                      float* y, int n, int out, int in, int group_size, ThreadPool& pool) {
  check(int4_rows_supported(group_size) && n >= 1 && n <= kInt4RowsMaxRows,
        "matmul_int4_rows: needs AVX-512, group_size dividing 128 or a multiple of it and 1.." +
            std::to_string(kInt4RowsMaxRows) + " rows, got group_size " + std::to_string(group_size) + ", " +
            std::to_string(n) + " rows");
#if INFERLAB_INT4_ROWS
  if (out <= 0) return;
  const Prepared a = prepare(x, n, in, group_size);
  const Matrix m{packed, scale, zero, ref::int4_row_bytes(in), group_size, ref::int4_groups(in, group_size)};
  const ScaleWalk walk(group_size);
  parallel_for_channels(pool, n, out, in, [&](int o0, int o1) {
    if (walk.per > 0)
      run_rows<true>(a, m, walk, y, n, out, o0, o1);
    else
      run_rows<false>(a, m, walk, y, n, out, o0, o1);
  });
#else
  (void)x, (void)packed, (void)scale, (void)zero, (void)y, (void)out, (void)in, (void)pool;
#endif
}

}  // namespace inferlab::cpu
