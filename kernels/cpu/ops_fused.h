// Fused elementwise ops (the CpuDevice runs these when [device] fuse = true): each does in one
// pass over a row, and one pool dispatch, what the unfused path does in two or three ops, each
// with its own dispatch and its own trip through memory:
//   residual_rmsnorm  x += y; out = rmsnorm(x); and/or act = quantize_act_blocks(rmsnorm(x))
//   rope_kv_write_f32 rotate q and k, then store the rotated k and v in the f32 cache
//   swiglu_quantize   act = quantize_act_blocks(silu(gate) * up)
// The row bodies are the unfused ops' own (ops_rows.h, quantize_act_row), so the results are
// bit-identical to the unfused sequence (tested in tests/kernels/test_cpu_ops_fused.cpp).
#pragma once
#include <cstddef>
#include <cstdint>

#include "inferlab/rope_style.h"
#include "inferlab/thread_pool.h"

namespace inferlab::cpu {

// Activations quantised per 32-block (kernels/ref/matmul_int8.h's Q8-style blocks), as the
// int8-activation linears read them: q [rows, dim], scale [rows, ref::act_blocks(dim)].
struct ActBlocks {
  std::int8_t* q = nullptr;
  float* scale = nullptr;
};

// x [rows, dim] += y [rows, dim] (y may be null: no add), then the RMSNorm of each row of x with
// weights w [dim] into out [rows, dim] (may be null) and/or quantised into act (act.q may be null).
void residual_rmsnorm(float* x, const float* y, const float* w, float* out, ActBlocks act, int rows, int dim,
                      float eps, ThreadPool& pool);

// Rotates q [rows, n_heads, head_dim] and k [rows, n_kv_heads, head_dim] in place (row r at
// positions[r]) and copies the rotated k and v [rows, n_kv_heads * head_dim] to
// k_cache/v_cache [slots, n_kv_heads * head_dim] at row slots[r].
void rope_kv_write_f32(float* q, float* k, const float* v, const int* positions, const int* slots, int rows,
                       int n_heads, int n_kv_heads, int head_dim, const float* inv_freq, RopeStyle style,
                       float* k_cache, float* v_cache, ThreadPool& pool);

// gate [rows, width] = silu(gate) * up, then each row quantised into act.
void swiglu_quantize(float* gate, const float* up, ActBlocks act, int rows, int width, ThreadPool& pool);

}  // namespace inferlab::cpu
