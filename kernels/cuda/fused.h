// CUDA launchers of the fused decode ops (the CudaDevice runs them when [device] fuse = true;
// contracts: ComputeDevice's fused ops in core/include/inferlab/device/device.h; the CPU twins are
// kernels/cpu/ops_fused.h, the reference math kernels/ref/ops_fused.h). Each does in one launch
// what the unfused path does in two or three, with the unfused kernels' own row bodies
// (ops_rows.cuh), so the results are bit-identical to the unfused sequence. All pointers are
// device memory; launches are asynchronous on `stream`, allocate nothing and never synchronise
// (safe inside a captured CUDA graph); a launch failure throws Error.
// Plain C++ declarations (no CUDA header): callable from .cpp files of a CUDA build.
#pragma once
#include <cstdint>

#include "inferlab/paged_kv.h"
#include "inferlab/rope_style.h"

struct CUstream_st;

namespace inferlab::cuda {

// x [rows, dim] += y (y may be null: no add), then RMSNorm of x with w [dim] into out [rows, dim]
// (may be null) and/or quantised per 32-block into act_q [rows, dim], act_scale
// [rows, ceil(dim / 32)] (act_q null: none), as quantize_activations(block 32) would quantise out.
// One block of 256 threads per row.
void residual_rmsnorm(float* x, const float* y, const float* w, float* out, std::int8_t* act_q, float* act_scale,
                      int rows, int dim, float eps, CUstream_st* stream);

// rope (kernels/cuda/ops.h) of q [rows, n_heads, head_dim] and k [rows, n_kv_heads, head_dim] in
// place, the rotated k and v [rows, n_kv_heads * head_dim] stored at row slots[r] of the f32
// caches [slots, n_kv_heads * head_dim]. One thread per rotated pair or copied V value.
void rope_kv_write_f32(float* q, float* k, const float* v, const int* positions, const int* slots, int rows,
                       int n_heads, int n_kv_heads, int head_dim, const float* inv_freq, RopeStyle style,
                       float* k_cache, float* v_cache, CUstream_st* stream);

// The same with f16 / bf16 caches (dtype kF16 or kBf16, else Error): the rotated k and v stored
// rounded to nearest even, as kv_write_half stores them (bit for bit rope, then kv_write_half).
void rope_kv_write_half(KvDtype dtype, float* q, float* k, const float* v, const int* positions, const int* slots,
                        int rows, int n_heads, int n_kv_heads, int head_dim, const float* inv_freq, RopeStyle style,
                        void* k_cache, void* v_cache, CUstream_st* stream);

// gate [rows, width] = silu(gate) * up, each row then quantised per 32-block into act_q
// [rows, width], act_scale [rows, ceil(width / 32)]. One block of 256 threads per row.
void swiglu_quantize(float* gate, const float* up, std::int8_t* act_q, float* act_scale, int rows, int width,
                     CUstream_st* stream);

}  // namespace inferlab::cuda
