// Half-precision-weight matmul: see matmul_half.h.
#include "kernels/cpu/matmul_half.h"

#include <algorithm>
#include <cstddef>
#include <vector>

#include "kernels/cpu/simd.h"
#include "kernels/ref/half.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>
#define INFERLAB_HALF_AVX2 1
#endif

namespace inferlab::cpu {
namespace {

// dst[0..in) = w[0..in) widened to fp32.
void widen(const std::uint16_t* w, float* dst, int in, HalfFormat format) {
  int k = 0;
#if INFERLAB_HALF_AVX2
  for (; k + 8 <= in; k += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(w + k));
    const __m256 f = format == HalfFormat::kF16
                         ? _mm256_cvtph_ps(h)
                         : _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    _mm256_storeu_ps(dst + k, f);
  }
#endif
  for (; k < in; ++k) dst[k] = format == HalfFormat::kF16 ? ref::f16_to_float(w[k]) : ref::bf16_to_float(w[k]);
}

float dot(const float* a, const float* b, int in) {
  int k = 0;
  float s = 0.0f;
#if INFERLAB_HALF_AVX2
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  for (; k + 16 <= in; k += 16) {
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k), _mm256_loadu_ps(b + k), acc0);
    acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + k + 8), _mm256_loadu_ps(b + k + 8), acc1);
  }
  s = hsum(_mm256_add_ps(acc0, acc1));
#endif
  float t = 0.0f;
#pragma omp simd reduction(+ : t)
  for (int kk = k; kk < in; ++kk) t += a[kk] * b[kk];
  return s + t;
}

}  // namespace

void matmul_half(const float* x, const std::uint16_t* w, float* y, int n, int out, int in, HalfFormat format,
                 ThreadPool& pool) {
  if (n <= 0 || out <= 0) return;
  const std::size_t sin = static_cast<std::size_t>(in), sout = static_cast<std::size_t>(out);
  pool.parallel_for(sout, [&](std::size_t begin, std::size_t end) {
    std::vector<float> row(sin);  // one weight row, widened
    for (std::size_t c = begin; c < end; ++c) {
      widen(w + c * sin, row.data(), in, format);
      for (int r = 0; r < n; ++r) y[static_cast<std::size_t>(r) * sout + c] = dot(x + r * sin, row.data(), in);
    }
  }, std::max<std::size_t>(1, 16384 / std::max<std::size_t>(1, sin)));
}

}  // namespace inferlab::cpu
