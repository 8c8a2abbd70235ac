// The arithmetic of the CUDA GGUF kernels (gguf_mmvq.cu, gguf_dequant.cu) on one sub-block of
// 32 weights of a GGUF file's own blocks (inferlab/gguf_blocks.h spells the layouts out), as
// __host__ __device__ functions: the kernels call them on the GPU, the CPU tests
// (tests/kernels/test_gguf_block_math.cpp) call the very same code against the loader's
// dequantiser and a double-precision dot product, so the block parsing is checked without a GPU.
//
// A sub-block decodes to SubBlock: 32 signed 8-bit codes in 8 words (word k holds codes 4k ..
// 4k+3, lowest byte first, the order of the activations) and w_i = a * code_i + b, with a = a_lo
// for i < 16 and a_hi beyond (Q6_K's two 16-value scales), b the block's min (Q4_1, Q4_K; 0
// otherwise: Q4_0's -8 and Q6_K's -32 are folded into the codes). Against activations quantised
// per 32 (xq int8, scale xs: cuda::quantize_activations with block 32, ref::quantize_act_rows),
//   sum_i w_i x_i = xs * (a_lo * dot_lo + a_hi * dot_hi + b * sum_i xq_i),
// dot_lo / dot_hi the exact int32 dot products of codes and xq over each half (__dp4a), the last
// term only for types with a min. This is the arithmetic of llama.cpp's mmvq (integer block dots
// against activation blocks of 32), written here from the layouts.
//
// Types: Q8_0 (34 bytes / 32), Q4_0 (18), Q4_1 (20), Q4_K (144 / 256: 8 sub-blocks) and Q6_K
// (210 / 256). Rows of Q4_1 and Q4_K blocks keep 4-byte alignment (4-byte loads); Q8_0, Q4_0
// and Q6_K rows only 2-byte alignment (two 2-byte loads per word): the file's bytes are used as
// they are, unpadded.
#pragma once
#include <cstdint>
#include <cstring>

#include "inferlab/ggml_types.h"
#include "inferlab/gguf_blocks.h"

#if defined(__CUDACC__)
#include <cuda_fp16.h>
#endif
#if !defined(__CUDA_ARCH__)
#include "kernels/ref/half.h"
#endif

namespace inferlab::cuda::gguf {

// The GGML types the CUDA kernels run, and whether a type is one of them.
inline constexpr GgmlType kTypes[] = {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ4_K,
                                      GgmlType::kQ6_K};
inline constexpr bool runs(GgmlType type) {
  for (GgmlType t : kTypes)
    if (t == type) return true;
  return false;
}

struct SubBlock {
  int q[8];          // codes 4k .. 4k+3 in word k, signed bytes
  float a_lo, a_hi;  // the scale of codes 0..15, 16..31
  float b;           // the min (0 where the type has none)
};

// ---- loads and integer dots, one code for both sides ----------------------------------------
// 4 bytes at p (p 2-byte aligned): two 16-bit loads on the GPU.
INFERLAB_GGUF_HD inline int load_2b(const std::uint8_t* p) {
#if defined(__CUDA_ARCH__)
  const auto* h = reinterpret_cast<const std::uint16_t*>(p);
  return static_cast<int>(static_cast<std::uint32_t>(h[0]) | (static_cast<std::uint32_t>(h[1]) << 16));
#else
  std::uint32_t v;
  std::memcpy(&v, p, 4);  // little-endian, as the file
  return static_cast<int>(v);
#endif
}
// 4 bytes at p (p 4-byte aligned).
INFERLAB_GGUF_HD inline int load_4b(const std::uint8_t* p) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const int*>(p);
#else
  return load_2b(p);
#endif
}
INFERLAB_GGUF_HD inline float half_at(const std::uint8_t* p) {
  const auto bits = static_cast<std::uint16_t>(p[0] | (p[1] << 8));
#if defined(__CUDA_ARCH__)
  return __half2float(__ushort_as_half(bits));
#else
  return ref::f16_to_float(bits);
#endif
}
// c + sum of the four signed byte products of a and b (__dp4a).
INFERLAB_GGUF_HD inline int dot4(int a, int b, int c) {
#if defined(__CUDA_ARCH__)
  return __dp4a(a, b, c);
#else
  const auto ua = static_cast<std::uint32_t>(a), ub = static_cast<std::uint32_t>(b);
  for (int k = 0; k < 4; ++k)
    c += static_cast<int>(static_cast<std::int8_t>(ua >> (8 * k))) * static_cast<int>(static_cast<std::int8_t>(ub >> (8 * k)));
  return c;
#endif
}
// Each byte u (u + 128 - c <= 255) of w becomes the signed byte u - c, without carries between
// bytes: (u + 128 - c) ^ 128 is u - c in two's complement.
INFERLAB_GGUF_HD inline int minus_bytes(int w, int c) {
  const std::uint32_t add = static_cast<std::uint32_t>(128 - c) * 0x01010101u;
  return static_cast<int>((static_cast<std::uint32_t>(w) + add) ^ 0x80808080u);
}
// ---- per type: bytes per block, sub-blocks per block, decode ----------------------------------
template <GgmlType T>
struct Block;

template <>
struct Block<GgmlType::kQ8_0> {
  static constexpr int kBytes = 34, kSubs = 1;
  static constexpr bool kMin = false;
  static INFERLAB_GGUF_HD void decode(const std::uint8_t* row, int sub, SubBlock& s) {
    const std::uint8_t* blk = row + static_cast<long long>(sub) * kBytes;
    s.a_lo = s.a_hi = half_at(blk);
    s.b = 0.0f;
    for (int k = 0; k < 8; ++k) s.q[k] = load_2b(blk + 2 + 4 * k);
  }
};

template <>
struct Block<GgmlType::kQ4_0> {
  static constexpr int kBytes = 18, kSubs = 1;
  static constexpr bool kMin = false;
  static INFERLAB_GGUF_HD void decode(const std::uint8_t* row, int sub, SubBlock& s) {
    const std::uint8_t* blk = row + static_cast<long long>(sub) * kBytes;
    s.a_lo = s.a_hi = half_at(blk);
    s.b = 0.0f;
    for (int k = 0; k < 4; ++k) {  // low nibbles: codes 0..15, high ones 16..31
      const int w = load_2b(blk + 2 + 4 * k);
      s.q[k] = minus_bytes(w & 0x0F0F0F0F, 8);
      s.q[k + 4] = minus_bytes((w >> 4) & 0x0F0F0F0F, 8);
    }
  }
};

template <>
struct Block<GgmlType::kQ4_1> {
  static constexpr int kBytes = 20, kSubs = 1;
  static constexpr bool kMin = true;
  static INFERLAB_GGUF_HD void decode(const std::uint8_t* row, int sub, SubBlock& s) {
    const std::uint8_t* blk = row + static_cast<long long>(sub) * kBytes;
    s.a_lo = s.a_hi = half_at(blk);
    s.b = half_at(blk + 2);
    for (int k = 0; k < 4; ++k) {
      const int w = load_4b(blk + 4 + 4 * k);
      s.q[k] = w & 0x0F0F0F0F;
      s.q[k + 4] = (w >> 4) & 0x0F0F0F0F;
    }
  }
};

template <>
struct Block<GgmlType::kQ4_K> {
  static constexpr int kBytes = 144, kSubs = 8;
  static constexpr bool kMin = true;
  static INFERLAB_GGUF_HD void decode(const std::uint8_t* row, int sub, SubBlock& s) {
    const int j = sub % kSubs;
    const std::uint8_t* blk = row + static_cast<long long>(sub / kSubs) * kBytes;
    std::uint8_t sc = 0, m = 0;
    ref::kq_scale_min(blk + 4, j, sc, m);
    s.a_lo = s.a_hi = half_at(blk) * static_cast<float>(sc);
    s.b = -(half_at(blk + 2) * static_cast<float>(m));
    const std::uint8_t* qs = blk + 16 + 32 * (j / 2);  // shared by sub-blocks 2k, 2k+1
    const int shift = 4 * (j & 1);
    for (int k = 0; k < 8; ++k) s.q[k] = (load_4b(qs + 4 * k) >> shift) & 0x0F0F0F0F;
  }
};

template <>
struct Block<GgmlType::kQ6_K> {
  static constexpr int kBytes = 210, kSubs = 8;
  static constexpr bool kMin = false;
  static INFERLAB_GGUF_HD void decode(const std::uint8_t* row, int sub, SubBlock& s) {
    const int c = sub % kSubs, h = c / 4, k = c % 4;
    const std::uint8_t* blk = row + static_cast<long long>(sub / kSubs) * kBytes;
    const std::uint8_t* ql = blk + 64 * h + 32 * (k & 1);
    const std::uint8_t* qh = blk + 128 + 32 * h;
    const int shift_lo = 4 * (k >> 1), shift_hi = 2 * k;
    const float d = half_at(blk + 208);
    s.a_lo = d * static_cast<float>(static_cast<std::int8_t>(blk[192 + 8 * h + 2 * k]));
    s.a_hi = d * static_cast<float>(static_cast<std::int8_t>(blk[192 + 8 * h + 2 * k + 1]));
    s.b = 0.0f;
    for (int i = 0; i < 8; ++i) {
      const int lo = (load_2b(ql + 4 * i) >> shift_lo) & 0x0F0F0F0F;
      const int hi = (load_2b(qh + 4 * i) >> shift_hi) & 0x03030303;
      s.q[i] = minus_bytes(lo | (hi << 4), 32);
    }
  }
};

// sum_i w_i x_i of one sub-block against 32 activations xq (4-byte aligned) of scale xs.
template <bool kMin>
INFERLAB_GGUF_HD inline float sub_dot(const SubBlock& s, const std::int8_t* xq, float xs) {
  const auto* x = reinterpret_cast<const std::uint8_t*>(xq);
  int lo = 0, hi = 0, sum = 0;
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
  for (int k = 0; k < 4; ++k) {
    const int a = load_4b(x + 4 * k), b = load_4b(x + 16 + 4 * k);
    lo = dot4(s.q[k], a, lo);
    hi = dot4(s.q[k + 4], b, hi);
    if (kMin) sum = dot4(0x01010101, b, dot4(0x01010101, a, sum));
  }
  float r = s.a_lo * static_cast<float>(lo) + s.a_hi * static_cast<float>(hi);
  if (kMin) r += s.b * static_cast<float>(sum);
  return xs * r;
}

// One lane's share of a GEMV row: acc[r] += the sub-blocks lane, lane + lanes, ... of `row` (a
// row of in / 32 sub-blocks of type T) against activation row r (xq [N, in], xs [N, in / 32]).
// gguf_mmvq.cu's warps call it with lanes = 32 and sum acc over the lanes.
template <GgmlType T, int N>
INFERLAB_GGUF_HD inline void row_partial(const std::uint8_t* row, const std::int8_t* xq, const float* xs, int in,
                                         int lane, int lanes, float (&acc)[N]) {
  using B = Block<T>;
  const int subs = in / 32;
  for (int s = lane; s < subs; s += lanes) {
    SubBlock sb;
    B::decode(row, s, sb);
#if defined(__CUDA_ARCH__)
#pragma unroll
#endif
    for (int r = 0; r < N; ++r)
      acc[r] += sub_dot<B::kMin>(sb, xq + static_cast<long long>(r) * in + 32LL * s, xs[static_cast<long long>(r) * subs + s]);
  }
}

// The 32 weights of one sub-block as floats.
INFERLAB_GGUF_HD inline float weight_at(const SubBlock& s, int i) {
  const int code = static_cast<std::int8_t>(static_cast<std::uint32_t>(s.q[i / 4]) >> (8 * (i % 4)));
  return (i < 16 ? s.a_lo : s.a_hi) * static_cast<float>(code) + s.b;
}

}  // namespace inferlab::cuda::gguf
