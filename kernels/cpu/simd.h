// Small AVX2 (and AVX-512) helpers shared by the CPU kernels (defined only where AVX2 and FMA are enabled).
#pragma once

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

namespace inferlab::cpu {

// The sum of the 8 floats of v.
inline float hsum(__m256 v) {
  __m128 lo = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
  lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
  return _mm_cvtss_f32(lo);
}

#if defined(__AVX512F__)
// The sum of the 16 floats of v: the upper 8 lanes folded onto the lower, then hsum above. The
// zero-mask forms because GCC 12's unmasked shuffle/extract/reduce intrinsics trip
// -Werror=uninitialized (their pass-through operand is undefined).
inline float hsum(__m512 v) {
  const __m512 folded = _mm512_add_ps(v, _mm512_maskz_shuffle_f32x4(0xFFFF, v, v, 0xEE));
  return hsum(_mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xF, _mm512_castps_pd(folded), 0)));
}
#endif

}  // namespace inferlab::cpu
#endif
