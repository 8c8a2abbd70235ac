// The GGML block layouts inferlab reads natively, in one place (the dequantiser of
// core/src/formats/dequant.cpp and the kernels of kernels/cpu/matmul_gguf.cpp both use it).
// All little-endian; "fp16" is an IEEE half.
//
//   Q8_0 (34 bytes / 32 weights):  d fp16, q int8[32];                 w_i = d * q_i
//   Q4_0 (18 bytes / 32 weights):  d fp16, qs[16];                     w_i = d * (nib_i - 8)
//   Q4_1 (20 bytes / 32 weights):  d fp16, m fp16, qs[16];             w_i = d * nib_i + m
//       nib_i for i < 16 is the low nibble of qs[i], for i >= 16 the high nibble of qs[i - 16].
//   Q4_K (144 bytes / 256 weights): d fp16, dmin fp16, scales[12], qs[128]. Eight sub-blocks of
//       32, each with a 6-bit scale sc_j and 6-bit min m_j packed in scales[] (kq_scale_min);
//       w = d * sc_j * nib - dmin * m_j. Sub-blocks 2k and 2k+1 share qs[32k .. 32k+32): the
//       first takes the low nibbles, the second the high ones.
//   Q5_K (176 bytes / 256 weights): d, dmin, scales[12] as Q4_K, qh[32], qs[128]; the 5-bit code
//       of element l of sub-block j is its Q4_K nibble + 16 * bit j of qh[l].
//   Q6_K (210 bytes / 256 weights): ql[128], qh[64], scales int8[16], d fp16. Two halves of 128;
//       in half h, element 32k + l (k < 4, l < 32) has code
//         (ql[64h + l + 32 (k & 1)] >> 4 (k >> 1)) & 15  |  ((qh[32h + l] >> 2k) & 3) << 4
//       and w = d * scales[8h + 2k + l / 16] * (code - 32).
//   Q5_0 (22 bytes / 32 weights):  d fp16, qh[4], qs[16];             w_i = d * (code_i - 16)
//   Q5_1 (24 bytes / 32 weights):  d fp16, m fp16, qh[4], qs[16];     w_i = d * code_i + m
//       code_i = nib_i (as Q4_0) | bit i of the little-endian uint32 qh, << 4.
//   Q2_K (84 bytes / 256 weights): scales[16], qs[64], d fp16, dmin fp16. Sixteen sub-blocks of
//       16, scale byte j = sc_j (low nibble) | m_j << 4; element 32c + l (c < 8, l < 32) has code
//       (qs[32 (c / 4) + l] >> 2 (c % 4)) & 3 and w = (d * sc_j) * code - dmin * m_j, j = 2c + l / 16.
//   Q3_K (110 bytes / 256 weights): hmask[32], qs[64], scales[12], d fp16. Element 32c + l has
//       code Q2_K's 2 bits | bit c of hmask[l] << 2 (0..7) and w = d * (s_j - 32) * (code - 4),
//       j = 2c + l / 16; the 6-bit s_j: low nibble of scales[j] (j < 8) or scales[j - 8] >> 4,
//       high 2 bits at bit 2 (j / 4) of scales[8 + j % 4] (q3k_scale).
//   IQ4_NL (18 bytes / 32 weights): d fp16, qs[16] nibbles as Q4_0;   w_i = d * kIq4Values[nib_i]
//   IQ4_XS (136 bytes / 256 weights): d fp16, scales_h uint16, scales_l[4], qs[128]. Eight
//       sub-blocks of 32, sub-block c's 16 bytes at 8 + 16c in Q4_0's nibble order; its 6-bit
//       scale s_c = nibble c of scales_l | bits 2c, 2c+1 of scales_h << 4;
//       w = (d * (s_c - 32)) * kIq4Values[nib].
#pragma once
#include <cstddef>
#include <cstdint>

// Callable from CUDA device code too (kernels/cuda/gguf_block_math.h decodes the same layouts).
#if defined(__CUDACC__)
#define INFERLAB_GGUF_HD __host__ __device__
#else
#define INFERLAB_GGUF_HD
#endif

namespace inferlab::ref {

inline constexpr int kGgufBlock = 32;   // weights per Q8_0 / Q4_0 / Q4_1 block, per K sub-block
inline constexpr int kGgufSuper = 256;  // weights per K-quant super-block

inline constexpr std::size_t kQ4KBytes = 144, kQ5KBytes = 176, kQ6KBytes = 210;
inline constexpr std::size_t kQ5_0Bytes = 22, kQ5_1Bytes = 24, kIq4NlBytes = 18;
inline constexpr std::size_t kQ2KBytes = 84, kQ3KBytes = 110, kIq4XsBytes = 136;

// IQ4_NL / IQ4_XS's non-linear 4-bit grid: nibble q stands for kIq4Values[q] (times the scale).
inline constexpr std::int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                               1,    13,   25,  38,  53,  69,  89,  113};

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K super-block, from its 12
// scale bytes: sub-blocks 0-3 keep theirs in the low 6 bits of bytes j and j+4; 4-7 split
// theirs into a nibble of byte j+4 and the top 2 bits of bytes j-4 (scale) and j (min).
INFERLAB_GGUF_HD inline void kq_scale_min(const std::uint8_t* scales, int j, std::uint8_t& sc, std::uint8_t& m) {
  if (j < 4) {
    sc = scales[j] & 63;
    m = scales[j + 4] & 63;
  } else {
    sc = static_cast<std::uint8_t>((scales[j + 4] & 0x0F) | ((scales[j - 4] >> 6) << 4));
    m = static_cast<std::uint8_t>((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
  }
}

// Code l (< 32) of sub-block c (< 8) of one K-quant super-block `blk`, as stored: Q4_K 0..15
// (nibbles of qs at byte 16), Q5_K 0..31 (nibbles of qs at byte 48, fifth bit c of qh[l] at
// byte 16), Q6_K 0..63 (sub-block c = 32 k + l of half h = c / 4, k = c % 4, as above). The one
// place the loader's dequantiser and both GGUF kernels read K-quant codes from.
inline int q4k_code(const std::uint8_t* blk, int c, int l) { return (blk[16 + 32 * (c / 2) + l] >> (4 * (c & 1))) & 0x0F; }
inline int q5k_code(const std::uint8_t* blk, int c, int l) {
  return ((blk[48 + 32 * (c / 2) + l] >> (4 * (c & 1))) & 0x0F) | (((blk[16 + l] >> c) & 1) << 4);
}
inline int q6k_code(const std::uint8_t* blk, int c, int l) {
  const int h = c / 4, k = c % 4;
  return ((blk[64 * h + 32 * (k & 1) + l] >> (4 * (k >> 1))) & 0x0F) | (((blk[128 + 32 * h + l] >> (2 * k)) & 3) << 4);
}

// Nibble i (< 32) of 16 bytes in Q4_0's order: the low nibbles are 0..15, the high ones 16..31.
inline int split_nibble(const std::uint8_t* qs, int i) { return i < 16 ? qs[i] & 0x0F : qs[i - 16] >> 4; }
// Code i (< 32) of a Q5_0 / Q5_1 block whose qh starts at `qh` (qs follows it): 0..31.
inline int q5_code(const std::uint8_t* qh, int i) {
  const std::uint8_t* qs = qh + 4;
  return split_nibble(qs, i) | (((qh[i / 8] >> (i % 8)) & 1) << 4);
}
// Q2_K: code l (< 32) of chunk c (< 8), 0..3. Q3_K: 0..7 (its w is s * (code - 4)).
inline int q2k_code(const std::uint8_t* blk, int c, int l) { return (blk[16 + 32 * (c / 4) + l] >> (2 * (c % 4))) & 3; }
inline int q3k_code(const std::uint8_t* blk, int c, int l) {
  return ((blk[32 + 32 * (c / 4) + l] >> (2 * (c % 4))) & 3) | (((blk[l] >> c) & 1) << 2);
}
// Q3_K's 6-bit scale j (< 16), before its -32.
inline int q3k_scale(const std::uint8_t* blk, int j) {
  const std::uint8_t* sc = blk + 96;
  const int lo = j < 8 ? sc[j] & 0x0F : sc[j - 8] >> 4;
  return lo | (((sc[8 + j % 4] >> (2 * (j / 4))) & 3) << 4);
}
// IQ4_XS's 6-bit scale of sub-block c (< 8), before its -32.
inline int iq4xs_scale(const std::uint8_t* blk, int c) {
  const int hi = ((blk[2] | (blk[3] << 8)) >> (2 * c)) & 3;
  return ((blk[4 + c / 2] >> (4 * (c % 2))) & 0x0F) | (hi << 4);
}

inline std::uint16_t load_le16(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] | (p[1] << 8)); }
inline void store_le16(std::uint8_t* p, std::uint16_t v) {
  p[0] = static_cast<std::uint8_t>(v & 0xFF);
  p[1] = static_cast<std::uint8_t>(v >> 8);
}

}  // namespace inferlab::ref
