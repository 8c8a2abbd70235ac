// fp32 values as one or two bfloat16 terms, the operands of the AMX bf16 tiles (`tdpbf16ps`):
// hi = bf16(v) (round to nearest even) and lo = bf16(v - hi), so hi + lo holds v to about 16
// significant bits. lo is 0 where hi is ±inf, so that an infinite v stays infinite rather than
// becoming inf - inf = NaN. Shared by gemm_amx_bf16.cpp, gemm_amx_dequant.cpp and
// matmul_int8_amx.cpp. Internal to kernels/cpu.
#pragma once
#include "kernels/cpu/amx.h"

#if INFERLAB_AMX_BF16
#include <immintrin.h>

namespace inferlab::cpu {

// The 16 fp32 lanes of bf16 values (a shift: exact).
inline __m512 bf16_to_ps(__m256i h) {
  return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, _mm512_maskz_cvtepu16_epi32(0xFFFF, h), 16));
}

// v - bf16 value h, 0 in the lanes where h is ±inf.
inline __m512 bf16_residual(__m512 v, __m512 h) {
  const __mmask16 inf = _mm512_fpclass_ps_mask(h, 0x18);
  return _mm512_maskz_sub_ps(static_cast<__mmask16>(~inf), v, h);
}

// hi and lo terms of 16 floats.
inline void split_bf16(__m512 v, __m256i& hi, __m256i& lo) {
  hi = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v));
  lo = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(bf16_residual(v, bf16_to_ps(hi))));
}

// Three terms hi + mid + lo of 16 floats: exactly v for every finite v away from the bottom of
// the exponent range (24 significant bits; each rounding to bf16's 8 leaves at most 16, then 8).
inline void split_bf16_3(__m512 v, __m256i& hi, __m256i& mid, __m256i& lo) {
  __m512 r;
  hi = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v));
  r = bf16_residual(v, bf16_to_ps(hi));
  mid = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(r));
  lo = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(_mm512_sub_ps(r, bf16_to_ps(mid))));
}

}  // namespace inferlab::cpu
#endif
