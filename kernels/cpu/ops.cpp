// CPU elementwise ops: see ops.h. Each loop body is written so GCC vectorises it
// (-O3 -march=native, `omp simd` for reductions); threads split whole rows or 16 KiB chunks.
#include "kernels/cpu/ops.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace inferlab::cpu {

namespace {

// Values below which a loop is not worth waking the pool for (~16 KiB of floats).
constexpr std::size_t kChunk = 4096;

std::size_t row_grain(int width) {
  const std::size_t w = width > 0 ? static_cast<std::size_t>(width) : 1;
  return std::max<std::size_t>(1, kChunk / w);
}

// Rotates the pairs of n_heads heads of one row with precomputed cos/sin ([head_dim/2] each).
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

}  // namespace

void embedding(const float* table, const int* tokens, int rows, int dim, float* out, ThreadPool& pool) {
  const std::size_t d = static_cast<std::size_t>(dim);
  pool.parallel_for(static_cast<std::size_t>(rows), [&](std::size_t begin, std::size_t end) {
    for (std::size_t r = begin; r < end; ++r)
      std::memcpy(out + r * d, table + static_cast<std::size_t>(tokens[r]) * d, d * sizeof(float));
  }, row_grain(dim));
}

void rmsnorm(const float* x, const float* w, float* out, int rows, int dim, float eps, ThreadPool& pool) {
  const std::size_t d = static_cast<std::size_t>(dim);
  pool.parallel_for(static_cast<std::size_t>(rows), [&](std::size_t begin, std::size_t end) {
    for (std::size_t r = begin; r < end; ++r) {
      const float* xr = x + r * d;
      float* o = out + r * d;
      double ss = 0.0;
#pragma omp simd reduction(+ : ss)
      for (std::size_t i = 0; i < d; ++i) ss += static_cast<double>(xr[i]) * xr[i];
      const float inv = static_cast<float>(1.0 / std::sqrt(ss / dim + eps));
#pragma omp simd
      for (std::size_t i = 0; i < d; ++i) o[i] = w[i] * (inv * xr[i]);
    }
  }, row_grain(dim));
}

void rope(float* q, float* k, const int* positions, int rows, int n_heads, int n_kv_heads, int head_dim,
          const float* inv_freq, RopeStyle style, ThreadPool& pool) {
  const int half = head_dim / 2;
  const std::size_t qw = static_cast<std::size_t>(n_heads) * head_dim;
  const std::size_t kw = static_cast<std::size_t>(n_kv_heads) * head_dim;
  pool.parallel_for(static_cast<std::size_t>(rows), [&](std::size_t begin, std::size_t end) {
    std::vector<float> cs(static_cast<std::size_t>(2 * half));  // [cos | sin] of one position
    float* cos = cs.data();
    float* sin = cos + half;
    for (std::size_t r = begin; r < end; ++r) {
      const float pos = static_cast<float>(positions[r]);
      for (int j = 0; j < half; ++j) {  // the float expression of llama2.c run.c
        const float angle = pos * inv_freq[j];
        cos[j] = std::cos(angle);
        sin[j] = std::sin(angle);
      }
      rotate(q + r * qw, n_heads, head_dim, cos, sin, style);
      rotate(k + r * kw, n_kv_heads, head_dim, cos, sin, style);
    }
  }, row_grain(static_cast<int>(qw + kw)));
}

void kv_write_f32(float* k_cache, float* v_cache, const float* k, const float* v, const int* slots, int rows,
                  int kv_dim, ThreadPool& pool) {
  const std::size_t w = static_cast<std::size_t>(kv_dim);
  pool.parallel_for(static_cast<std::size_t>(rows), [&](std::size_t begin, std::size_t end) {
    for (std::size_t r = begin; r < end; ++r) {
      const std::size_t dst = static_cast<std::size_t>(slots[r]) * w;
      std::memcpy(k_cache + dst, k + r * w, w * sizeof(float));
      std::memcpy(v_cache + dst, v + r * w, w * sizeof(float));
    }
  }, row_grain(2 * kv_dim));
}

void add(float* x, const float* y, std::size_t n, ThreadPool& pool) {
  pool.parallel_for(n, [&](std::size_t begin, std::size_t end) {
#pragma omp simd
    for (std::size_t i = begin; i < end; ++i) x[i] += y[i];
  }, 4 * kChunk);
}

void swiglu(float* gate, const float* up, std::size_t n, ThreadPool& pool) {
  pool.parallel_for(n, [&](std::size_t begin, std::size_t end) {
#pragma omp simd
    for (std::size_t i = begin; i < end; ++i) {
      const float g = gate[i];
      gate[i] = g / (1.0f + std::exp(-g)) * up[i];
    }
  }, kChunk);
}

void add_bias(float* y, const float* b, int rows, int width, ThreadPool& pool) {
  const std::size_t w = static_cast<std::size_t>(width);
  pool.parallel_for(static_cast<std::size_t>(rows), [&](std::size_t begin, std::size_t end) {
    for (std::size_t r = begin; r < end; ++r) {
      float* yr = y + r * w;
#pragma omp simd
      for (std::size_t i = 0; i < w; ++i) yr[i] += b[i];
    }
  }, row_grain(width));
}

}  // namespace inferlab::cpu
