// Small AVX2 helpers shared by the CPU kernels (defined only where AVX2 and FMA are enabled).
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

}  // namespace inferlab::cpu
#endif
