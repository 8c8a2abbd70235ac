// Threaded, vectorised versions of the model's elementwise ops (the CpuDevice runs these):
// embedding gather, RMSNorm, RoPE, KV write, residual add, SwiGLU, bias. All are memory-bound
// (a few flops per byte), so they split rows or contiguous chunks over the pool only when a
// chunk is large enough to pay for a wake-up. Parity with kernels/ref/ops.h is tested in
// tests/kernels/test_cpu_ops.cpp.
#pragma once
#include <cstddef>

#include "inferlab/rope_style.h"
#include "inferlab/thread_pool.h"

namespace inferlab::cpu {

// out[r, :] = table[tokens[r], :]   table: [vocab, dim], out: [rows, dim]
void embedding(const float* table, const int* tokens, int rows, int dim, float* out, ThreadPool& pool);
// RMSNorm of each row (sum of squares in double, as kernels/ref). out may alias x.
void rmsnorm(const float* x, const float* w, float* out, int rows, int dim, float eps, ThreadPool& pool);
// Rotary embedding of q [rows, n_heads, head_dim] and k [rows, n_kv_heads, head_dim] in place,
// row r at positions[r], pair j turning by positions[r] * inv_freq[j].
void rope(float* q, float* k, const int* positions, int rows, int n_heads, int n_kv_heads, int head_dim,
          const float* inv_freq, RopeStyle style, ThreadPool& pool);
// cache[slots[r], :] = src[r, :] for k and v, rows of kv_dim floats.
void kv_write_f32(float* k_cache, float* v_cache, const float* k, const float* v, const int* slots, int rows,
                  int kv_dim, ThreadPool& pool);
// x[i] += y[i].
void add(float* x, const float* y, std::size_t n, ThreadPool& pool);
// gate[i] = silu(gate[i]) * up[i].
void swiglu(float* gate, const float* up, std::size_t n, ThreadPool& pool);
// y[r, :] += b.
void add_bias(float* y, const float* b, int rows, int width, ThreadPool& pool);

}  // namespace inferlab::cpu
