// int4 x int8 matmul (see matmul_int4_act.h). Tile: R token rows x C channels; per 32-block the
// C weight blocks are unpacked once and meet each row's activation block in maddubs/madd. With
// AVX-512 VNNI, every batch streams one weight row at a time through vpdpbusd, its int32 lanes
// one per 32-block (row_stream), in groups of up to 7 token rows.
#include "kernels/cpu/matmul_int4_act.h"
#include "kernels/cpu/decode_prefetch.h"
#include "kernels/cpu/dot_tile.h"
#include "kernels/cpu/int4_zero_term.h"
#include "kernels/cpu/simd.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/ref/matmul_int4.h"
#include "kernels/ref/matmul_int8.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define INFERLAB_INT4_ACT_AVX2 1
#endif
#if defined(__AVX512VNNI__) && defined(__AVX512VL__) && defined(__AVX512BW__)
#define INFERLAB_INT4_ACT_VNNI 1
#endif

namespace inferlab::cpu {
namespace {

using ref::kActBlock;

#if INFERLAB_INT4_ACT_AVX2
// 32 codes in order from 16 packed bytes (code 2j in the low nibble of byte j, 2j+1 in the high).
inline __m256i unpack32(const std::uint8_t* p) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i mask = _mm_set1_epi8(0x0F);
  const __m128i lo = _mm_and_si128(bytes, mask);
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(bytes, 4), mask);
  return _mm256_set_m128i(_mm_unpackhi_epi8(lo, hi), _mm_unpacklo_epi8(lo, hi));
}
#endif

inline int code_at(const std::uint8_t* row, int i) {
  const std::uint8_t byte = row[i / 2];
  return (i % 2 == 0) ? (byte & 0x0F) : (byte >> 4);
}

// zc [R rows, stride zcs]: per group, the sum over its full blocks of sx_b * sum(x_b) (the
// zero-point term's activations, full_block_sums), read by the AVX2 loop only.
template <int R, int C>
inline void tile(const std::int8_t* xq, const float* xs, const int* xsum, std::size_t xqs, std::size_t xss,
                 const std::uint8_t* packed, std::size_t row_bytes, const float* scale, const std::uint8_t* zero,
                 int groups, float* y, std::size_t ys, int in, int group_size, [[maybe_unused]] const float* zc,
                 [[maybe_unused]] std::size_t zcs, [[maybe_unused]] int ahead) {
  const int blocks = ref::act_blocks(in);
  [[maybe_unused]] const int full = in / kActBlock;  // the AVX2 loop's bound
  float acc[R][C] = {};
  int b = 0;
#if INFERLAB_INT4_ACT_AVX2
  __m256 vacc[R][C];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) vacc[r][c] = _mm256_setzero_ps();
  const __m256i ones = _mm256_set1_epi16(1);
  for (; b < full; ++b) {
    const int k = b * kActBlock, g = k / group_size;
    __m256i wv[C];
    float ws[C];
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) {
      const std::uint8_t* p = packed + c * row_bytes + static_cast<std::size_t>(k / 2);
      if (b % 4 == 0) prefetch_ahead(p, 64, ahead);  // one line per 4 blocks of each weight row
      wv[c] = unpack32(p);
      ws[c] = scale[static_cast<std::size_t>(c) * groups + g];
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + r * xqs + k));
      const float sx = xs[r * xss + static_cast<std::size_t>(b)];
#pragma GCC unroll 16
      for (int c = 0; c < C; ++c) {
        const __m256i dot = _mm256_madd_epi16(_mm256_maddubs_epi16(wv[c], xv), ones);  // 8 x sum(u * x)
        vacc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(sx * ws[c]), vacc[r][c]);
      }
    }
  }
  // The zero points once per group, not per block: sum_g s_g z_g zc[r][g].
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) {
      float zt = 0.0f;
      for (int g = 0; g < groups && g * group_size < full * kActBlock; ++g) {
        const int z = zero ? zero[static_cast<std::size_t>(c) * groups + g] : ref::kInt4SymmetricZero;
        zt += scale[static_cast<std::size_t>(c) * groups + g] * static_cast<float>(z) * zc[r * zcs + static_cast<std::size_t>(g)];
      }
      acc[r][c] += hsum(vacc[r][c]) - zt;
    }
#endif
  for (; b < blocks; ++b) {  // the tail block, or every block without AVX2
    const int k = b * kActBlock, g = k / group_size, end = std::min(in, k + kActBlock);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int c = 0; c < C; ++c) {
        int ux = 0;
        for (int i = k; i < end; ++i) ux += code_at(packed + c * row_bytes, i) * xq[r * xqs + static_cast<std::size_t>(i)];
        const int z = zero ? zero[static_cast<std::size_t>(c) * groups + g] : ref::kInt4SymmetricZero;
        acc[r][c] += xs[r * xss + static_cast<std::size_t>(b)] * scale[static_cast<std::size_t>(c) * groups + g] *
                     static_cast<float>(ux - z * xsum[r * xss + static_cast<std::size_t>(b)]);
      }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) y[r * ys + c] = acc[r][c];
}

#if INFERLAB_INT4_ACT_VNNI
// Every batch (up to kPassRows = 7 token rows a pass): each weight row is read front to back (one sequential
// stream per thread, prefetched ahead) in chunks of 16 blocks (256 bytes), and the int32 lanes of
// vpdpbusd are the chunk's 16 blocks, as gemm_gguf's lanes are its panel's 32 rows: dword j of
// block l (its codes 8j .. 8j+7) is moved into lane l of vector j by a 4 x 16 transpose of the
// chunk's dwords (two vpermt2d and two 128-bit shuffles per pair of vectors), its low nibbles (the
// even codes) and high nibbles (the odd ones) masked apart. The activations are laid out once per
// call to match (block_acts), so one chunk is 8 vpdpbusd per token row into two int32 chains
// whose 16 lanes are whole block sums, then one conversion and one FMA by the 16 blocks' weight x
// activation scales, where a lane per block pair (the kernel before, 2026-12-05) paid a
// conversion, a product and two broadcasts for every 64 codes and row. The unpacking (4 loads,
// 8 shuffles, 12 nibble ops per 256 bytes) is shared by every token row of the call (up to 7, one
// pass), so a few-row pass reads and unpacks each weight row once. The zero point is pulled out of
// the loop: sum over blocks of s_g * sx_b * z_g * sum(x_b) = sum over groups of s_g * z_g * zc[g],
// zc[g] = sum over g's blocks of sx_b * sum(x_b), per row.
// Token rows one pass takes; more run in groups of up to kPassRows, each weight row read from
// memory once and again from L1 for every further group. The AVX2 tiles (tile above) ran such
// batches at a third of that speed or less (TinyLlama W4A8 g128, AMX Xeon, 2026-12-06: 8 rows
// 174-178 -> 58-59 ms, 16 rows 330-343 -> 109-113, pp128 2.64-2.74 -> 0.93 s), so with VNNI every
// batch streams.
constexpr int kPassRows = 7;
constexpr int kChunkBlocks = 16;                         // blocks per chunk: one per int32 lane
constexpr int kChunkBytes = kChunkBlocks * kActBlock / 2;  // 256 bytes of codes
constexpr int kChunkActs = kChunkBlocks * kActBlock;      // 512 activations: 8 vectors of 64

struct StreamActs {
  const std::int8_t* xl;    // [n, chunks, 8 vectors, 64]: block_acts' order, zero past the full blocks
  const float* xs;          // [n, blocks]
  const float* zc;          // [n, groups]
  const int* block_group;   // [chunks * 16]: the weight group of each full block (0 past them)
  const std::int8_t* xq;    // [n, in] as given (the tail block)
  const int* xsum;          // [n, blocks]
  std::size_t xls, xss, xqs;  // row strides of xl, xs / xsum, xq
  int full, chunks, groups, in, group_size;
  bool half_last;  // the last chunk holds 1..8 blocks: the half layout (row_stream)
  // The same layout from token row r0 on.
  StreamActs from_row(int r0) const {
    StreamActs a = *this;
    const auto r = static_cast<std::size_t>(r0);
    a.xl += r * xls, a.xs += r * xss, a.zc += r * static_cast<std::size_t>(groups), a.xq += r * xqs, a.xsum += r * xss;
    return a;
  }
};

// Token row r's part of the tail block (fewer than 32 inputs past the last full block; 0 when
// there is none), as tile's scalar loop.
inline float tail_block(const StreamActs& a, const std::uint8_t* row, const float* sw, const std::uint8_t* zero, int r) {
  if (a.full * kActBlock >= a.in) return 0.0f;
  const int k = a.full * kActBlock, g = k / a.group_size;
  int ux = 0;
  for (int i = k; i < a.in; ++i) ux += code_at(row, i) * a.xq[r * a.xqs + static_cast<std::size_t>(i)];
  const int z = zero ? zero[g] : ref::kInt4SymmetricZero;
  return a.xs[r * a.xss + static_cast<std::size_t>(a.full)] * sw[g] *
         static_cast<float>(ux - z * a.xsum[r * a.xss + static_cast<std::size_t>(a.full)]);
}

// Lane l of vector 2i + h holds block l's codes 8i + 2t + h (t = 0..3) of one chunk: the
// nibbles of dword i of each of the chunk's 16 blocks.
struct ChunkCodes {
  __m512i u[8];
};

// The chunk at p (blocks [0, count) of it, count <= 16; codes past them read as 0).
inline ChunkCodes chunk_codes(const std::uint8_t* p, int count) {
  __m512i z[4];  // z[i]: blocks 4i .. 4i+3, lane 4m + j = dword j of block 4i + m
  for (int i = 0; i < 4; ++i) {
    const int bytes = std::clamp(count * kActBlock / 2 - 64 * i, 0, 64);
    const __mmask64 m = bytes == 64 ? ~__mmask64{0} : (__mmask64{1} << bytes) - 1;
    z[i] = _mm512_maskz_loadu_epi8(m, p + 64 * i);
  }
  // Pair (j, j+1): lanes 0-7 of the result take dword j of blocks 0-7 (from z[0], z[1]), lanes
  // 8-15 dword j+1 of them; the same index on z[2], z[3] gives blocks 8-15.
  const __m512i pair01 = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29);
  const __m512i two = _mm512_set1_epi32(2);  // dwords j + 2, j + 3
  const __m512i mask = _mm512_set1_epi8(0x0F);
  ChunkCodes c;
  for (int j = 0; j < 4; j += 2) {
    const __m512i idx = j == 0 ? pair01 : _mm512_add_epi32(pair01, two);
    const __m512i lo = _mm512_permutex2var_epi32(z[0], idx, z[1]), hi = _mm512_permutex2var_epi32(z[2], idx, z[3]);
    const __m512i wj = _mm512_maskz_shuffle_i64x2(0xFF, lo, hi, _MM_SHUFFLE(1, 0, 1, 0));
    const __m512i wk = _mm512_maskz_shuffle_i64x2(0xFF, lo, hi, _MM_SHUFFLE(3, 2, 3, 2));
    c.u[2 * j] = _mm512_and_si512(wj, mask);
    c.u[2 * j + 1] = _mm512_and_si512(_mm512_maskz_srli_epi16(~__mmask32{0}, wj, 4), mask);
    c.u[2 * j + 2] = _mm512_and_si512(wk, mask);
    c.u[2 * j + 3] = _mm512_and_si512(_mm512_maskz_srli_epi16(~__mmask32{0}, wk, 4), mask);
  }
  return c;
}

// The weight scales of chunk c's 16 blocks (lane l: block 16c + l), zero past `count` blocks.
inline __m512 chunk_scales(const StreamActs& a, const float* sw, int c, int count) {
  const __mmask16 valid = count >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << count) - 1u);
  const int per = a.group_size / kActBlock;  // blocks per group
  const int b0 = c * kChunkBlocks;
  if (kChunkBlocks % per == 0) {  // groups of 32 .. 512 inputs: 16 / per groups in the chunk
    const int g0 = b0 / per, n = std::min(kChunkBlocks / per, a.groups - g0);
    const __m512i idx = _mm512_maskz_srli_epi32(0xFFFF, _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                                __builtin_ctz(static_cast<unsigned>(per)));
    return _mm512_maskz_permutexvar_ps(valid, idx, _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1u), sw + g0));
  }
  if (per % kChunkBlocks == 0) return _mm512_maskz_mov_ps(valid, _mm512_set1_ps(sw[b0 / per]));  // one group
  const __m512i g = _mm512_maskz_loadu_epi32(valid, a.block_group + b0);
  return _mm512_mask_i32gather_ps(_mm512_setzero_ps(), valid, g, sw, 4);
}

// y[r * ys] = x[r, :] · W[o, :] for the R token rows of a (R <= kPassRows).
template <int R>
inline void row_stream(const StreamActs& a, const std::uint8_t* row, const float* sw, const std::uint8_t* zero,
                       float* y, std::size_t ys, int ahead) {
  constexpr __mmask16 kAll = 0xFFFF;  // zero-mask forms: GCC 12 (see gemm_panels_int8.cpp)
  __m512 acc[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  const int whole = a.half_last ? a.chunks - 1 : a.chunks;
  for (int c = 0; c < whole; ++c) {
    const std::uint8_t* p = row + static_cast<std::size_t>(c) * kChunkBytes;
    prefetch_ahead(p, kChunkBytes, ahead);
    const int count = std::min(kChunkBlocks, a.full - c * kChunkBlocks);
    const ChunkCodes w = chunk_codes(p, count);
    const __m512 ws = chunk_scales(a, sw, c, count);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const std::int8_t* xv = a.xl + r * a.xls + static_cast<std::size_t>(c) * kChunkActs;
      __m512i d0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w.u[0], _mm512_loadu_si512(xv));
      __m512i d1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), w.u[1], _mm512_loadu_si512(xv + 64));
      for (int v = 2; v < 8; v += 2) {
        d0 = _mm512_dpbusd_epi32(d0, w.u[v], _mm512_loadu_si512(xv + 64 * v));
        d1 = _mm512_dpbusd_epi32(d1, w.u[v + 1], _mm512_loadu_si512(xv + 64 * (v + 1)));
      }
      const __m512 sx = _mm512_maskz_loadu_ps(static_cast<__mmask16>(count >= 16 ? 0xFFFF : (1u << count) - 1u),
                                              a.xs + r * a.xss + static_cast<std::size_t>(c) * kChunkBlocks);
      acc[r] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(kAll, _mm512_add_epi32(d0, d1)), _mm512_mul_ps(ws, sx), acc[r]);
    }
  }
  if (a.half_last) {  // 1..8 blocks left (SmolLM2's 576 inputs: 16 + 2): half the work of a chunk
    const int c = a.chunks - 1, count = a.full - c * kChunkBlocks;
    const std::uint8_t* p = row + static_cast<std::size_t>(c) * kChunkBytes;
    const __m512i mask = _mm512_set1_epi8(0x0F);
    __m512i z[2];
    for (int i = 0; i < 2; ++i) {
      const int bytes = std::clamp(count * kActBlock / 2 - 64 * i, 0, 64);
      z[i] = _mm512_maskz_loadu_epi8(bytes == 64 ? ~__mmask64{0} : (__mmask64{1} << bytes) - 1, p + 64 * i);
    }
    // Lanes 0-7: dword j of blocks 0-7, lanes 8-15: dword j + 1 (chunk_codes' first step).
    const __m512i pair01 = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29);
    __m512i u[4];
    for (int j = 0; j < 2; ++j) {
      const __m512i w = _mm512_permutex2var_epi32(z[0], _mm512_add_epi32(pair01, _mm512_set1_epi32(2 * j)), z[1]);
      u[2 * j] = _mm512_and_si512(w, mask);
      u[2 * j + 1] = _mm512_and_si512(_mm512_maskz_srli_epi16(~__mmask32{0}, w, 4), mask);
    }
    const __m512 ws = chunk_scales(a, sw, c, count);  // lanes 8-15 zero
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const std::int8_t* xv = a.xl + r * a.xls + static_cast<std::size_t>(c) * kChunkActs;
      __m512i d0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[0], _mm512_loadu_si512(xv));
      __m512i d1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[1], _mm512_loadu_si512(xv + 64));
      d0 = _mm512_dpbusd_epi32(d0, u[2], _mm512_loadu_si512(xv + 128));
      d1 = _mm512_dpbusd_epi32(d1, u[3], _mm512_loadu_si512(xv + 192));
      __m512i d = _mm512_add_epi32(d0, d1);
      d = _mm512_add_epi32(d, _mm512_maskz_shuffle_i64x2(0xFF, d, d, _MM_SHUFFLE(3, 2, 3, 2)));  // lane l += l + 8
      const __m512 sx = _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << count) - 1u),
                                              a.xs + r * a.xss + static_cast<std::size_t>(c) * kChunkBlocks);
      acc[r] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(kAll, d), _mm512_mul_ps(ws, sx), acc[r]);
    }
  }
  fold_int4_zero_points<R>(sw, zero, a.zc, a.groups, a.groups, [&](int r) -> __m512& { return acc[r]; });
  const bool tail = a.full * kActBlock < a.in;
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) y[r * ys] = hsum(acc[r]) + (tail ? tail_block(a, row, sw, zero, r) : 0.0f);
}

// The per-call activation layout of row_stream (thread-local buffers of the calling thread): per
// row and chunk, vector 2i + h holds at bytes 4l + t the activation of code 8i + 2t + h of block
// 16c + l, zero past the full blocks; a last chunk of 1..8 blocks (half_last) holds code 8i + 2t +
// h of block l at bytes 4 (l + 8 (i % 2)) + t of vector 2 (i / 2) + h (4 vectors).
StreamActs block_acts(const std::int8_t* xq, const float* xs, const int* xsum, int n, int in, int group_size) {
  thread_local std::vector<std::int8_t> xl;
  thread_local std::vector<float> zc;
  thread_local std::vector<int> block_group;
  const int blocks = ref::act_blocks(in), full = in / kActBlock, groups = ref::int4_groups(in, group_size);
  const int chunks = (full + kChunkBlocks - 1) / kChunkBlocks;
  const bool half_last = full % kChunkBlocks != 0 && full % kChunkBlocks <= kChunkBlocks / 2;
  const std::size_t xls = static_cast<std::size_t>(chunks) * kChunkActs;
  xl.assign(static_cast<std::size_t>(n) * xls, 0);
  zc.assign(static_cast<std::size_t>(n) * groups, 0.0f);
  block_group.assign(static_cast<std::size_t>(chunks) * kChunkBlocks, 0);
  for (int b = 0; b < full; ++b) block_group[static_cast<std::size_t>(b)] = b * kActBlock / group_size;
  for (int r = 0; r < n; ++r)
    for (int b = 0; b < full; ++b) {
      const std::int8_t* src = xq + static_cast<std::size_t>(r) * in + b * kActBlock;
      std::int8_t* dst = xl.data() + r * xls + static_cast<std::size_t>(b / kChunkBlocks) * kChunkActs;
      // One byte shuffle puts the block's 32 values in vector order (dword v: vector v's 4 bytes;
      // the values of vectors 0-3 lie in the low 16 bytes, those of 4-7 in the high), then a
      // dword to each vector.
      const __m256i order = _mm256_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15,  //
                                             0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15);
      alignas(32) std::int32_t words[8];
      _mm256_store_si256(reinterpret_cast<__m256i*>(words),
                         _mm256_shuffle_epi8(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(src)), order));
      const int l = b % kChunkBlocks;
      if (half_last && b / kChunkBlocks == chunks - 1) {  // vector 2 (i / 2) + h: dword i of block l at lane l + 8 (i % 2)
        for (int v = 0; v < 8; ++v) std::memcpy(dst + (v / 4 * 2 + v % 2) * 64 + 4 * (l + 8 * (v / 2 % 2)), &words[v], 4);
      } else {
        for (int v = 0; v < 8; ++v) std::memcpy(dst + v * 64 + 4 * l, &words[v], 4);
      }
      const std::size_t rb = static_cast<std::size_t>(r) * blocks + b;
      zc[static_cast<std::size_t>(r) * groups + block_group[static_cast<std::size_t>(b)]] +=
          xs[rb] * static_cast<float>(xsum[rb]);
    }
  return {xl.data(), xs, zc.data(), block_group.data(), xq, xsum, xls, static_cast<std::size_t>(blocks),
          static_cast<std::size_t>(in), full, chunks, groups, in, group_size, half_last};
}
#endif

}  // namespace

void matmul_int4_act(const std::int8_t* xq, const float* xs, const std::uint8_t* packed, const float* scale,
                     const std::uint8_t* zero, float* y, int n, int out, int in, int group_size, ThreadPool& pool) {
  if (n <= 0 || out <= 0) return;
  const int blocks = ref::act_blocks(in), groups = ref::int4_groups(in, group_size);
  const std::size_t xqs = static_cast<std::size_t>(in), xss = static_cast<std::size_t>(blocks),
                    ys = static_cast<std::size_t>(out), row_bytes = ref::int4_row_bytes(in);
  // Per activation block, the sum of its codes (for the zero-point term); the calling thread's
  // buffer, reused across calls.
  thread_local std::vector<int> xsum_buffer;
  xsum_buffer.assign(static_cast<std::size_t>(n) * blocks, 0);
  // The workers reach the buffer through this pointer: inside their lambdas the thread_local's
  // name would denote each worker's own (empty) instance.
  int* const xsum = xsum_buffer.data();
  for (int r = 0; r < n; ++r)
    for (int b = 0; b < blocks; ++b) {
      int s = 0;
      for (int i = b * kActBlock; i < std::min(in, (b + 1) * kActBlock); ++i) s += xq[static_cast<std::size_t>(r) * in + i];
      xsum[static_cast<std::size_t>(r) * blocks + b] = s;
    }
#if INFERLAB_INT4_ACT_VNNI
  {
    const StreamActs acts = block_acts(xq, xs, xsum, n, in, group_size);
    const int ahead = decode_prefetch_bytes();
    parallel_for_channels(pool, n, out, in, [&](int o0, int o1) {
      // Each weight row once from memory, then again from L1 for every further group of up to
      // kPassRows token rows (the same sums per row as one pass gives it).
      for (int o = o0; o < o1; ++o) {
        const std::uint8_t* row = packed + static_cast<std::size_t>(o) * row_bytes;
        const float* sw = scale + static_cast<std::size_t>(o) * groups;
        const std::uint8_t* zo = zero ? zero + static_cast<std::size_t>(o) * groups : nullptr;
        for (int r0 = 0; r0 < n; r0 += kPassRows) {
          const StreamActs a = acts.from_row(r0);
          float* yo = y + static_cast<std::size_t>(r0) * ys + o;
          const int ahead_once = r0 == 0 ? ahead : 0;
          switch (std::min(kPassRows, n - r0)) {
            case 1: row_stream<1>(a, row, sw, zo, yo, ys, ahead_once); break;
            case 2: row_stream<2>(a, row, sw, zo, yo, ys, ahead_once); break;
            case 3: row_stream<3>(a, row, sw, zo, yo, ys, ahead_once); break;
            case 4: row_stream<4>(a, row, sw, zo, yo, ys, ahead_once); break;
            case 5: row_stream<5>(a, row, sw, zo, yo, ys, ahead_once); break;
            case 6: row_stream<6>(a, row, sw, zo, yo, ys, ahead_once); break;
            default: row_stream<7>(a, row, sw, zo, yo, ys, ahead_once); break;
          }
        }
      }
    });
    return;
  }
#endif
  // Per token row and group, the zero-point term's activations over the full blocks (tile's AVX2 loop).
  thread_local std::vector<float> zc_buffer;
  zc_buffer.assign(static_cast<std::size_t>(n) * groups, 0.0f);
  const float* const zc = zc_buffer.data();
  const std::size_t zcs = static_cast<std::size_t>(groups);
  for (int r = 0; r < n; ++r)
    for (int b = 0; b < in / kActBlock; ++b) {
      const std::size_t rb = static_cast<std::size_t>(r) * blocks + b;
      zc_buffer[static_cast<std::size_t>(r) * groups + b * kActBlock / group_size] += xs[rb] * static_cast<float>(xsum[rb]);
    }
  const int ahead = decode_prefetch_bytes();
  parallel_for_channels(pool, n, out, in, [&](int o0, int o1) {
    auto run = [&](auto c_tag) {
      constexpr int C = decltype(c_tag)::value;
      int o = o0;
      for (; o + C <= o1; o += C) {
        const std::uint8_t* pb = packed + static_cast<std::size_t>(o) * row_bytes;
        const float* sb = scale + static_cast<std::size_t>(o) * groups;
        const std::uint8_t* zb = zero ? zero + static_cast<std::size_t>(o) * groups : nullptr;
        int r = 0;
        for (; r + 4 <= n; r += 4)
          tile<4, C>(xq + r * xqs, xs + r * xss, xsum + r * xss, xqs, xss, pb, row_bytes, sb, zb, groups,
                     y + r * ys + o, ys, in, group_size, zc + r * zcs, zcs, r == 0 ? ahead : 0);
        for (; r < n; ++r)
          tile<1, C>(xq + r * xqs, xs + r * xss, xsum + r * xss, xqs, xss, pb, row_bytes, sb, zb, groups,
                     y + r * ys + o, ys, in, group_size, zc + r * zcs, zcs, r == 0 ? ahead : 0);
      }
      for (; o < o1; ++o)
        for (int r = 0; r < n; ++r)
          tile<1, 1>(xq + r * xqs, xs + r * xss, xsum + r * xss, xqs, xss,
                     packed + static_cast<std::size_t>(o) * row_bytes, row_bytes,
                     scale + static_cast<std::size_t>(o) * groups,
                     zero ? zero + static_cast<std::size_t>(o) * groups : nullptr, groups, y + r * ys + o, ys, in,
                     group_size, zc + r * zcs, zcs, 0);
    };
    if (n <= 2) run(std::integral_constant<int, 4>{});
    else run(std::integral_constant<int, 2>{});
  });
}

}  // namespace inferlab::cpu
