// The AVX-512 few-row path of matmul_int4 (matmul_int4_rows.h).
//
// A 64-byte load holds 128 codes: 32-bit lane i carries codes 8i .. 8i+7 in its eight nibbles.
// vpermps reads only the low 4 bits of each index lane, so permuting the table {0, 1, .., 15} by the
// lanes shifted right by 4q gives plane q = codes 8i + q as exact floats: 7 shifts and 8 lookups per
// 128 codes, on the shuffle port beside the FMAs. Every group size dividing 128 or a multiple of it
// is a multiple of 8, so lane i lies in one group. Per chunk and token row, sum over q of x * c per
// lane is scaled by the lanes' group scales in one FMA; the zero points come off once per row from
// the groups' sums X_g of x: y = sum_g s_g (sum x c) - sum_g s_g z_g X_g (int4_zero_term). The
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
  gx.assign(static_cast<std::size_t>(n) * groups, 0.0f);
  for (int r = 0; r < n; ++r)
    for (int k = 0; k < in; ++k) {
      const float v = x[static_cast<std::size_t>(r) * in + k];
      const std::size_t c = static_cast<std::size_t>(k / kChunk), rc = static_cast<std::size_t>(r) * chunks + c;
      const int p = k % kChunk;
      xp[rc * kChunk + static_cast<std::size_t>((p % 8) * kLanes + p / 8)] = v;
      gx[static_cast<std::size_t>(r) * groups + k / group_size] += v;
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
  explicit ScaleWalk(int group_size) : idx(_mm512_setzero_si512()) {
    if (group_size < kChunk) {
      per = kChunk / group_size;
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

// y[r * ys] = x[r, :] · W[o, :] for R token rows (Prepared rows r0 .. r0 + R).
template <int R>
void row_tile(const Prepared& a, int r0, const Matrix& m, const ScaleWalk& walk, int o, float* y, std::size_t ys,
              int ahead, int ahead_scales) {
  const std::uint8_t* row = m.packed + static_cast<std::size_t>(o) * m.row_bytes;
  const float* sw = m.scale + static_cast<std::size_t>(o) * m.groups;
  const std::size_t full = m.row_bytes / kChunkBytes;
  const __m512 table = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
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
    const __m512 w0 = plane<0>(v, table), w1 = plane<1>(v, table), w2 = plane<2>(v, table), w3 = plane<3>(v, table);
    const __m512 w4 = plane<4>(v, table), w5 = plane<5>(v, table), w6 = plane<6>(v, table), w7 = plane<7>(v, table);
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
    for (int r = 0; r < R; ++r) {  // two chains of four FMAs per row: the latency stays hidden
      const float* xp = a.xp + (static_cast<std::size_t>(r0 + r) * a.chunks + c) * kChunk;
      __m512 d0 = _mm512_mul_ps(_mm512_loadu_ps(xp), w0);
      __m512 d1 = _mm512_mul_ps(_mm512_loadu_ps(xp + kLanes), w1);
      d0 = _mm512_fmadd_ps(_mm512_loadu_ps(xp + 2 * kLanes), w2, d0);
      d1 = _mm512_fmadd_ps(_mm512_loadu_ps(xp + 3 * kLanes), w3, d1);
      d0 = _mm512_fmadd_ps(_mm512_loadu_ps(xp + 4 * kLanes), w4, d0);
      d1 = _mm512_fmadd_ps(_mm512_loadu_ps(xp + 5 * kLanes), w5, d1);
      d0 = _mm512_fmadd_ps(_mm512_loadu_ps(xp + 6 * kLanes), w6, d0);
      d1 = _mm512_fmadd_ps(_mm512_loadu_ps(xp + 7 * kLanes), w7, d1);
      acc[r] = _mm512_fmadd_ps(_mm512_add_ps(d0, d1), sv, acc[r]);
    }
  }
  const std::uint8_t* zo = m.zero ? m.zero + static_cast<std::size_t>(o) * m.groups : nullptr;
  for (int r = 0; r < R; ++r) {
    const float* gx = a.gx + static_cast<std::size_t>(r0 + r) * a.groups;
    y[static_cast<std::size_t>(r) * ys] = hsum(acc[r]) - int4_zero_term(sw, zo, gx, m.groups);
  }
}

// Channels [o0, o1) of all n token rows: each weight row once, tiles of up to 4 token rows.
void run_rows(const Prepared& a, const Matrix& m, float* y, int n, int out, int o0, int o1) {
  const std::size_t ys = static_cast<std::size_t>(out);
  const int ahead = decode_prefetch_bytes(), ahead_scales = ahead * 8 / m.group_size;  // scales: 8/gs of the codes' bytes
  const ScaleWalk walk(m.group_size);
  for (int o = o0; o < o1; ++o) {
    for_row_tiles(n, [&]<int R>(int r) { row_tile<R>(a, r, m, walk, o, y + r * ys + o, ys, ahead, ahead_scales); });
  }
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
  parallel_for_channels(pool, n, out, in, [&](int o0, int o1) { run_rows(a, m, y, n, out, o0, o1); });
#else
  (void)x, (void)packed, (void)scale, (void)zero, (void)y, (void)out, (void)in, (void)pool;
#endif
}

}  // namespace inferlab::cpu
