// Reference dense ops: see ops.h.
#include "kernels/ref/ops.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace inferlab::ref {

void rmsnorm(float* out, const float* x, const float* w, int dim, float eps) {
  double ss = 0.0;
  for (int i = 0; i < dim; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float inv = static_cast<float>(1.0 / std::sqrt(ss / dim + eps));
  for (int i = 0; i < dim; ++i) out[i] = w[i] * (inv * x[i]);
}

void rope(float* vec, int n_heads, int head_dim, int pos, float theta, RopeStyle style) {
  const int half = head_dim / 2;
  for (int h = 0; h < n_heads; ++h) {
    float* v = vec + static_cast<std::size_t>(h) * head_dim;
    for (int j = 0; j < half; ++j) {
      // Same float expression as llama2.c run.c: freq = 1 / theta^(i / head_dim), i = 2j.
      const float freq = 1.0f / std::pow(theta, static_cast<float>(2 * j) / static_cast<float>(head_dim));
      const float angle = static_cast<float>(pos) * freq;
      const float c = std::cos(angle), s = std::sin(angle);
      const int a = style == RopeStyle::kInterleaved ? 2 * j : j;
      const int b = style == RopeStyle::kInterleaved ? 2 * j + 1 : j + half;
      const float v0 = v[a], v1 = v[b];
      v[a] = v0 * c - v1 * s;
      v[b] = v0 * s + v1 * c;
    }
  }
}

float silu(float x) { return x / (1.0f + std::exp(-x)); }

void swiglu(float* gate, const float* up, int n) {
  for (int i = 0; i < n; ++i) gate[i] = silu(gate[i]) * up[i];
}

void softmax(float* x, int n) {
  if (n <= 0) return;
  float max = x[0];
  for (int i = 1; i < n; ++i) max = x[i] > max ? x[i] : max;
  double sum = 0.0;
  for (int i = 0; i < n; ++i) {
    x[i] = std::exp(x[i] - max);
    sum += x[i];
  }
  for (int i = 0; i < n; ++i) x[i] = static_cast<float>(x[i] / sum);
}

void embedding(const float* table, const int* tokens, int rows, int dim, float* out) {
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < dim; ++i)
      out[static_cast<std::size_t>(r) * dim + i] = table[static_cast<std::size_t>(tokens[r]) * dim + i];
}

void kv_write(float* cache, const float* src, const int* slots, int rows, int width) {
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < width; ++i)
      cache[static_cast<std::size_t>(slots[r]) * width + i] = src[static_cast<std::size_t>(r) * width + i];
}

void kv_write_int8(signed char* codes, float* scale, const float* src, const int* slots, int rows, int n_heads,
                   int head_dim) {
  const std::size_t hd = static_cast<std::size_t>(head_dim), nh = static_cast<std::size_t>(n_heads);
  for (int r = 0; r < rows; ++r) {
    const std::size_t slot = static_cast<std::size_t>(slots[r]);
    for (std::size_t h = 0; h < nh; ++h) {
      const float* x = src + (static_cast<std::size_t>(r) * nh + h) * hd;
      float amax = 0.0f;
      for (std::size_t c = 0; c < hd; ++c) amax = std::max(amax, std::fabs(x[c]));
      const float s = amax / 127.0f, inv = s > 0.0f ? 1.0f / s : 0.0f;
      scale[slot * nh + h] = s;
      signed char* dst = codes + (slot * nh + h) * hd;
      for (std::size_t c = 0; c < hd; ++c)
        dst[c] = static_cast<signed char>(std::clamp(std::lround(x[c] * inv), -127L, 127L));
    }
  }
}

void add(float* x, const float* y, int n) {
  for (int i = 0; i < n; ++i) x[i] += y[i];
}

void add_bias(float* y, const float* b, int rows, int width) {
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < width; ++i) y[static_cast<std::size_t>(r) * width + i] += b[i];
}

void matmul(const float* x, const float* w, float* y, int n, int out, int in) {
  for (int r = 0; r < n; ++r) {
    const float* xr = x + static_cast<std::size_t>(r) * in;
    for (int o = 0; o < out; ++o) {
      const float* wo = w + static_cast<std::size_t>(o) * in;
      double acc = 0.0;
      for (int k = 0; k < in; ++k) acc += static_cast<double>(xr[k]) * wo[k];
      y[static_cast<std::size_t>(r) * out + o] = static_cast<float>(acc);
    }
  }
}

}  // namespace inferlab::ref
