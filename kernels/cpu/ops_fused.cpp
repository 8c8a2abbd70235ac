// Fused elementwise ops: see ops_fused.h. Threads split whole rows; a row's intermediate stays
// in the core's L1 between the fused steps.
#include "kernels/cpu/ops_fused.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/matmul_int8_act.h"
#include "kernels/cpu/ops_rows.h"
#include "kernels/ref/matmul_int8.h"

namespace inferlab::cpu {
namespace {

// Rows per chunk: about 16 KiB of floats per chunk, as the unfused ops (ops.cpp).
std::size_t row_grain(std::size_t width) { return std::max<std::size_t>(1, 4096 / std::max<std::size_t>(1, width)); }

}  // namespace

void residual_rmsnorm(float* x, const float* y, const float* w, float* out, ActBlocks act, int rows, int dim,
                      float eps, ThreadPool& pool) {
  const std::size_t d = static_cast<std::size_t>(dim), blocks = static_cast<std::size_t>(ref::act_blocks(dim));
  pool.parallel_for(static_cast<std::size_t>(rows), [&](std::size_t begin, std::size_t end) {
    std::vector<float> normed(out == nullptr ? d : 0);  // [dim] one row's norm when only act is wanted
    for (std::size_t r = begin; r < end; ++r) {
      float* xr = x + r * d;
      if (y != nullptr) {
        const float* yr = y + r * d;
#pragma omp simd
        for (std::size_t i = 0; i < d; ++i) xr[i] += yr[i];
      }
      float* o = out != nullptr ? out + r * d : normed.data();
      row_ops::rmsnorm_row(xr, w, o, d, eps);
      if (act.q != nullptr) quantize_act_row(o, dim, act.q + r * d, act.scale + r * blocks);
    }
  }, row_grain(d));
}

void rope_kv_write_f32(float* q, float* k, const float* v, const int* positions, const int* slots, int rows,
                       int n_heads, int n_kv_heads, int head_dim, const float* inv_freq, RopeStyle style,
                       float* k_cache, float* v_cache, ThreadPool& pool) {
  const int half = head_dim / 2;
  const std::size_t qw = static_cast<std::size_t>(n_heads) * head_dim;
  const std::size_t kw = static_cast<std::size_t>(n_kv_heads) * head_dim;
  pool.parallel_for(static_cast<std::size_t>(rows), [&](std::size_t begin, std::size_t end) {
    std::vector<float> cs(static_cast<std::size_t>(2 * half));  // [cos | sin] of one position
    for (std::size_t r = begin; r < end; ++r) {
      float* kr = k + r * kw;
      row_ops::rope_row(q + r * qw, kr, positions[r], inv_freq, n_heads, n_kv_heads, head_dim, style, cs.data());
      const std::size_t dst = static_cast<std::size_t>(slots[r]) * kw;
      std::memcpy(k_cache + dst, kr, kw * sizeof(float));
      std::memcpy(v_cache + dst, v + r * kw, kw * sizeof(float));
    }
  }, row_grain(qw + 2 * kw));
}

void swiglu_quantize(float* gate, const float* up, ActBlocks act, int rows, int width, ThreadPool& pool) {
  const std::size_t w = static_cast<std::size_t>(width), blocks = static_cast<std::size_t>(ref::act_blocks(width));
  pool.parallel_for(static_cast<std::size_t>(rows), [&](std::size_t begin, std::size_t end) {
    for (std::size_t r = begin; r < end; ++r) {
      row_ops::swiglu_range(gate, up, r * w, (r + 1) * w);
      quantize_act_row(gate + r * w, width, act.q + r * w, act.scale + r * blocks);
    }
  }, row_grain(w));
}

}  // namespace inferlab::cpu
