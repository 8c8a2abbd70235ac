// W8A16 panels: see gemm_panels_w8.h; the algorithm is gemm_panels_impl.h's, with loads that
// widen int8 codes to fp32.
#include "kernels/cpu/gemm_panels_w8.h"

#include <string>

#include "inferlab/error.h"
#include "kernels/cpu/gemm_panels_impl.h"

namespace inferlab::cpu {
namespace {

using gemm::Vec;

// Vec::kWidth codes at p widened to one fp32 vector (exact: |code| <= 127).
struct LoadInt8 {
  using Storage = std::int8_t;
  static Vec::V load(const std::int8_t* p) {
#if defined(__AVX512F__)
    // The all-lanes zero-mask forms: GCC 12's unmasked intrinsics trip -Werror=maybe-uninitialized.
    return _mm512_maskz_cvtepi32_ps(
        0xffff, _mm512_maskz_cvtepi8_epi32(0xffff, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
#elif defined(__AVX2__) && defined(__FMA__)
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
#else
    return static_cast<float>(*p);
#endif
  }
};

// y[r, o] *= scale[o] over n rows.
void apply_scales(const PackedPanelsW8& w, float* y, int n) {
  const float* s = w.scale.data();
  for (int r = 0; r < n; ++r) {
    float* yr = y + static_cast<std::size_t>(r) * w.out;
#pragma omp simd
    for (int o = 0; o < w.out; ++o) yr[o] *= s[o];
  }
}

}  // namespace

PackedPanelsW8 pack_panels_w8(const std::int8_t* q, const float* scale, int out, int in) {
  check(out > 0 && in > 0, [&] {
    return "pack_panels_w8: out and in must be positive, got out=" + std::to_string(out) + " in=" + std::to_string(in);
  });
  PackedPanelsW8 packed;
  packed.out = out;
  packed.in = in;
  packed.data.resize(static_cast<std::size_t>(out) * in);
  gemm::pack_panels(q, out, in, packed.data.data());
  packed.scale.assign(scale, scale + out);
  return packed;
}

void gemm_panels_w8(const float* x, const PackedPanelsW8& w, float* y, int n, ThreadPool& pool) {
  if (n <= 0) return;
  gemm::gemm_panels<LoadInt8>(x, w.data.data(), w.out, w.in, y, n, pool);
  apply_scales(w, y, n);
}

void gemm_panels_w8_group(const float* x, std::span<const GemmPanelsW8Output> group, int n, ThreadPool& pool) {
  if (n <= 0) return;
  gemm::gemm_panels_outputs<LoadInt8>("gemm_panels_w8_group", x, group, n, pool);
  for (const GemmPanelsW8Output& m : group) apply_scales(*m.w, m.y, n);
}

}  // namespace inferlab::cpu
