// The KV rows' dequantisation as inline functions: kv_dequantize_row's definition for int8, int4,
// f16 and bf16 rows (base/src/paged_kv.cpp calls them), and what KvLayerView::k_row / v_row run
// (inferlab/paged_kv.h includes this header), so an attention kernel's tile loop widens a stored
// row to floats without a call.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "inferlab/ggml_types.h"

#if defined(__AVX2__) && !defined(__CUDACC__)
#include <immintrin.h>
#endif

namespace inferlab {

// The int8 and int4 rows of kv_dequantize_row (inferlab/paged_kv.h; it calls these), inline for
// the CPU attention kernels' tile loops (through KvLayerView::k_row / v_row), once per position
// and side: 8 values at a time on
// AVX2 with the scalar rule's bits (int8 s · q; int4 lo + s · q in one rounding where the build has
// FMA), the scalar loop for the values past a group's last multiple of 8. A rolled scalar row had
// cost int8 (groups of 16) 17 ns, int4 44 ns a row of 64, and the calls around it 4-5 ns more
// (Zen 3, 2026-12-07): more than the attention arithmetic each row feeds.
inline void kv_dequantize_int8_row(const signed char* q, const float* scales, int g, int d, float* out) {
  for (int g0 = 0, gi = 0; g0 < d; g0 += g, ++gi) {
    const float s = scales[gi];
    int c = g0;
#if defined(__AVX2__) && !defined(__CUDACC__)
    const __m256 sv = _mm256_set1_ps(s);
    for (; c + 8 <= g0 + g; c += 8) {
      const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(q + c));
      _mm256_storeu_ps(out + c, _mm256_mul_ps(sv, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b))));
    }
#endif
    for (; c < g0 + g; ++c) out[c] = s * static_cast<float>(q[c]);
  }
}
inline void kv_dequantize_int4_row(const unsigned char* q, const float* params, int g, int d, float* out) {
  for (int g0 = 0, gi = 0; g0 < d; g0 += g, ++gi) {
    const float s = params[2 * gi], lo = params[2 * gi + 1];
    int c = g0;
#if defined(__AVX2__) && defined(__FMA__) && !defined(__CUDACC__)
    const __m256 sv = _mm256_set1_ps(s), lov = _mm256_set1_ps(lo);
    const __m128i nibble = _mm_set1_epi8(0x0F);
    for (; c + 8 <= g0 + g; c += 8) {
      std::uint32_t word;
      std::memcpy(&word, q + c / 2, sizeof word);
      const __m128i b = _mm_cvtsi32_si128(static_cast<int>(word));
      // bytes [b0 & 15, b0 >> 4, b1 & 15, b1 >> 4, ...]: element c in the low nibble of byte c / 2
      const __m128i u = _mm_unpacklo_epi8(_mm_and_si128(b, nibble), _mm_and_si128(_mm_srli_epi16(b, 4), nibble));
      _mm256_storeu_ps(out + c, _mm256_fmadd_ps(sv, _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(u)), lov));
    }
#endif
    for (; c < g0 + g; c += 2) {
      const unsigned char b = q[c / 2];
#if defined(__FMA__)  // one rounding, as the vector loop's (and as GCC contracts lo + s * q)
      out[c] = std::fma(s, static_cast<float>(b & 0x0F), lo);
      out[c + 1] = std::fma(s, static_cast<float>(b >> 4), lo);
#else
      out[c] = lo + s * static_cast<float>(b & 0x0F);
      out[c + 1] = lo + s * static_cast<float>(b >> 4);
#endif
    }
  }
}

// f16 / bf16 rows: 8 values at a time on AVX2 with F16C (the widening is exact: the scalar
// conversions' bits), the rest through fp16_to_fp32 / bf16_to_fp32. Through kv_dequantize_row's
// call from KvLayerView::row a row of 64 cost 8.7 ns, inline 6.5 (Zen 3, 2026-12-07).
inline void kv_dequantize_half_row(const std::uint16_t* h, bool f16, int d, float* out) {
  int c = 0;
#if defined(__AVX2__) && defined(__F16C__) && !defined(__CUDACC__)
  for (; c + 8 <= d; c += 8) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(h + c));
    _mm256_storeu_ps(out + c, f16 ? _mm256_cvtph_ps(v) : _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(v), 16)));
  }
#endif
  for (; c < d; ++c) out[c] = f16 ? fp16_to_fp32(h[c]) : bf16_to_fp32(h[c]);
}

}  // namespace inferlab
