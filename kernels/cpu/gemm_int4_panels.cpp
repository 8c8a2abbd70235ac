// The int4 group panels (see gemm_int4_panels.h): the layout (packing, a row back), the public
// calls and the activations' zero-point sums; the passes are in gemm_int4_panels_vnni.cpp (AVX-512
// VNNI, AMX prefill) and gemm_int4_panels_avx2.cpp (AVX2), their shared pieces in
// gemm_int4_panels_impl.h.
#include "kernels/cpu/gemm_int4_panels.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

#include "inferlab/error.h"
#include "kernels/cpu/amx.h"
#include "kernels/cpu/gemm_int4_panels_impl.h"
#include "kernels/ref/matmul_int4.h"

namespace inferlab::cpu {
namespace {

using namespace int4_panels;

inline int code_at(const std::uint8_t* row, int i) {
  const std::uint8_t byte = row[i / 2];
  return (i % 2 == 0) ? (byte & 0x0F) : (byte >> 4);
}

inline std::size_t code_offset(int blocks, int p, int b, int j, int l, int t) {
  return ((static_cast<std::size_t>(p) * blocks + b) * kVectors + j) * (P * 4) + static_cast<std::size_t>(l) * 4 + t;
}

#if INFERLAB_INT4_PANELS
// Acts for xq [n, in], xs [n, in / 32] against w: the zero-point sums zc formed here, in the
// calling thread's buffer (the workers reach it through the pointer).
template <class T>
Acts<T> make_acts(const T* xq, const float* xs, const Int4Panels& w, int n) {
  const int in = w.in, blocks = in / kActBlock, per = w.group_size / kActBlock;
  thread_local std::vector<float> zc_buffer;
  zc_buffer.assign(static_cast<std::size_t>(n) * w.groups, 0.0f);
  float* const zc = zc_buffer.data();
  for (int r = 0; r < n; ++r)
    for (int b = 0; b < blocks; ++b) {
      const T* xb = xq + static_cast<std::size_t>(r) * in + static_cast<std::size_t>(b) * kActBlock;
      int s = 0;
      for (int i = 0; i < kActBlock; ++i) s += xb[i];
      zc[static_cast<std::size_t>(r) * w.groups + b / per] += xs[static_cast<std::size_t>(r) * blocks + b] * static_cast<float>(s);
    }
  return {xq, xs, zc, in, blocks, w.groups, per};
}
#endif

}  // namespace

bool int4_panels_available(int in, int group_size) {
#if INFERLAB_INT4_PANELS
  return in > 0 && in % kActBlock == 0 && group_size > 0 && group_size % kActBlock == 0;
#else
  (void)in, (void)group_size;
  return false;
#endif
}

Int4Panels pack_int4_panels(const std::uint8_t* packed, const float* scale, const std::uint8_t* zero, int out, int in,
                            int group_size) {
  check(out > 0 && int4_panels_available(in, group_size),
        "pack_int4_panels: needs an AVX2 or AVX-512 VNNI build, in and group_size multiples of 32; got in " +
            std::to_string(in) + ", group_size " + std::to_string(group_size));
  Int4Panels w;
  w.out = out, w.in = in, w.group_size = group_size, w.groups = ref::int4_groups(in, group_size);
  w.panels = (out + P - 1) / P;
  const int blocks = in / kActBlock;
  const std::size_t row_bytes = ref::int4_row_bytes(in);
  w.codes.assign(static_cast<std::size_t>(w.panels) * blocks * kBlockBytes, 0);
  w.scale.assign(static_cast<std::size_t>(w.panels) * w.groups * P, 0.0f);
  if (zero) w.zero.assign(w.scale.size(), 0);
  for (int o = 0; o < out; ++o) {
    const int p = o / P, l = o % P;
    const std::uint8_t* row = packed + static_cast<std::size_t>(o) * row_bytes;
    for (int b = 0; b < blocks; ++b)
      for (int j = 0; j < kVectors; ++j)
        for (int t = 0; t < 4; ++t) {
          const int i = b * kActBlock + 8 * j + t;
          w.codes[code_offset(blocks, p, b, j, l, t)] =
              static_cast<std::uint8_t>(code_at(row, i) | (code_at(row, i + 4) << 4));
        }
    for (int g = 0; g < w.groups; ++g) {
      const std::size_t dst = (static_cast<std::size_t>(p) * w.groups + g) * P + l;
      const std::size_t src = static_cast<std::size_t>(o) * w.groups + g;
      w.scale[dst] = scale[src];
      if (zero) w.zero[dst] = zero[src];
    }
  }
  return w;
}

void unpack_int4_panels_row(const Int4Panels& w, int row, std::uint8_t* packed_row, float* scale_row,
                            std::uint8_t* zero_row) {
  check(row >= 0 && row < w.out, "unpack_int4_panels_row: row " + std::to_string(row) + " outside [0, " +
                                     std::to_string(w.out) + ")");
  const int p = row / P, l = row % P, blocks = w.in / kActBlock;
  std::memset(packed_row, 0, ref::int4_row_bytes(w.in));
  for (int b = 0; b < blocks; ++b)
    for (int j = 0; j < kVectors; ++j)
      for (int t = 0; t < 4; ++t) {
        const std::uint8_t byte = w.codes[code_offset(blocks, p, b, j, l, t)];
        for (int h = 0; h < 2; ++h) {
          const int i = b * kActBlock + 8 * j + 4 * h + t, code = h == 0 ? byte & 0x0F : byte >> 4;
          packed_row[i / 2] |= static_cast<std::uint8_t>(i % 2 == 0 ? code : code << 4);
        }
      }
  for (int g = 0; g < w.groups; ++g) {
    const std::size_t src = (static_cast<std::size_t>(p) * w.groups + g) * P + l;
    scale_row[g] = w.scale[src];
    if (!w.symmetric()) zero_row[g] = w.zero[src];
  }
}

std::uint64_t int4_panels_bytes(const Int4Panels& w) {
  const std::uint64_t cells = static_cast<std::uint64_t>(w.out) * w.groups;
  return static_cast<std::uint64_t>(w.out) * ref::int4_row_bytes(w.in) + cells * sizeof(float) +
         (w.symmetric() ? 0 : cells);
}

void gemm_int4_panels(const std::int8_t* xq, const float* xs, const Int4Panels& w, float* y, int n, ThreadPool& pool) {
  if (n <= 0 || w.out <= 0) return;
#if INFERLAB_INT4_PANELS
  const Acts<std::int8_t> a = make_acts(xq, xs, w, n);  // the zero point's term per row and group
#if INFERLAB_INT4_PANELS_VNNI
  run_vnni(a, w, y, n, pool);
#else
  run_avx2(a, w, y, n, pool);
#endif
#else
  (void)xq, (void)xs, (void)y, (void)pool;
  check(false, "gemm_int4_panels: this build has no AVX2 or AVX-512 VNNI kernel (int4_panels_available)");
#endif
}

void quantize_panel_acts_int16(const float* x, int n, int in, std::int16_t* xq, float* xs) {
  check(in > 0 && in % kActBlock == 0,
        "quantize_panel_acts_int16: in must be a positive multiple of 32, got " + std::to_string(in));
  const int blocks = in / kActBlock;
  for (int r = 0; r < n; ++r)
    for (int b = 0; b < blocks; ++b) {
      const float* xb = x + static_cast<std::size_t>(r) * in + static_cast<std::size_t>(b) * kActBlock;
      std::int16_t* qb = xq + static_cast<std::size_t>(r) * in + static_cast<std::size_t>(b) * kActBlock;
#if defined(__AVX2__)
      const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
      __m256 m = _mm256_and_ps(_mm256_loadu_ps(xb), abs_mask);
      for (int i = 8; i < kActBlock; i += 8) m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(xb + i), abs_mask));
      __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
      m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
      m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
      const float amax = _mm_cvtss_f32(m4);
#else
      float amax = 0.0f;
      for (int i = 0; i < kActBlock; ++i) amax = std::max(amax, std::fabs(xb[i]));
#endif
      const float inv = amax > 0.0f ? kInt16ActMax / amax : 0.0f;
      xs[static_cast<std::size_t>(r) * blocks + b] = amax / kInt16ActMax;
#if defined(__AVX2__)
      // The same values as the loop below (one multiply, rounding to nearest even, the clamp),
      // 8 at a time: a block's words in the pair order are a lane permutation of its 8-input
      // groups. The scalar loop took 2 ns a value, a sixth of a 4-row W8A16 int16 pass.
      const __m256 vinv = _mm256_set1_ps(inv), lim = _mm256_set1_ps(kInt16ActMax);
      const __m256i order = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
      for (int i = 0; i < kActBlock; i += 8) {
        __m256 v = _mm256_mul_ps(_mm256_loadu_ps(xb + i), vinv);
        v = _mm256_min_ps(_mm256_max_ps(_mm256_round_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), _mm256_sub_ps(_mm256_setzero_ps(), lim)), lim);
        const __m256i w = _mm256_permutevar8x32_epi32(_mm256_cvtps_epi32(v), order);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(qb + i),
                         _mm_packs_epi32(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1)));
      }
#else
      for (int i = 0; i < kActBlock; ++i) {
        const float v = std::clamp(std::nearbyint(xb[i] * inv), -kInt16ActMax, kInt16ActMax);
        qb[int16_pair_slot(i)] = static_cast<std::int16_t>(v);
      }
#endif
    }
}

PanelActsInt16 quantize_panel_acts_int16(const float* x, int n, int in) {
  thread_local std::vector<std::int16_t> xq;
  thread_local std::vector<float> xs;
  xq.resize(static_cast<std::size_t>(n) * in);
  xs.resize(static_cast<std::size_t>(n) * (in / kActBlock));
  quantize_panel_acts_int16(x, n, in, xq.data(), xs.data());
  return {xq.data(), xs.data()};
}

void gemm_int4_panels_int16(const std::int16_t* xq, const float* xs, const Int4Panels& w, float* y, int n,
                            ThreadPool& pool) {
  if (n <= 0 || w.out <= 0) return;
#if INFERLAB_INT4_PANELS
  const Acts<std::int16_t> a = make_acts(xq, xs, w, n);
#if INFERLAB_INT4_PANELS_VNNI
  run_vnni(a, w, y, n, pool);
#else
  run_avx2(a, w, y, n, pool);
#endif
#else
  (void)xq, (void)xs, (void)y, (void)pool;
  check(false, "gemm_int4_panels_int16: this build has no AVX2 or AVX-512 VNNI kernel (int4_panels_available)");
#endif
}

namespace int4_panels {
F32Acts make_f32_acts(const float* x, const Int4Panels& w, int n) {
  const int in = w.in, blocks = in / kActBlock, per = w.group_size / kActBlock;
  thread_local HugeVector<float> xw_buffer;
  thread_local std::vector<float> gsum_buffer;
  if (xw_buffer.size() < static_cast<std::size_t>(n) * in) xw_buffer.resize(static_cast<std::size_t>(n) * in);
  gsum_buffer.assign(static_cast<std::size_t>(n) * w.groups, 0.0f);
  for (int r = 0; r < n; ++r) {
    const float* xr = x + static_cast<std::size_t>(r) * in;
    float* dst = xw_buffer.data() + static_cast<std::size_t>(r) * in;
    constexpr float kScale[4] = {1.0f, 0x1p-8f, 0x1p-16f, 0x1p-24f};  // exact: powers of two
    for (int i = 0; i < in; ++i) dst[i] = xr[i] * kScale[i % 4];
    for (int g = 0; g < w.groups; ++g) {
      const int i1 = std::min(in, (g + 1) * w.group_size);
      float sum = 0.0f;
      for (int i = g * w.group_size; i < i1; ++i) sum += xr[i];
      gsum_buffer[static_cast<std::size_t>(r) * w.groups + g] = sum;
    }
  }
  return {xw_buffer.data(), gsum_buffer.data(), in, blocks, w.groups, per};
}
}  // namespace int4_panels

bool int4_panels_f32_available(int in, int group_size) {
#if INFERLAB_INT4_PANELS_AVX2
  return int4_panels_available(in, group_size);
#elif INFERLAB_INT4_PANELS_VNNI
  // Where the AMX bf16 tiles run, fp32 activations keep the rows (the register lookup for few rows,
  // the tiles' dequantised prefill: the AMX Xeon's measured paths); elsewhere the panels at every
  // row count (Zen 4, 2026-12-07: docs/kernels.md "W4A16 on the panels with AVX-512").
  return int4_panels_available(in, group_size) && !amx_bf16_enabled();
#else
  (void)in, (void)group_size;
  return false;
#endif
}

void gemm_int4_panels_f32(const float* x, const Int4Panels& w, float* y, int n, ThreadPool& pool) {
  if (n <= 0 || w.out <= 0) return;
#if INFERLAB_INT4_PANELS_AVX2
  run_avx2_f32(x, w, y, n, pool);
#elif INFERLAB_INT4_PANELS_VNNI
  run_vnni_f32(x, w, y, n, pool);
#else
  (void)x, (void)y, (void)pool;
  check(false, "gemm_int4_panels_f32: this build has no AVX2 or AVX-512 VNNI kernel (int4_panels_f32_available)");
#endif
}

}  // namespace inferlab::cpu
