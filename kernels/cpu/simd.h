// Small AVX2 (and AVX-512) helpers shared by the CPU kernels, and the fp32 vector types the
// kernels are written in: Vec512 (AVX-512F, 16 floats), Vec256 (AVX2+FMA, 8 floats), each
// defined only where its instructions are enabled, and VecScalar (1 float) everywhere. One
// struct per instruction set, each the same vocabulary, so a kernel is written once as a
// template over the vector type (dot_tile.h, gemm_panels_impl.h).
#pragma once

#include <cstdint>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

namespace inferlab::cpu {

// Holds v in a register at this point, so GCC keeps a chain of integer adds as a chain rather than
// reassociating a block's products into one tree whose leaves it spills (gemm_gguf_avx2.cpp).
inline void pin(__m256i& v) { asm("" : "+x"(v)); }

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

// 8 fp32 lanes (ymm); load(const int8_t*) widens 8 int8 weights exactly.
struct Vec256 {
  using V = __m256;
  static constexpr int kWidth = 8;
  static V zero() { return _mm256_setzero_ps(); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static V load(const std::int8_t* p) {
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
  }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V broadcast(float x) { return _mm256_set1_ps(x); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
  static float sum(V v) { return hsum(v); }
};

#if defined(__AVX512F__)
// 16 fp32 lanes (zmm); load(const int8_t*) widens 16 int8 weights exactly (the all-lanes
// zero-mask forms: GCC 12's unmasked conversions trip -Werror=maybe-uninitialized).
struct Vec512 {
  using V = __m512;
  static constexpr int kWidth = 16;
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static V load(const std::int8_t* p) {
    constexpr __mmask16 kAll = 0xFFFF;
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    return _mm512_maskz_cvtepi32_ps(kAll, _mm512_maskz_cvtepi8_epi32(kAll, b));
  }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V broadcast(float x) { return _mm512_set1_ps(x); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
  static float sum(V v) { return hsum(v); }
};
#endif

}  // namespace inferlab::cpu
#endif

namespace inferlab::cpu {

// One fp32 lane: the portable fallback (a kernel over it may skip its vector loop, kWidth 1,
// and leave the whole range to an `omp simd` loop).
struct VecScalar {
  using V = float;
  static constexpr int kWidth = 1;
  static V zero() { return 0.0f; }
  static V load(const float* p) { return *p; }
  static V load(const std::int8_t* p) { return static_cast<float>(*p); }
  static void store(float* p, V v) { *p = v; }
  static V broadcast(float x) { return x; }
  static V fmadd(V a, V b, V c) { return a * b + c; }
  static V add(V a, V b) { return a + b; }
  static float sum(V v) { return v; }
};

}  // namespace inferlab::cpu
