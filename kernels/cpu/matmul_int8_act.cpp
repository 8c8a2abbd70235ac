// int8 x int8 matmul with per-block activation scales (see matmul_int8_act.h): the portable row
// kernel (a plain integer loop per 32-block, threads over output channels), and the activation
// quantisation every int8-activation kernel shares (vectorised rounding on AVX2 / AVX-512).
#include "kernels/cpu/matmul_int8_act.h"
#include "kernels/cpu/dot_tile.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "kernels/ref/matmul_int8.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define INFERLAB_INT8_ACT_AVX2 1
#endif

namespace inferlab::cpu {
namespace {

using ref::kActBlock;

// One block's integer dot product (the last block may be short).
inline int dot_scalar(const std::int8_t* x, const std::int8_t* w, int len) {
  int acc = 0;
#pragma omp simd reduction(+ : acc)
  for (int i = 0; i < len; ++i) acc += static_cast<int>(x[i]) * static_cast<int>(w[i]);
  return acc;
}

template <int R, int C>
inline void tile(const std::int8_t* xq, const float* xs, std::size_t xqs, std::size_t xss, const std::int8_t* q,
                 const float* scale, float* y, std::size_t ys, int in) {
  const std::size_t qs = static_cast<std::size_t>(in);
  float acc[R][C] = {};
  const int blocks = ref::act_blocks(in);
  for (int b = 0; b < blocks; ++b) {
    const int k = b * kActBlock, len = std::min(kActBlock, in - k);
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c)
        acc[r][c] += xs[r * xss + static_cast<std::size_t>(b)] *
                     static_cast<float>(dot_scalar(xq + r * xqs + k, q + c * qs + k, len));
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) y[r * ys + c] = acc[r][c] * scale[c];
}

template <int C>
void run_channels(const std::int8_t* xq, const float* xs, const std::int8_t* q, const float* scale, float* y, int n,
                  int out, int in, int o0, int o1) {
  const std::size_t xqs = static_cast<std::size_t>(in), xss = static_cast<std::size_t>(ref::act_blocks(in)),
                    ys = static_cast<std::size_t>(out);
  int o = o0;
  for (; o + C <= o1; o += C) {
    const std::int8_t* qb = q + static_cast<std::size_t>(o) * in;
    int r = 0;
    for (; r + 4 <= n; r += 4) tile<4, C>(xq + r * xqs, xs + r * xss, xqs, xss, qb, scale + o, y + r * ys + o, ys, in);
    for (; r < n; ++r) tile<1, C>(xq + r * xqs, xs + r * xss, xqs, xss, qb, scale + o, y + r * ys + o, ys, in);
  }
  for (; o < o1; ++o)
    for (int r = 0; r < n; ++r)
      tile<1, 1>(xq + r * xqs, xs + r * xss, xqs, xss, q + static_cast<std::size_t>(o) * in, scale + o,
                 y + r * ys + o, ys, in);
}

#if defined(__AVX512F__)
// q[0..16) = clamp(lround(x[i] * inv), -127, 127) for 16 values, bit for bit as the scalar loop
// below: |v| = trunc + frac exactly (frac < 1 is representable), so rounding up when frac >= 0.5
// is ties-away; NaN converts to INT_MIN and clamps to -127 as lround's LONG_MIN does.
inline void round_clamp16(const float* x, float inv, std::int8_t* q) {
  // The all-lanes zero-mask forms: GCC 12's plain ones trip -Werror=maybe-uninitialized.
  constexpr __mmask16 kAll = 0xFFFF;
  const __m512 v = _mm512_mul_ps(_mm512_loadu_ps(x), _mm512_set1_ps(inv));
  const __m512 a = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(v), _mm512_set1_epi32(0x7FFFFFFF)));
  __m512 t = _mm512_maskz_roundscale_ps(kAll, a, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __mmask16 up = _mm512_cmp_ps_mask(_mm512_sub_ps(a, t), _mm512_set1_ps(0.5f), _CMP_GE_OQ);
  t = _mm512_mask_add_ps(t, up, t, _mm512_set1_ps(1.0f));
  const __mmask16 neg = _mm512_cmp_ps_mask(v, _mm512_setzero_ps(), _CMP_LT_OQ);
  t = _mm512_mask_sub_ps(t, neg, _mm512_setzero_ps(), t);
  __m512i i = _mm512_maskz_cvttps_epi32(kAll, t);
  i = _mm512_maskz_min_epi32(kAll, _mm512_maskz_max_epi32(kAll, i, _mm512_set1_epi32(-127)), _mm512_set1_epi32(127));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(q), _mm512_maskz_cvtepi32_epi8(kAll, i));
}
#elif INFERLAB_INT8_ACT_AVX2
// The same for 8 values on AVX2 (blends for the masks; the clamped int32s pack exactly through
// the saturating packs). Scalar lround here had been 9 % of SmolLM2's pp512 on Zen 3.
inline void round_clamp8(const float* x, float inv, std::int8_t* q) {
  const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x), _mm256_set1_ps(inv));
  const __m256 a = _mm256_and_ps(v, _mm256_castsi256_ps(_mm256_set1_epi32(0x7FFFFFFF)));
  __m256 t = _mm256_round_ps(a, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
  const __m256 up = _mm256_cmp_ps(_mm256_sub_ps(a, t), _mm256_set1_ps(0.5f), _CMP_GE_OQ);
  t = _mm256_add_ps(t, _mm256_and_ps(up, _mm256_set1_ps(1.0f)));
  const __m256 neg = _mm256_cmp_ps(v, _mm256_setzero_ps(), _CMP_LT_OQ);
  t = _mm256_blendv_ps(t, _mm256_sub_ps(_mm256_setzero_ps(), t), neg);
  __m256i i = _mm256_cvttps_epi32(t);
  i = _mm256_min_epi32(_mm256_max_epi32(i, _mm256_set1_epi32(-127)), _mm256_set1_epi32(127));
  const __m128i w16 = _mm_packs_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
  _mm_storel_epi64(reinterpret_cast<__m128i*>(q), _mm_packs_epi16(w16, w16));
}
#endif

}  // namespace

void quantize_act_row(const float* xr, int in, std::int8_t* qr, float* xs, int block) {
  const int blocks = (in + block - 1) / block;
  for (int b = 0; b < blocks; ++b) {
    const int i0 = b * block, i1 = std::min(in, i0 + block);
    float amax = 0.0f;
#pragma omp simd reduction(max : amax)
    for (int i = i0; i < i1; ++i) amax = std::max(amax, std::fabs(xr[i]));
    const float s = amax / 127.0f;
    xs[b] = s;
    const float inv = s > 0.0f ? 1.0f / s : 0.0f;
    int i = i0;
#if defined(__AVX512F__)
    for (; i + 16 <= i1; i += 16) round_clamp16(xr + i, inv, qr + i);
#elif INFERLAB_INT8_ACT_AVX2
    for (; i + 8 <= i1; i += 8) round_clamp8(xr + i, inv, qr + i);
#endif
    for (; i < i1; ++i)  // nearest, ties away from zero: as std::lround in the reference
      qr[i] = static_cast<std::int8_t>(std::clamp(std::lround(xr[i] * inv), -127L, 127L));
  }
}

void quantize_act_rows(const float* x, int n, int in, std::int8_t* xq, float* xs, ThreadPool& pool, int block) {
  const std::size_t blocks = static_cast<std::size_t>((in + block - 1) / block), w = static_cast<std::size_t>(in);
  pool.parallel_for(static_cast<std::size_t>(n), [&](std::size_t begin, std::size_t end) {
    for (std::size_t r = begin; r < end; ++r) quantize_act_row(x + r * w, in, xq + r * w, xs + r * blocks, block);
  }, std::max<std::size_t>(1, 4096 / static_cast<std::size_t>(std::max(in, 1))));
}

void matmul_int8_act(const std::int8_t* xq, const float* xs, const std::int8_t* q, const float* scale, float* y,
                     int n, int out, int in, ThreadPool& pool) {
  if (n <= 0 || out <= 0) return;
  parallel_for_channels(pool, n, out, in, [&](int o0, int o1) {
    if (n <= 2) run_channels<4>(xq, xs, q, scale, y, n, out, in, o0, o1);
    else run_channels<2>(xq, xs, q, scale, y, n, out, in, o0, o1);
  });
}

}  // namespace inferlab::cpu
