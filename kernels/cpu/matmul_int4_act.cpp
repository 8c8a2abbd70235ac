// int4 x int8 matmul (see matmul_int4_act.h). Tile: R token rows x C channels; per 32-block the
// C weight blocks are unpacked once and meet each row's activation block in maddubs/madd. With
// AVX-512 VNNI, batches below kStreamRows stream one weight row at a time through vpdpbusd
// (row_stream).
#include "kernels/cpu/matmul_int4_act.h"
#include "kernels/cpu/int4_zero_term.h"
#include "kernels/cpu/simd.h"

#include <algorithm>
#include <cstddef>
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

template <int R, int C>
inline void tile(const std::int8_t* xq, const float* xs, const int* xsum, std::size_t xqs, std::size_t xss,
                 const std::uint8_t* packed, std::size_t row_bytes, const float* scale, const std::uint8_t* zero,
                 int groups, float* y, std::size_t ys, int in, int group_size) {
  const int blocks = ref::act_blocks(in);
  [[maybe_unused]] const int full = in / kActBlock;  // the AVX2 loop's bound
  float acc[R][C] = {};
  int b = 0;
#if INFERLAB_INT4_ACT_AVX2
  __m256 vacc[R][C];
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) vacc[r][c] = _mm256_setzero_ps();
  const __m256i ones = _mm256_set1_epi16(1);
  for (; b < full; ++b) {
    const int k = b * kActBlock, g = k / group_size;
    __m256i wv[C];
    float ws[C];
    for (int c = 0; c < C; ++c) {
      wv[c] = unpack32(packed + c * row_bytes + static_cast<std::size_t>(k / 2));
      ws[c] = scale[static_cast<std::size_t>(c) * groups + g];
    }
    for (int r = 0; r < R; ++r) {
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + r * xqs + k));
      const float sx = xs[r * xss + static_cast<std::size_t>(b)];
      const int xsum_b = xsum[r * xss + static_cast<std::size_t>(b)];
      for (int c = 0; c < C; ++c) {
        const __m256i dot = _mm256_madd_epi16(_mm256_maddubs_epi16(wv[c], xv), ones);  // 8 x sum(u * x)
        const float s = sx * ws[c];
        vacc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot), _mm256_set1_ps(s), vacc[r][c]);
        const int z = zero ? zero[static_cast<std::size_t>(c) * groups + g] : ref::kInt4SymmetricZero;
        acc[r][c] -= s * static_cast<float>(z * xsum_b);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) acc[r][c] += hsum(vacc[r][c]);
#endif
  for (; b < blocks; ++b) {  // the tail block, or every block without AVX2
    const int k = b * kActBlock, g = k / group_size, end = std::min(in, k + kActBlock);
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) {
        int ux = 0;
        for (int i = k; i < end; ++i) ux += code_at(packed + c * row_bytes, i) * xq[r * xqs + static_cast<std::size_t>(i)];
        const int z = zero ? zero[static_cast<std::size_t>(c) * groups + g] : ref::kInt4SymmetricZero;
        acc[r][c] += xs[r * xss + static_cast<std::size_t>(b)] * scale[static_cast<std::size_t>(c) * groups + g] *
                     static_cast<float>(ux - z * xsum[r * xss + static_cast<std::size_t>(b)]);
      }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) y[r * ys + c] = acc[r][c];
}

#if INFERLAB_INT4_ACT_VNNI
// Decode (n < kStreamRows): each weight row is read front to back (one sequential stream per
// thread) and each 32-code block is unpacked without reordering — its 16 low nibbles are the
// even codes, its 16 high nibbles the odd ones — against activations stored per block as the 16
// even then the 16 odd values (deinterleaved once per call). One `vpdpbusd` (u8 codes x s8
// activations, 4 products per int32 lane) per block and row, then one FMA by scale * act scale.
// The zero point is pulled out of the loop: sum over blocks of s_g * sx_b * z_g * sum(x_b) =
// sum over groups of s_g * z_g * zc[g], zc[g] = sum over g's blocks of sx_b * sum(x_b), per row.
constexpr int kStreamRows = 8;

struct StreamActs {
  const std::int8_t* xd;    // [n, full * 32]: per full block, the even then the odd activations
  const float* xs;          // [n, blocks]
  const float* zc;          // [n, groups]
  const int* block_group;   // [full]: the weight group of each full block
  const std::int8_t* xq;    // [n, in] as given (the tail block)
  const int* xsum;          // [n, blocks]
  std::size_t xds, xss, xqs;  // row strides of xd, xs / xsum, xq
  int full, groups, in, group_size;
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

// Two 32-code blocks per step in 512 bits (2026-12-05; one block per 256-bit step before, with a
// scalar product and a broadcast per block and row): their 32 code bytes become [low nibbles of
// b, high of b, low of b + 1, high of b + 1], which meets the two blocks' stored activations as
// one 64-byte load, one vpdpbusd and one conversion per token row; the lanes' weight x activation
// scales are two broadcasts blended. A last odd block takes the 256-bit step.
template <int R>
inline void row_stream(const StreamActs& a, const std::uint8_t* row, const float* sw, const std::uint8_t* zero,
                       float* y, std::size_t ys) {
  constexpr __mmask16 kAll = 0xFFFF;  // zero-mask forms: GCC 12 (see gemm_panels_int8.cpp)
  const __m512i mask = _mm512_set1_epi8(0x0F);
  __m512 acc[R];
  for (int r = 0; r < R; ++r) acc[r] = _mm512_setzero_ps();
  int b = 0;
  for (; b + 2 <= a.full; b += 2) {
    const __m512i two = _mm512_maskz_broadcast_i64x4(
        0xFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + static_cast<std::size_t>(b) * 16)));
    const __m512i lanes = _mm512_maskz_shuffle_i64x2(0xFF, two, two, _MM_SHUFFLE(1, 1, 0, 0));  // b, b, b+1, b+1
    const __m512i u = _mm512_and_si512(_mm512_mask_srli_epi16(lanes, 0xFF00FF00, lanes, 4), mask);
    const __m512 ws = _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(sw[a.block_group[b]]),
                                           _mm512_set1_ps(sw[a.block_group[b + 1]]));
    for (int r = 0; r < R; ++r) {
      const float* xs = a.xs + r * a.xss + static_cast<std::size_t>(b);
      const __m512i xv = _mm512_loadu_si512(a.xd + r * a.xds + static_cast<std::size_t>(b) * 32);
      const __m512i d = _mm512_maskz_dpbusd_epi32(kAll, _mm512_setzero_si512(), u, xv);
      const __m512 sx = _mm512_mask_blend_ps(0xFF00, _mm512_set1_ps(xs[0]), _mm512_set1_ps(xs[1]));
      acc[r] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(kAll, d), _mm512_mul_ps(ws, sx), acc[r]);
    }
  }
  __m256 last[R];
  for (int r = 0; r < R; ++r) last[r] = _mm256_setzero_ps();
  if (b < a.full) {
    const __m128i m = _mm_set1_epi8(0x0F);
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + static_cast<std::size_t>(b) * 16));
    const __m256i u = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(bytes, 4), m), _mm_and_si128(bytes, m));
    const float s = sw[a.block_group[b]];
    for (int r = 0; r < R; ++r) {
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.xd + r * a.xds + static_cast<std::size_t>(b) * 32));
      const __m256i d = _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, xv);
      last[r] = _mm256_mul_ps(_mm256_cvtepi32_ps(d), _mm256_set1_ps(s * a.xs[r * a.xss + static_cast<std::size_t>(b)]));
    }
  }
  for (int r = 0; r < R; ++r) {
    float t = hsum(acc[r]) + hsum(last[r]);
    t -= int4_zero_term(sw, zero, a.zc + r * static_cast<std::size_t>(a.groups), a.groups);
    y[r * ys] = t + tail_block(a, row, sw, zero, r);
  }
}

// R = 1 and group_size = 32 (one weight group per activation block): 8 blocks at a time, two
// blocks per zmm — their 32 code bytes masked and shifted into [even codes of b, of b+1, odd codes
// of b, of b+1], against activations stored in that order (stream_acts' pair layout; a last odd
// block keeps the single layout) — one 512-bit vpdpbusd per pair, the 8 results reduced into one
// vector of 8 block sums (fold + hadd tree + one permute), the zero points subtracted in integer
// lanes (sum(u x) - z sum(x): exact), then one conversion and one FMA by the 8 products weight
// scale x activation scale — where row_stream pays a scalar product and a broadcast per block,
// and a zero-point pass per row.
inline void row_stream_g32(const StreamActs& a, const std::uint8_t* row, const float* sw, const std::uint8_t* zero,
                           float* y) {
  const __m256i mask = _mm256_set1_epi8(0x0F);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  __m256 acc = _mm256_setzero_ps();
  // Blocks b, b+1 (b even): int32 lanes 0-3 hold block b's partial sums, lanes 4-7 block b+1's.
  auto pair = [&](int b) {
    const __m256i bytes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + static_cast<std::size_t>(b) * 16));
    const __m256i lo = _mm256_and_si256(bytes, mask), hi = _mm256_and_si256(_mm256_srli_epi16(bytes, 4), mask);
    const __m512i u = _mm512_maskz_inserti64x4(0xFF, _mm512_maskz_broadcast_i64x4(0xFF, lo), hi, 1);
    const __m512i d = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u,
                                          _mm512_loadu_si512(a.xd + static_cast<std::size_t>(b) * 32));
    return _mm256_add_epi32(_mm512_maskz_extracti64x4_epi64(0xF, d, 0), _mm512_maskz_extracti64x4_epi64(0xF, d, 1));
  };
  // The last full block when their number is odd (single layout): its sums in lanes 0-3.
  auto single = [&](int b) {
    const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(row + static_cast<std::size_t>(b) * 16));
    const __m128i m = _mm256_castsi256_si128(mask);
    const __m256i u = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(bytes, 4), m), _mm_and_si128(bytes, m));
    const __m256i d = _mm256_dpbusd_epi32(_mm256_setzero_si256(), u,
                                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a.xd + static_cast<std::size_t>(b) * 32)));
    return _mm256_zextsi128_si256(_mm_add_epi32(_mm256_castsi256_si128(d), _mm256_extracti128_si256(d, 1)));
  };
  auto octet = [&](auto masked, int b, int count) {
    __m256i f[4];
    for (int j = 0; j < 4; ++j) {
      if (!decltype(masked)::value || 2 * j + 1 < count) f[j] = pair(b + 2 * j);
      else if (2 * j < count) f[j] = single(b + 2 * j);
      else f[j] = _mm256_setzero_si256();
    }
    // hadd: per 128-bit lane [a0+a1, a2+a3, b0+b1, b2+b3]; two levels leave blocks 0, 2, 4, 6 in
    // the low half and 1, 3, 5, 7 in the high half; `order` puts them in block order.
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(f[0], f[1]), _mm256_hadd_epi32(f[2], f[3]));
    __m256i sums = _mm256_permutevar8x32_epi32(h, order);  // [8] block sums
    const __mmask8 m = decltype(masked)::value ? static_cast<__mmask8>((1u << count) - 1) : __mmask8{0xFF};
    const __m256i z = zero ? _mm256_cvtepu8_epi32(_mm_maskz_loadu_epi8(m, zero + b))
                           : _mm256_set1_epi32(ref::kInt4SymmetricZero);
    sums = _mm256_sub_epi32(sums, _mm256_mullo_epi32(z, _mm256_maskz_loadu_epi32(m, a.xsum + b)));
    const __m256 scale = _mm256_mul_ps(_mm256_maskz_loadu_ps(m, sw + b), _mm256_maskz_loadu_ps(m, a.xs + b));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), scale, acc);
  };
  int b = 0;
  for (; b + 8 <= a.full; b += 8) octet(std::false_type{}, b, 8);
  if (b < a.full) octet(std::true_type{}, b, a.full - b);
  y[0] = hsum(acc) + tail_block(a, row, sw, zero, 0);
}

// The per-call activation layout of row_stream, in thread-local buffers of the calling thread.
// pairs (row_stream_g32): full blocks 2p, 2p+1 stored as [even of 2p, even of 2p+1, odd of 2p,
// odd of 2p+1]; a last odd block, and every block without pairs, as [even, odd].
StreamActs stream_acts(const std::int8_t* xq, const float* xs, const int* xsum, int n, int in, int group_size,
                       bool pairs) {
  thread_local std::vector<std::int8_t> xd;
  thread_local std::vector<float> zc;
  thread_local std::vector<int> block_group;
  const int blocks = ref::act_blocks(in), full = in / kActBlock, groups = ref::int4_groups(in, group_size);
  xd.resize(static_cast<std::size_t>(n) * full * kActBlock);
  zc.assign(static_cast<std::size_t>(n) * groups, 0.0f);
  block_group.resize(static_cast<std::size_t>(full));
  for (int b = 0; b < full; ++b) block_group[static_cast<std::size_t>(b)] = b * kActBlock / group_size;
  for (int r = 0; r < n; ++r)
    for (int b = 0; b < full; ++b) {
      const std::int8_t* src = xq + static_cast<std::size_t>(r) * in + b * kActBlock;
      std::int8_t* dst = xd.data() + (static_cast<std::size_t>(r) * full + b) * kActBlock;
      const bool paired = pairs && (b % 2 == 1 || b + 1 < full);
      const int even_at = paired ? (b % 2) * (kActBlock / 2) - (b % 2) * kActBlock : 0;  // offsets from dst
      const int odd_at = paired ? kActBlock + even_at : kActBlock / 2;
      for (int i = 0; i < kActBlock / 2; ++i) {
        dst[even_at + i] = src[2 * i];
        dst[odd_at + i] = src[2 * i + 1];
      }
      const std::size_t rb = static_cast<std::size_t>(r) * blocks + b;
      zc[static_cast<std::size_t>(r) * groups + block_group[static_cast<std::size_t>(b)]] +=
          xs[rb] * static_cast<float>(xsum[rb]);
    }
  return {xd.data(), xs, zc.data(), block_group.data(), xq, xsum,
          static_cast<std::size_t>(full) * kActBlock, static_cast<std::size_t>(blocks), static_cast<std::size_t>(in),
          full, groups, in, group_size};
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
  constexpr int kUnit = 8;
  const std::size_t units = static_cast<std::size_t>((out + kUnit - 1) / kUnit);
  const std::size_t work = static_cast<std::size_t>(kUnit) * static_cast<std::size_t>(std::max(in, 1)) *
                           static_cast<std::size_t>(n);
  const std::size_t grain = std::max<std::size_t>(1, (std::size_t{1} << 16) / work);
#if INFERLAB_INT4_ACT_VNNI
  if (n < kStreamRows) {
    const StreamActs acts = stream_acts(xq, xs, xsum, n, in, group_size, n == 1 && group_size == kActBlock);
    pool.parallel_for(units, [&](std::size_t begin, std::size_t end) {
      const int o1 = std::min(out, static_cast<int>(end) * kUnit);
      for (int o = static_cast<int>(begin) * kUnit; o < o1; ++o) {
        const std::uint8_t* row = packed + static_cast<std::size_t>(o) * row_bytes;
        const float* sw = scale + static_cast<std::size_t>(o) * groups;
        const std::uint8_t* zo = zero ? zero + static_cast<std::size_t>(o) * groups : nullptr;
        if (n == 1 && group_size == kActBlock) {
          row_stream_g32(acts, row, sw, zo, y + o);
          continue;
        }
        StreamActs at = acts;
        int r = 0;
        for (; r + 4 <= n; r += 4, at.xd += 4 * at.xds, at.xs += 4 * at.xss, at.xsum += 4 * at.xss, at.xq += 4 * at.xqs,
                           at.zc += 4 * static_cast<std::size_t>(at.groups))
          row_stream<4>(at, row, sw, zo, y + r * ys + o, ys);
        switch (n - r) {
          case 3: row_stream<3>(at, row, sw, zo, y + r * ys + o, ys); break;
          case 2: row_stream<2>(at, row, sw, zo, y + r * ys + o, ys); break;
          case 1: row_stream<1>(at, row, sw, zo, y + r * ys + o, ys); break;
          default: break;
        }
      }
    }, grain);
    return;
  }
#endif
  pool.parallel_for(units, [&](std::size_t begin, std::size_t end) {
    const int o0 = static_cast<int>(begin) * kUnit, o1 = std::min(out, static_cast<int>(end) * kUnit);
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
                     y + r * ys + o, ys, in, group_size);
        for (; r < n; ++r)
          tile<1, C>(xq + r * xqs, xs + r * xss, xsum + r * xss, xqs, xss, pb, row_bytes, sb, zb, groups,
                     y + r * ys + o, ys, in, group_size);
      }
      for (; o < o1; ++o)
        for (int r = 0; r < n; ++r)
          tile<1, 1>(xq + r * xqs, xs + r * xss, xsum + r * xss, xqs, xss,
                     packed + static_cast<std::size_t>(o) * row_bytes, row_bytes,
                     scale + static_cast<std::size_t>(o) * groups,
                     zero ? zero + static_cast<std::size_t>(o) * groups : nullptr, groups, y + r * ys + o, ys, in,
                     group_size);
    };
    if (n <= 2) run(std::integral_constant<int, 4>{});
    else run(std::integral_constant<int, 2>{});
  }, grain);
}

}  // namespace inferlab::cpu
