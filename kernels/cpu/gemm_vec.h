// The vector type the packed GEMMs (gemm_panels_*.h) are written in, chosen at compile time
// (-march=native, see CMakeLists.txt INFERLAB_NATIVE): AVX-512F (16 floats), AVX2+FMA (8
// floats) or a scalar fallback (1 float), each with the micro-kernel shape that fits its
// register file. The packed weight layout depends on the shape (kPanel columns per panel), so a
// PackedPanels built in one build is only read by kernels of the same build.
#pragma once

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

namespace inferlab::cpu::gemm {

#if defined(__AVX512F__)
// 32 zmm registers: 8 rows x 2 vectors = 16 accumulators, 2 weight vectors, broadcasts.
struct Vec {
  using V = __m512;
  static constexpr int kWidth = 16;
  static V zero() { return _mm512_setzero_ps(); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V v) { _mm512_storeu_ps(p, v); }
  static V broadcast(float x) { return _mm512_set1_ps(x); }
  static V fmadd(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm512_add_ps(a, b); }
};
inline constexpr int kRows = 8, kVectors = 2;
inline constexpr const char* kIsaName = "avx512";
#elif defined(__AVX2__) && defined(__FMA__)
// 16 ymm registers: 6 rows x 2 vectors = 12 accumulators, 2 weight vectors, 1 broadcast.
struct Vec {
  using V = __m256;
  static constexpr int kWidth = 8;
  static V zero() { return _mm256_setzero_ps(); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V v) { _mm256_storeu_ps(p, v); }
  static V broadcast(float x) { return _mm256_set1_ps(x); }
  static V fmadd(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
  static V add(V a, V b) { return _mm256_add_ps(a, b); }
};
inline constexpr int kRows = 6, kVectors = 2;
inline constexpr const char* kIsaName = "avx2";
#else
struct Vec {
  using V = float;
  static constexpr int kWidth = 1;
  static V zero() { return 0.0f; }
  static V load(const float* p) { return *p; }
  static void store(float* p, V v) { *p = v; }
  static V broadcast(float x) { return x; }
  static V fmadd(V a, V b, V c) { return a * b + c; }
  static V add(V a, V b) { return a + b; }
};
inline constexpr int kRows = 4, kVectors = 4;
inline constexpr const char* kIsaName = "scalar";
#endif

// Output channels per packed weight panel (the micro-kernel's column count).
inline constexpr int kPanel = Vec::kWidth * kVectors;

}  // namespace inferlab::cpu::gemm
