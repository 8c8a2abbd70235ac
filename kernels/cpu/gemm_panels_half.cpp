// Packed half-precision-weight GEMM: see gemm_panels_half.h; the algorithm is
// gemm_panels_impl.h's, with loads that widen 16-bit weights to fp32.
#include "kernels/cpu/gemm_panels_half.h"

#include <string>

#include "inferlab/error.h"
#include "kernels/cpu/gemm_panels_impl.h"
#include "kernels/ref/half.h"

namespace inferlab::cpu {
namespace {

using gemm::Vec;

// Vec::kWidth weights at p widened to one fp32 vector.
struct LoadF16 {
  using Storage = std::uint16_t;
  static Vec::V load(const std::uint16_t* p) {
#if defined(__AVX512F__)
    // The all-lanes zero-mask forms here and below: GCC 12's unmasked intrinsics trip
    // -Werror=maybe-uninitialized (their pass-through operand is _mm512_undefined_*).
    return _mm512_maskz_cvtph_ps(0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
#elif defined(__AVX2__) && defined(__FMA__)
    alignas(32) float f[Vec::kWidth];
    for (int i = 0; i < Vec::kWidth; ++i) f[i] = ref::f16_to_float(p[i]);
    return Vec::load(f);
#else
    return ref::f16_to_float(*p);
#endif
  }
};

struct LoadBF16 {
  using Storage = std::uint16_t;
  static Vec::V load(const std::uint16_t* p) {
#if defined(__AVX512F__)
    const __m512i wide = _mm512_maskz_cvtepu16_epi32(0xffff, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xffff, wide, 16));
#elif defined(__AVX2__) && defined(__FMA__)
    const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
#else
    return ref::bf16_to_float(*p);
#endif
  }
};

}  // namespace

PackedPanelsHalf pack_panels_half(const std::uint16_t* w, int out, int in, HalfFormat format) {
  check(out > 0 && in > 0, [&] {
    return "pack_panels_half: out and in must be positive, got out=" + std::to_string(out) + " in=" + std::to_string(in);
  });
  PackedPanelsHalf packed;
  packed.out = out;
  packed.in = in;
  packed.format = format;
  packed.data.resize(static_cast<std::size_t>(out) * in);
  gemm::pack_panels(w, out, in, packed.data.data());
  return packed;
}

void unpack_panel_row_half(const PackedPanelsHalf& w, int row, float* out) {
  check(row >= 0 && row < w.out, [&] {
    return "unpack_panel_row_half: row " + std::to_string(row) + " outside [0, " + std::to_string(w.out) + ")";
  });
  if (w.format == HalfFormat::kF16) gemm::unpack_panel_row(w.data.data(), w.out, w.in, row, out, ref::f16_to_float);
  else gemm::unpack_panel_row(w.data.data(), w.out, w.in, row, out, ref::bf16_to_float);
}

void gemm_panels_half(const float* x, const PackedPanelsHalf& w, float* y, int n, ThreadPool& pool) {
  if (w.format == HalfFormat::kF16) gemm::gemm_panels<LoadF16>(x, w.data.data(), w.out, w.in, y, n, pool);
  else gemm::gemm_panels<LoadBF16>(x, w.data.data(), w.out, w.in, y, n, pool);
}

}  // namespace inferlab::cpu
