// The block formats matmul_gguf's row kernels run (internal to kernels/cpu/matmul_gguf.cpp):
// one struct per GGML type, the table row a new format adds. Each says
//   kElems, kBytes          weights and bytes per block
//   kSigned                 codes are int8 values (Q8_0, IQ4_*) rather than unsigned 0..63
//   kOffsets                some half-chunk has an offset o != 0
//   scales(b, hs)           per half-chunk (16 values) scale s and offset o: w = s * code + o
//   int_scales(b, ks)       (256-element formats) the same as integers times D and M, for the
//                           int8-activation path against one activation scale per super-block
//   code(b, c, i)           code i (< 32) of chunk c, scalar
//   codes(b, c)             the chunk's 32 codes as bytes (AVX2)
// The codes are the ones inferlab/gguf_blocks.h defines (the loader's dequantiser reads them
// from the same helpers), so only the arithmetic differs from dequantise-then-matmul.
#pragma once
#include <cstddef>
#include <cstdint>

#include "inferlab/ggml_types.h"
#include "inferlab/gguf_blocks.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define INFERLAB_GGUF_AVX2 1
#endif

namespace inferlab::cpu::gguf_formats {

constexpr int kChunk = 32;  // codes per chunk (= activation block)
constexpr int kHalf = 16;   // values per scale/offset

inline float half_at(const std::uint8_t* p) {
#if defined(__F16C__)
  return _cvtsh_ss(ref::load_le16(p));
#else
  return fp16_to_fp32(ref::load_le16(p));
#endif
}

// Scale and offset of each half-chunk of one block: w = s[h] * code + o[h], h = 2 * chunk + half.
struct HalfScales {
  float s[2 * ref::kGgufSuper / kChunk];
  float o[2 * ref::kGgufSuper / kChunk];
};

inline void set_chunk(HalfScales& hs, int c, float s, float o) {
  hs.s[2 * c] = hs.s[2 * c + 1] = s;
  hs.o[2 * c] = hs.o[2 * c + 1] = o;
}

// A K-quant super-block's integer scales, for the int8 path: w = D * sc[h] * code + M * mn[h] for
// the 16 values of half-chunk h, so a row's dot over the block is
// dx * (D * sum_h sc[h] sum c x + M * sum_h mn[h] sum x), all sums in integers.
struct KIntScales {
  float D, M;
  std::int16_t sc[16], mn[16];
};

#if INFERLAB_GGUF_AVX2
inline int hsum_i32(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}
// Bytes shifted right by `bits` (< 8) and masked: the codes a packed byte array holds there.
inline __m256i bits_at(__m256i bytes, int bits, int mask) {
  return _mm256_and_si256(_mm256_srl_epi16(bytes, _mm_cvtsi32_si128(bits)), _mm256_set1_epi8(static_cast<char>(mask)));
}
// Q4_0 / Q4_1 order: codes 0..15 are the low nibbles of the 16 bytes, 16..31 the high ones.
inline __m256i nibbles_split(const std::uint8_t* p) {
  const __m128i bytes = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  const __m128i mask = _mm_set1_epi8(0x0F);
  return _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(bytes, 4), mask), _mm_and_si128(bytes, mask));
}
inline __m256i load32(const std::uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
#endif

struct FormatQ8_0 {
  static constexpr int kElems = 32;
  static constexpr std::size_t kBytes = 34;
  static constexpr bool kSigned = true, kOffsets = false;
  static void scales(const std::uint8_t* b, HalfScales& hs) { set_chunk(hs, 0, half_at(b), 0.0f); }
  static int code(const std::uint8_t* b, int, int i) { return static_cast<std::int8_t>(b[2 + i]); }
#if INFERLAB_GGUF_AVX2
  static __m256i codes(const std::uint8_t* b, int) { return load32(b + 2); }
#endif
};

struct FormatQ4_0 {
  static constexpr int kElems = 32;
  static constexpr std::size_t kBytes = 18;
  static constexpr bool kSigned = false, kOffsets = true;
  static void scales(const std::uint8_t* b, HalfScales& hs) {
    const float d = half_at(b);
    set_chunk(hs, 0, d, -8.0f * d);
  }
  static int code(const std::uint8_t* b, int, int i) { return i < 16 ? b[2 + i] & 0x0F : b[2 + i - 16] >> 4; }
#if INFERLAB_GGUF_AVX2
  static __m256i codes(const std::uint8_t* b, int) { return nibbles_split(b + 2); }
#endif
};

struct FormatQ4_1 {
  static constexpr int kElems = 32;
  static constexpr std::size_t kBytes = 20;
  static constexpr bool kSigned = false, kOffsets = true;
  static void scales(const std::uint8_t* b, HalfScales& hs) { set_chunk(hs, 0, half_at(b), half_at(b + 2)); }
  static int code(const std::uint8_t* b, int, int i) { return i < 16 ? b[4 + i] & 0x0F : b[4 + i - 16] >> 4; }
#if INFERLAB_GGUF_AVX2
  static __m256i codes(const std::uint8_t* b, int) { return nibbles_split(b + 4); }
#endif
};

struct FormatQ4_K {
  static constexpr int kElems = ref::kGgufSuper;
  static constexpr std::size_t kBytes = ref::kQ4KBytes;
  static constexpr bool kSigned = false, kOffsets = true;
  static void scales(const std::uint8_t* b, HalfScales& hs) {
    const float d = half_at(b), dmin = half_at(b + 2);
    for (int j = 0; j < 8; ++j) {
      std::uint8_t sc = 0, m = 0;
      ref::kq_scale_min(b + 4, j, sc, m);
      set_chunk(hs, j, d * static_cast<float>(sc), -dmin * static_cast<float>(m));
    }
  }
  static void int_scales(const std::uint8_t* b, KIntScales& ks) {
    ks.D = half_at(b);
    ks.M = -half_at(b + 2);
    for (int j = 0; j < 8; ++j) {
      std::uint8_t sc = 0, m = 0;
      ref::kq_scale_min(b + 4, j, sc, m);
      ks.sc[2 * j] = ks.sc[2 * j + 1] = sc;
      ks.mn[2 * j] = ks.mn[2 * j + 1] = m;
    }
  }
  // Sub-block c: nibbles of qs[32 (c / 2) ..], low for even c.
  static int code(const std::uint8_t* b, int c, int i) { return ref::q4k_code(b, c, i); }
#if INFERLAB_GGUF_AVX2
  static __m256i codes(const std::uint8_t* b, int c) { return bits_at(load32(b + 16 + 32 * (c / 2)), 4 * (c & 1), 0x0F); }
#endif
};

// Q5_K: Q4_K's scales and nibbles (qs at byte 48) plus a fifth bit per code: bit c of qh[i]
// (bytes 16..47) for element i of sub-block c.
struct FormatQ5_K {
  static constexpr int kElems = ref::kGgufSuper;
  static constexpr std::size_t kBytes = ref::kQ5KBytes;
  static constexpr bool kSigned = false, kOffsets = true;
  static void scales(const std::uint8_t* b, HalfScales& hs) { FormatQ4_K::scales(b, hs); }
  static void int_scales(const std::uint8_t* b, KIntScales& ks) { FormatQ4_K::int_scales(b, ks); }
  static int code(const std::uint8_t* b, int c, int i) { return ref::q5k_code(b, c, i); }
#if INFERLAB_GGUF_AVX2
  static __m256i codes(const std::uint8_t* b, int c) {
    const __m256i lo = bits_at(load32(b + 48 + 32 * (c / 2)), 4 * (c & 1), 0x0F);
    return _mm256_or_si256(lo, _mm256_slli_epi16(bits_at(load32(b + 16), c, 1), 4));  // bit <= 1: stays in its byte
  }
#endif
};

struct FormatQ6_K {
  static constexpr int kElems = ref::kGgufSuper;
  static constexpr std::size_t kBytes = ref::kQ6KBytes;
  static constexpr bool kSigned = false, kOffsets = true;
  static void scales(const std::uint8_t* b, HalfScales& hs) {
    const float d = half_at(b + 208);
    const auto* sc = reinterpret_cast<const std::int8_t*>(b + 192);
    for (int c = 0; c < 8; ++c)  // chunk c = 32 k + l of half h = c / 4, k = c % 4
      for (int half = 0; half < 2; ++half) {
        const float s = d * static_cast<float>(sc[8 * (c / 4) + 2 * (c % 4) + half]);
        hs.s[2 * c + half] = s;
        hs.o[2 * c + half] = -32.0f * s;
      }
  }
  static void int_scales(const std::uint8_t* b, KIntScales& ks) {
    ks.D = ks.M = half_at(b + 208);
    const auto* sc = reinterpret_cast<const std::int8_t*>(b + 192);
    for (int c = 0; c < 8; ++c)
      for (int half = 0; half < 2; ++half) {
        const int s = sc[8 * (c / 4) + 2 * (c % 4) + half];
        ks.sc[2 * c + half] = static_cast<std::int16_t>(s);
        ks.mn[2 * c + half] = static_cast<std::int16_t>(-32 * s);
      }
  }
  static int code(const std::uint8_t* b, int c, int i) { return ref::q6k_code(b, c, i); }
#if INFERLAB_GGUF_AVX2
  static __m256i codes(const std::uint8_t* b, int c) {
    const int h = c / 4, k = c % 4;
    const __m256i lo = bits_at(load32(b + 64 * h + 32 * (k & 1)), 4 * (k >> 1), 0x0F);
    const __m256i hi = bits_at(load32(b + 128 + 32 * h), 2 * k, 3);
    return _mm256_or_si256(lo, _mm256_slli_epi16(hi, 4));  // hi <= 3: shifting stays inside each byte
  }
#endif
};


#if INFERLAB_GGUF_AVX2
// Bit i of the little-endian 32 bits at p, as byte i: `value` where set, 0 where clear.
inline __m256i bits_to_bytes(const std::uint8_t* p, char value) {
  const __m256i bytes = _mm256_shuffle_epi8(_mm256_set1_epi32(static_cast<int>(ref::load_le16(p) | (ref::load_le16(p + 2) << 16))),
                                            _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2,
                                                             2, 2, 3, 3, 3, 3, 3, 3, 3, 3));
  const __m256i bit = _mm256_set1_epi64x(static_cast<long long>(0x8040201008040201ULL));
  return _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(bytes, bit), bit), _mm256_set1_epi8(value));
}
// IQ4's grid values of 32 nibbles in Q4_0's order.
inline __m256i iq4_values(const std::uint8_t* qs) {
  const __m128i grid = _mm_loadu_si128(reinterpret_cast<const __m128i*>(ref::kIq4Values));
  return _mm256_shuffle_epi8(_mm256_set_m128i(grid, grid), nibbles_split(qs));
}
#endif

// Q5_0 / Q5_1: Q4_0 / Q4_1 with a fifth bit per code from the 32 bits of qh (at `Qh`).
template <bool kMin>
struct FormatQ5 {
  static constexpr int kElems = 32;
  static constexpr std::size_t kQh = kMin ? 4 : 2;
  static constexpr std::size_t kBytes = kMin ? ref::kQ5_1Bytes : ref::kQ5_0Bytes;
  static constexpr bool kSigned = false, kOffsets = true;
  static void scales(const std::uint8_t* b, HalfScales& hs) {
    const float d = half_at(b);
    set_chunk(hs, 0, d, kMin ? half_at(b + 2) : -16.0f * d);
  }
  static int code(const std::uint8_t* b, int, int i) { return ref::q5_code(b + kQh, i); }
#if INFERLAB_GGUF_AVX2
  static __m256i codes(const std::uint8_t* b, int) { return _mm256_or_si256(nibbles_split(b + kQh + 4), bits_to_bytes(b + kQh, 16)); }
#endif
};
using FormatQ5_0 = FormatQ5<false>;
using FormatQ5_1 = FormatQ5<true>;

struct FormatIQ4_NL {
  static constexpr int kElems = 32;
  static constexpr std::size_t kBytes = ref::kIq4NlBytes;
  static constexpr bool kSigned = true, kOffsets = false;
  static void scales(const std::uint8_t* b, HalfScales& hs) { set_chunk(hs, 0, half_at(b), 0.0f); }
  static int code(const std::uint8_t* b, int, int i) { return ref::kIq4Values[ref::split_nibble(b + 2, i)]; }
#if INFERLAB_GGUF_AVX2
  static __m256i codes(const std::uint8_t* b, int) { return iq4_values(b + 2); }
#endif
};

// Q2_K: 2-bit codes, a 4-bit scale and min per 16 (half-chunk h's byte h of scales).
struct FormatQ2_K {
  static constexpr int kElems = ref::kGgufSuper;
  static constexpr std::size_t kBytes = ref::kQ2KBytes;
  static constexpr bool kSigned = false, kOffsets = true;
  static void scales(const std::uint8_t* b, HalfScales& hs) {
    const float d = half_at(b + 80), dmin = half_at(b + 82);
    for (int h = 0; h < 16; ++h) {
      hs.s[h] = d * static_cast<float>(b[h] & 0x0F);
      hs.o[h] = -dmin * static_cast<float>(b[h] >> 4);
    }
  }
  static void int_scales(const std::uint8_t* b, KIntScales& ks) {
    ks.D = half_at(b + 80);
    ks.M = -half_at(b + 82);
    for (int h = 0; h < 16; ++h) {
      ks.sc[h] = static_cast<std::int16_t>(b[h] & 0x0F);
      ks.mn[h] = static_cast<std::int16_t>(b[h] >> 4);
    }
  }
  static int code(const std::uint8_t* b, int c, int i) { return ref::q2k_code(b, c, i); }
#if INFERLAB_GGUF_AVX2
  static __m256i codes(const std::uint8_t* b, int c) { return bits_at(load32(b + 16 + 32 * (c / 4)), 2 * (c % 4), 3); }
#endif
};

// Q3_K: 3-bit codes (0..7, w = s * (code - 4)), a signed 6-bit scale per 16.
struct FormatQ3_K {
  static constexpr int kElems = ref::kGgufSuper;
  static constexpr std::size_t kBytes = ref::kQ3KBytes;
  static constexpr bool kSigned = false, kOffsets = true;
  static void scales(const std::uint8_t* b, HalfScales& hs) {
    const float d = half_at(b + 108);
    for (int h = 0; h < 16; ++h) {
      hs.s[h] = d * static_cast<float>(ref::q3k_scale(b, h) - 32);
      hs.o[h] = -4.0f * hs.s[h];
    }
  }
  static void int_scales(const std::uint8_t* b, KIntScales& ks) {
    ks.D = ks.M = half_at(b + 108);
    for (int h = 0; h < 16; ++h) {
      ks.sc[h] = static_cast<std::int16_t>(ref::q3k_scale(b, h) - 32);
      ks.mn[h] = static_cast<std::int16_t>(-4 * ks.sc[h]);
    }
  }
  static int code(const std::uint8_t* b, int c, int i) { return ref::q3k_code(b, c, i); }
#if INFERLAB_GGUF_AVX2
  static __m256i codes(const std::uint8_t* b, int c) {
    const __m256i lo = bits_at(load32(b + 32 + 32 * (c / 4)), 2 * (c % 4), 3);
    return _mm256_or_si256(lo, _mm256_slli_epi16(bits_at(load32(b), c, 1), 2));  // bit <= 1: stays in its byte
  }
#endif
};

// IQ4_XS: IQ4_NL's grid values with a signed 6-bit scale per 32 (no offsets).
struct FormatIQ4_XS {
  static constexpr int kElems = ref::kGgufSuper;
  static constexpr std::size_t kBytes = ref::kIq4XsBytes;
  static constexpr bool kSigned = true, kOffsets = false;
  static void scales(const std::uint8_t* b, HalfScales& hs) {
    const float d = half_at(b);
    for (int c = 0; c < 8; ++c) set_chunk(hs, c, d * static_cast<float>(ref::iq4xs_scale(b, c) - 32), 0.0f);
  }
  static void int_scales(const std::uint8_t* b, KIntScales& ks) {
    ks.D = half_at(b);
    ks.M = 0.0f;
    for (int c = 0; c < 8; ++c) {
      ks.sc[2 * c] = ks.sc[2 * c + 1] = static_cast<std::int16_t>(ref::iq4xs_scale(b, c) - 32);
      ks.mn[2 * c] = ks.mn[2 * c + 1] = 0;
    }
  }
  static int code(const std::uint8_t* b, int c, int i) { return ref::kIq4Values[ref::split_nibble(b + 8 + 16 * c, i)]; }
#if INFERLAB_GGUF_AVX2
  static __m256i codes(const std::uint8_t* b, int c) { return iq4_values(b + 8 + 16 * c); }
#endif
};

}  // namespace inferlab::cpu::gguf_formats
