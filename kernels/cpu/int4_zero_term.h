// The zero-point term of an int4 row (format: kernels/ref/matmul_int4.h) once the codes' dot
// products are taken without it: sum over groups g of scale[g] * zero[g] * c[g], c[g] being the
// (scaled) sum of the activations of group g. Inline, masked AVX-512 (no scalar tail): the decode
// paths of matmul_int4 and matmul_int4_act call it once per weight row and token row, where its
// cost sits beside a row of only 18-48 blocks. Internal to kernels/cpu.
#pragma once
#include <cstdint>

#include "kernels/ref/matmul_int4.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#include <immintrin.h>

#include "kernels/cpu/simd.h"
#endif

namespace inferlab::cpu {

// zero: [groups] codes, or null for the symmetric zero point (ref::kInt4SymmetricZero).
inline float int4_zero_term(const float* scale, const std::uint8_t* zero, const float* c, int groups) {
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
  __m512 acc = _mm512_setzero_ps();
  for (int g = 0; g < groups; g += 16) {  // zero-mask forms throughout: GCC 12 (gemm_panels_int8.cpp)
    const __mmask16 m = groups - g >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << (groups - g)) - 1);
    const __m512 z = zero ? _mm512_maskz_cvtepi32_ps(m, _mm512_maskz_cvtepu8_epi32(m, _mm_maskz_loadu_epi8(m, zero + g)))
                          : _mm512_set1_ps(static_cast<float>(ref::kInt4SymmetricZero));
    acc = _mm512_fmadd_ps(_mm512_mul_ps(_mm512_maskz_loadu_ps(m, scale + g), z), _mm512_maskz_loadu_ps(m, c + g), acc);
  }
  return hsum(acc);
#else
  float t = 0.0f;
  for (int g = 0; g < groups; ++g) t += scale[g] * static_cast<float>(zero ? zero[g] : ref::kInt4SymmetricZero) * c[g];
  return t;
#endif
}

}  // namespace inferlab::cpu
