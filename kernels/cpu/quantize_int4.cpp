// See quantize_int4.h.
#include "kernels/cpu/quantize_int4.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/ref/matmul_int4.h"

#if defined(__AVX2__)
#include <immintrin.h>
#endif

namespace inferlab::cpu {
namespace {

#if defined(__AVX2__)
// round(v) half away from zero, as exact floats: |v| = trunc + frac exactly, up when frac >= 0.5.
inline __m256 round_half_away(__m256 v) {
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  const __m256 a = _mm256_andnot_ps(sign_bit, v);
  __m256 t = _mm256_round_ps(a, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 up = _mm256_cmp_ps(_mm256_sub_ps(a, t), _mm256_set1_ps(0.5f), _CMP_GE_OQ);
  t = _mm256_add_ps(t, _mm256_and_ps(up, _mm256_set1_ps(1.0f)));
  return _mm256_or_ps(t, _mm256_and_ps(sign_bit, v));
}

// Lanes' min / max folded into the scalar running values in the reference's comparisons (its
// ranges start at +0, so a -0 never enters either way).
inline void fold_lanes(__m256 v, float& into, bool is_min) {
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, v);
  for (float x : lanes) into = is_min ? std::min(into, x) : std::max(into, x);
}
#endif

// Row o: its groups' codes into prow (zeroed), scales and zero points at scale_row / zero_row.
void quantize_row(const float* row, int in, int group_size, std::uint8_t* prow, float* scale_row,
                  std::uint8_t* zero_row) {
  const int groups = ref::int4_groups(in, group_size);
  std::memset(prow, 0, ref::int4_row_bytes(in));
  for (int g = 0; g < groups; ++g) {
    const int k0 = g * group_size, k1 = std::min(in, k0 + group_size);
    float lo = 0.0f, hi = 0.0f, amax = 0.0f;
    int i = k0;
    [[maybe_unused]] bool vector = false;  // AVX2 builds: the range came from the vector loop
#if defined(__AVX2__)
    if (k1 - k0 >= 8) {
      const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF));
      const __m256 inf = _mm256_set1_ps(INFINITY);
      __m256 vlo = _mm256_setzero_ps(), vhi = vlo, vam = vlo, bad = vlo;
      for (; i + 8 <= k1; i += 8) {
        const __m256 x = _mm256_loadu_ps(row + i), ax = _mm256_and_ps(x, abs_mask);
        vlo = _mm256_min_ps(x, vlo);  // x < lo ? x : lo, as std::min(lo, x)
        vhi = _mm256_max_ps(x, vhi);  // x > hi ? x : hi, as std::max(hi, x)
        vam = _mm256_max_ps(ax, vam);
        bad = _mm256_or_ps(bad, _mm256_cmp_ps(ax, inf, _CMP_NLT_UQ));  // NaN or infinity
      }
      vector = _mm256_movemask_ps(bad) == 0;
      if (vector) {
        fold_lanes(vlo, lo, true);
        fold_lanes(vhi, hi, false);
        fold_lanes(vam, amax, false);
      } else {
        i = k0;  // the reference's loop over the whole group
      }
    }
#endif
    for (int k = i; k < k1; ++k) {
      lo = std::min(lo, row[k]);
      hi = std::max(hi, row[k]);
      amax = std::max(amax, std::fabs(row[k]));
    }
    const ref::Int4GroupGrid grid = ref::int4_group_grid(lo, hi, amax, zero_row != nullptr);
    scale_row[g] = grid.scale;
    if (zero_row) zero_row[g] = static_cast<std::uint8_t>(grid.zero);
    i = k0;
#if defined(__AVX2__)
    // Finite weights on a finite positive scale give |w / scale| <= about 30 (lo <= w <= hi and
    // the scale is (hi - lo) / 15 or max |w| / 7, subnormal rounding included): the clamp to
    // +-64 before the conversion changes no code.
    if (vector && grid.scale > 0.0f && std::isfinite(grid.scale)) {
      const __m256 s = _mm256_set1_ps(grid.scale), lim = _mm256_set1_ps(64.0f);
      const __m256i z = _mm256_set1_epi32(static_cast<int>(grid.zero)), top = _mm256_set1_epi32(15);
      alignas(32) std::int32_t codes[8];
      for (; i + 8 <= k1; i += 8) {
        __m256 v = round_half_away(_mm256_div_ps(_mm256_loadu_ps(row + i), s));
        v = _mm256_min_ps(_mm256_max_ps(v, _mm256_sub_ps(_mm256_setzero_ps(), lim)), lim);
        const __m256i u = _mm256_min_epi32(_mm256_max_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(v), z),
                                                            _mm256_setzero_si256()), top);
        _mm256_store_si256(reinterpret_cast<__m256i*>(codes), u);
        for (int j = 0; j < 8; ++j)
          prow[(i + j) / 2] = static_cast<std::uint8_t>(prow[(i + j) / 2] | (codes[j] << (((i + j) & 1) * 4)));
      }
    }
#endif
    for (; i < k1; ++i)
      prow[i / 2] = static_cast<std::uint8_t>(prow[i / 2] | (ref::int4_code(row[i], grid) << ((i & 1) * 4)));
  }
}

}  // namespace

void quantize_int4_groups(const float* w, int out, int in, int group_size, std::uint8_t* packed, float* scale,
                          std::uint8_t* zero, ThreadPool& pool) {
  const int groups = ref::int4_groups(in, group_size);
  const std::size_t rb = ref::int4_row_bytes(in);
  pool.parallel_for(static_cast<std::size_t>(std::max(out, 0)), [&](std::size_t o0, std::size_t o1) {
    for (std::size_t o = o0; o < o1; ++o)
      quantize_row(w + o * static_cast<std::size_t>(in), in, group_size, packed + o * rb,
                   scale + o * static_cast<std::size_t>(groups), zero ? zero + o * static_cast<std::size_t>(groups) : nullptr);
  }, std::max<std::size_t>(1, 16384 / static_cast<std::size_t>(std::max(in, 1))));
}

}  // namespace inferlab::cpu
