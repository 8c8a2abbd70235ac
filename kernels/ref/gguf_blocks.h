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
#pragma once
#include <cstddef>
#include <cstdint>

namespace inferlab::ref {

inline constexpr int kGgufBlock = 32;   // weights per Q8_0 / Q4_0 / Q4_1 block, per K sub-block
inline constexpr int kGgufSuper = 256;  // weights per K-quant super-block

inline constexpr std::size_t kQ4KBytes = 144, kQ5KBytes = 176, kQ6KBytes = 210;

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K super-block, from its 12
// scale bytes: sub-blocks 0-3 keep theirs in the low 6 bits of bytes j and j+4; 4-7 split
// theirs into a nibble of byte j+4 and the top 2 bits of bytes j-4 (scale) and j (min).
inline void kq_scale_min(const std::uint8_t* scales, int j, std::uint8_t& sc, std::uint8_t& m) {
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

inline std::uint16_t load_le16(const std::uint8_t* p) { return static_cast<std::uint16_t>(p[0] | (p[1] << 8)); }
inline void store_le16(std::uint8_t* p, std::uint16_t v) {
  p[0] = static_cast<std::uint8_t>(v & 0xFF);
  p[1] = static_cast<std::uint8_t>(v >> 8);
}

}  // namespace inferlab::ref
