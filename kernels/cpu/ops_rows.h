// Per-row bodies of the elementwise ops, shared by the unfused ops (ops.cpp) and the fused ones
// (ops_fused.cpp) so both paths compute the same floats in the same order: the fused path is
// bit-identical to the unfused one, which tests/kernels/test_cpu_ops_fused.cpp checks.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "inferlab/rope_style.h"
#include "kernels/cpu/vec_exp.h"

namespace inferlab::cpu::row_ops {

// o[i] = w[i] * (x[i] / sqrt(mean(x^2) + eps)), the sum of squares in double. o may alias x.
inline void rmsnorm_row(const float* xr, const float* w, float* o, std::size_t d, float eps) {
  double ss = 0.0;
#pragma omp simd reduction(+ : ss)
  for (std::size_t i = 0; i < d; ++i) ss += static_cast<double>(xr[i]) * xr[i];
  const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(d) + eps));
#pragma omp simd
  for (std::size_t i = 0; i < d; ++i) o[i] = w[i] * (inv * xr[i]);
}

// cos/sin [half] of one position: angle j = pos * inv_freq[j] (the float expression of llama2.c).
inline void rope_angles(int position, const float* inv_freq, int half, float* cos, float* sin) {
  const float pos = static_cast<float>(position);
  for (int j = 0; j < half; ++j) {
    const float angle = pos * inv_freq[j];
    cos[j] = std::cos(angle);
    sin[j] = std::sin(angle);
  }
}

// Rotates the pairs of n_heads heads of one row (vec: [n_heads, head_dim]) in place.
inline void rotate(float* vec, int n_heads, int head_dim, const float* cos, const float* sin, RopeStyle style) {
  const int half = head_dim / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* v = vec + static_cast<std::size_t>(h) * head_dim;
    if (style == RopeStyle::kHalf) {
      float* a = v;
      float* b = v + half;
#pragma omp simd
      for (int j = 0; j < half; ++j) {
        const float v0 = a[j], v1 = b[j];
        a[j] = v0 * cos[j] - v1 * sin[j];
        b[j] = v0 * sin[j] + v1 * cos[j];
      }
    } else {
      for (int j = 0; j < half; ++j) {
        const float v0 = v[2 * j], v1 = v[2 * j + 1];
        v[2 * j] = v0 * cos[j] - v1 * sin[j];
        v[2 * j + 1] = v0 * sin[j] + v1 * cos[j];
      }
    }
  }
}

// RoPE of one token row: q [n_heads, head_dim] and k [n_kv_heads, head_dim] rotated in place at
// `position`; cs: scratch of head_dim floats (cos | sin).
inline void rope_row(float* q, float* k, int position, const float* inv_freq, int n_heads, int n_kv_heads,
                     int head_dim, RopeStyle style, float* cs) {
  const int half = head_dim / 2;
  rope_angles(position, inv_freq, half, cs, cs + half);
  rotate(q, n_heads, head_dim, cs, cs + half, style);
  rotate(k, n_kv_heads, head_dim, cs, cs + half, style);
}

// Eight floats as one machine vector (a ymm with AVX2; two xmm, or scalars, elsewhere).
using F8 = float __attribute__((vector_size(32)));
using I8 = std::int32_t __attribute__((vector_size(32)));

// gate[i] = silu(gate[i]) * up[i] = gate[i] / (1 + e^-gate[i]) * up[i] over [begin, end), eight
// at a time through exp_lanes (kernels/cpu/vec_exp.h; libm's scalar expf was a third of a decode
// step's elementwise time: TinyLlama, Zen 3). Lanes are independent, so an element gets the same
// bits wherever a range starts or ends (fused and unfused callers split differently); the short
// last group is padded.
inline void swiglu8(F8& g, const F8& u) {
  F8 e = -g;
  exp_lanes<F8, I8>(e);
  g = g / (1.0f + e) * u;
}
inline void swiglu_range(float* gate, const float* up, std::size_t begin, std::size_t end) {
  std::size_t i = begin;
  for (; i + 8 <= end; i += 8) {
    F8 g, u;
    std::memcpy(&g, gate + i, sizeof g);
    std::memcpy(&u, up + i, sizeof u);
    swiglu8(g, u);
    std::memcpy(gate + i, &g, sizeof g);
  }
  if (i < end) {
    const std::size_t m = end - i;
    F8 g = {}, u = {};
    std::memcpy(&g, gate + i, m * sizeof(float));
    std::memcpy(&u, up + i, m * sizeof(float));
    swiglu8(g, u);
    std::memcpy(gate + i, &g, m * sizeof(float));
  }
}

}  // namespace inferlab::cpu::row_ops
