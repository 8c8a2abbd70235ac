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

// Three terms hi + mid + lo of 32 floats (v0: the first 16), as three 64-byte tile rows: exactly
// v for every finite v away from the bottom of the exponent range. hi = bf16(v) rounded to nearest,
// so the residual r = v - hi (exact) is at most 2^-8 |v| and 16 significant bits; mid and lo are
// r's upper and lower 8 by truncation (a mask, a subtraction), and one word shuffle packs each of
// them from two vectors' upper halves. mid and lo are 0 where hi is ±inf.
inline void split_bf16_3x32(__m512 v0, __m512 v1, __m256i (&hi)[2], __m512i& mid, __m512i& lo) {
  const __m512i top = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  __m512i m[2], l[2];
  const __m512 v[2] = {v0, v1};
  for (int i = 0; i < 2; ++i) {
    hi[i] = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v[i]));
    const __m512 r = bf16_residual(v[i], bf16_to_ps(hi[i]));
    m[i] = _mm512_and_si512(_mm512_castps_si512(r), top);
    l[i] = _mm512_castps_si512(_mm512_sub_ps(r, _mm512_castsi512_ps(m[i])));
  }
  // word 2j + 1 of (a, b): the upper halves of a's 16 lanes, then b's
  const __m512i odd = _mm512_set_epi16(63, 61, 59, 57, 55, 53, 51, 49, 47, 45, 43, 41, 39, 37, 35, 33, 31, 29, 27, 25,
                                       23, 21, 19, 17, 15, 13, 11, 9, 7, 5, 3, 1);
  mid = _mm512_permutex2var_epi16(m[0], odd, m[1]);
  lo = _mm512_permutex2var_epi16(l[0], odd, l[1]);
}

}  // namespace inferlab::cpu
#endif
