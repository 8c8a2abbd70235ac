// Where each element of a warp-level mma.sync fragment lives (PTX ISA, "Matrix fragments for
// mma.m16n8k16" with .bf16/.f16 and "mma.m16n8k32" with .s8), and the nibble unpacking of the int4
// tiles: plain inline functions usable from host code (the CPU tests check that every fragment
// covers its tile exactly once, tests/kernels/test_cuda_linear_plan.cpp) and from device code
// (kernels/cuda/mma.cuh, int4_mma.cu, int8_mma.cu; reusable by other tensor-core kernels).
//
// Both shapes share one pattern: lane = 4 * group + thread_in_group; a register holds `epr`
// consecutive elements along K (2 halves or 4 int8); A (16 x K, row-major) has 4 registers, B
// (K x 8, column-major) 2, the fp32 / int32 accumulator C (16 x 8) 4 single elements.
#pragma once
#include <cstdint>

#if defined(__CUDACC__)
#define INFERLAB_HD __host__ __device__ __forceinline__
#else
#define INFERLAB_HD inline
#endif

namespace inferlab::cuda::mma {

// Elements per 32-bit register: 2 for bf16/f16 (m16n8k16), 4 for s8 (m16n8k32).
inline constexpr int kHalfPerReg = 2;
inline constexpr int kInt8PerReg = 4;

// A fragment, register r in [0, 4), element e in [0, epr): row in [0, 16), column (K) in [0, 8 epr).
INFERLAB_HD int a_row(int lane, int r) { return lane / 4 + 8 * (r & 1); }
INFERLAB_HD int a_col(int lane, int r, int e, int epr) { return (lane % 4) * epr + e + (r / 2) * 4 * epr; }
// B fragment, register r in [0, 2): K index and column in [0, 8).
INFERLAB_HD int b_k(int lane, int r, int e, int epr) { return (lane % 4) * epr + e + r * 4 * epr; }
INFERLAB_HD int b_col(int lane) { return lane / 4; }
// Accumulator element i in [0, 4): row in [0, 16), column in [0, 8).
INFERLAB_HD int c_row(int lane, int i) { return lane / 4 + 8 * (i / 2); }
INFERLAB_HD int c_col(int lane, int i) { return 2 * (lane % 4) + (i & 1); }

// Eight int4 codes of a little-endian 32-bit word (code k in bits 4k..4k+3, the even index in the
// low nibble: kernels/ref/matmul_int4.h's packing), each minus `zero`, in [-15, 15].
INFERLAB_HD void unpack_codes8(std::uint32_t word, int zero, int* out) {
  for (int k = 0; k < 8; ++k) out[k] = static_cast<int>((word >> (4 * k)) & 0xFu) - zero;
}

// Four signed bytes packed little-endian into a word (an s8 mma register or a __dp4a operand).
INFERLAB_HD std::uint32_t pack_s8x4(int a, int b, int c, int d) {
  return (static_cast<std::uint32_t>(a) & 0xFFu) | ((static_cast<std::uint32_t>(b) & 0xFFu) << 8) |
         ((static_cast<std::uint32_t>(c) & 0xFFu) << 16) | ((static_cast<std::uint32_t>(d) & 0xFFu) << 24);
}

// The bf16 bits of x rounded to nearest even (exact when x fits in 8 significant bits, as every
// int4 code minus its zero point does), and the split of an fp32 activation into hi = bf16(x) and
// lo = bf16(x - hi): hi + lo carries 16 significant bits of x (lo is 0 when hi is not finite).
INFERLAB_HD std::uint16_t bf16_bits_rne(float x) {
  std::uint32_t u = 0;
  __builtin_memcpy(&u, &x, sizeof(u));
  if ((u & 0x7F800000u) == 0x7F800000u)  // inf stays inf, NaN stays a (quiet) NaN
    return static_cast<std::uint16_t>((u >> 16) | ((u & 0x7FFFFFu) != 0 ? 0x40u : 0u));
  u += 0x7FFFu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}
INFERLAB_HD float bf16_bits_to_float(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float x = 0;
  __builtin_memcpy(&x, &u, sizeof(x));
  return x;
}
INFERLAB_HD void split_bf16(float x, std::uint16_t& hi, std::uint16_t& lo) {
  hi = bf16_bits_rne(x);
  lo = (hi & 0x7F80u) == 0x7F80u ? std::uint16_t{0} : bf16_bits_rne(x - bf16_bits_to_float(hi));
}

}  // namespace inferlab::cuda::mma
