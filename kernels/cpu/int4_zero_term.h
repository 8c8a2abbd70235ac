// The zero-point term of int4 rows (format: kernels/ref/matmul_int4.h) once the codes' dot
// products are taken without it: for each token row r, sum over groups g of scale[g] * zero[g] *
// c[r][g], c[r][g] being the (scaled) sum of row r's activations in group g. Folded into the
// rows' vector accumulators, 16 groups at a time, before their one horizontal sum, each
// scale[g] * zero[g] formed once for all rows: the decode and few-row streams of matmul_int4
// (W4A16) and matmul_int4_act (W4A8) call it once per weight row, where a separate sum per row
// cost SmolLM2's 576-wide rows ~10 % of a 4-row pass. Internal to kernels/cpu.
#pragma once
#include <cstddef>
#include <cstdint>

#include "kernels/ref/matmul_int4.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#include <immintrin.h>

namespace inferlab::cpu {

// acc(r) (a __m512&, r < R) -= scale ⊙ zero ⊙ c[r] over `groups` groups; c[r] = c + r *
// c_stride. zero: [groups] codes, or null for the symmetric zero point (ref::kInt4SymmetricZero).
template <int R, class Acc>
inline void fold_int4_zero_points(const float* scale, const std::uint8_t* zero, const float* c, std::size_t c_stride,
                                  int groups, Acc&& acc) {
  for (int g0 = 0; g0 < groups; g0 += 16) {  // zero-mask forms throughout: GCC 12 (gemm_panels_int8.cpp)
    const __mmask16 k = groups - g0 >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << (groups - g0)) - 1);
    const __m512 z = zero ? _mm512_maskz_cvtepi32_ps(k, _mm512_maskz_cvtepu8_epi32(k, _mm_maskz_loadu_epi8(k, zero + g0)))
                          : _mm512_set1_ps(static_cast<float>(ref::kInt4SymmetricZero));
    const __m512 sz = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, scale + g0), z);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) acc(r) = _mm512_fnmadd_ps(sz, _mm512_maskz_loadu_ps(k, c + r * c_stride + g0), acc(r));
  }
}

}  // namespace inferlab::cpu
#endif
