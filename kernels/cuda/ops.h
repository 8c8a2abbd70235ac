// CUDA launchers of the model's elementwise ops (the CUDA half of the device seam; the CPU
// half is kernels/cpu/ops.h, the truth kernels/ref/ops.h). All pointers are device memory;
// every launch is asynchronous on `stream` and throws Error on a launch failure.
// Plain C++ declarations (no CUDA header): callable from .cpp files of a CUDA build.
#pragma once
#include <cstddef>
#include <cstdint>

#include "inferlab/paged_kv.h"
#include "inferlab/rope_style.h"

struct CUstream_st;

namespace inferlab::cuda {

using Stream = CUstream_st*;  // cudaStream_t

// out[r, :] = table[tokens[r], :]                     out: [rows, dim]
void embedding(const float* table, const int* tokens, int rows, int dim, float* out, Stream stream);
// out[r, :] = x[r, :] * rsqrt(mean(x[r]^2) + eps) * w   one block per row, fp32 sum
void rmsnorm(const float* x, const float* w, float* out, int rows, int dim, float eps, Stream stream);
// In place: q [rows, n_heads, head_dim], k [rows, n_kv_heads, head_dim]; pair j of row r turns
// by positions[r] * inv_freq[j] (sincosf of the fp32 angle, as the CPU kernel).
void rope(float* q, float* k, const int* positions, int rows, int n_heads, int n_kv_heads, int head_dim,
          const float* inv_freq, RopeStyle style, Stream stream);
// cache[slots[r], :] = src[r, :] for K and V rows of kv_dim floats.
void kv_write_f32(float* k_cache, float* v_cache, const float* k, const float* v, const int* slots, int rows,
                  int kv_dim, Stream stream);
// f16 / bf16 KV rows (contract: Device::kv_write_half; dtype kF16 or kBf16, else Error):
// cache[slots[r], :] = src[r, :] rounded to nearest even, caches [slots, kv_dim] of 2-byte values.
// One thread per value, as kv_write_f32.
void kv_write_half(KvDtype dtype, void* k_cache, void* v_cache, const float* k, const float* v, const int* slots,
                   int rows, int kv_dim, Stream stream);
// int8 KV rows (contract: Device::kv_write_int8); one warp per (row, head), K and V.
void kv_write_int8(std::int8_t* k_codes, std::int8_t* v_codes, float* k_scale, float* v_scale, const float* k,
                   const float* v, const int* slots, int rows, int n_kv_heads, int head_dim, Stream stream);
// x[i] += y[i]
void add(float* x, const float* y, std::size_t n, Stream stream);
// gate[i] = silu(gate[i]) * up[i]
void swiglu(float* gate, const float* up, std::size_t n, Stream stream);
// y[r, :] += b
void add_bias(float* y, const float* b, int rows, int width, Stream stream);
// dst[i] = src[i], n floats, one float4 per thread where aligned: the bandwidth roofline probe.
void copy_f32(float* dst, const float* src, std::size_t n, Stream stream);

}  // namespace inferlab::cuda
