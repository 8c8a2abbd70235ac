// CPU elementwise ops: see ops.h. Each loop body is written so GCC vectorises it
// (-O3 -march=native, `omp simd` for reductions); threads split whole rows or 16 KiB chunks.
#include "kernels/cpu/ops.h"
#include "kernels/cpu/ops_rows.h"

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
    for (std::size_t r = begin; r < end; ++r) row_ops::rmsnorm_row(x + r * d, w, out + r * d, d, eps);
  }, row_grain(dim));
}

void rope(float* q, float* k, const int* positions, int rows, int n_heads, int n_kv_heads, int head_dim,
          const float* inv_freq, RopeStyle style, ThreadPool& pool) {
  const int half = head_dim / 2;
  const std::size_t qw = static_cast<std::size_t>(n_heads) * head_dim;
  const std::size_t kw = static_cast<std::size_t>(n_kv_heads) * head_dim;
  pool.parallel_for(static_cast<std::size_t>(rows), [&](std::size_t begin, std::size_t end) {
    std::vector<float> cs(static_cast<std::size_t>(2 * half));  // [cos | sin] of one position
    for (std::size_t r = begin; r < end; ++r)
      row_ops::rope_row(q + r * qw, k + r * kw, positions[r], inv_freq, n_heads, n_kv_heads, head_dim, style, cs.data());
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
    row_ops::swiglu_range(gate, up, begin, end);
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
