// Launchers of the tensor-core and 128-bit GEMV kernels of the quantized linears (int4_mma.cu:
// fp32 activations against int4 groups or int8 weights; int8_mma.cu: int8 activations against int8 or int4 weights),
// beside the CUDA-core kernels of quant_linear.h, whose weight structs and contracts they share.
// Which one a linear runs is kernels/cuda/linear_plan.h's choice; each launcher checks the
// constraints it relies on and throws inferlab::Error (naming them) when a caller breaks one.
// Plain C++ declarations; device pointers; asynchronous on `stream`; no allocation, no host sync.
#pragma once
#include <cstdint>

#include "kernels/cuda/linear_plan.h"
#include "kernels/cuda/quant_linear.h"

namespace inferlab::cuda {

// ---- int4 groups, fp32 activations (W4A16) ------------------------------------------------------
// mma.sync m16n8k16 bf16 tiles of 64 rows x 64 outputs: codes minus zero points (exact in bf16),
// activations split into hi + lo bf16 (two MMAs: ~16 significant bits, close to the fp32 kernels),
// fp32 accumulators scaled by the group scale every group. group_size % 32 == 0; any n, in, out.
void int4_linear_mma(const float* x, Int4Weights w, float* y, int n, int out, int in, CUstream_st* stream);
// The same tiles for int8 weights per output channel (W8A16): codes exact in bf16, the row scale
// applied once at the end. Any n, in, out.
void int8_linear_mma(const float* x, Int8Weights w, float* y, int n, int out, int in, CUstream_st* stream);
// One warp per output channel, each lane one 128-bit load of 32 codes (one group's) per step,
// the group's scale and zero point in registers; n <= kDecodeMaxRows (linear_plan.h), in % 32 == 0,
// group_size % 32 == 0.
void int4_linear_gemv128(const float* x, Int4Weights w, float* y, int n, int out, int in, CUstream_st* stream);
// The same for int8 weights: 16 codes per lane and step, the row scale at the end; n <=
// kDecodeMaxRows, in % 16 == 0.
void int8_linear_gemv128(const float* x, Int8Weights w, float* y, int n, int out, int in, CUstream_st* stream);

// ---- int8 activations (xq, xs from quantize_activations) ----------------------------------------
// mma.sync m16n8k32 s8 tiles: exact int32 sums over each 32-code step (or over the whole row when
// block >= in), scaled by xs[r, b] and the weights' block scale into fp32. block % 32 == 0 or
// block >= in.
void int8_act_linear_mma(const std::int8_t* xq, const float* xs, int block, Int8Weights w, float* y, int n, int out,
                         int in, CUstream_st* stream);
// The same for int4 groups (codes minus zero points are s8); blocks of 32, group_size % 32 == 0.
void int4_act_linear_mma(const std::int8_t* xq, const float* xs, Int4Weights w, float* y, int n, int out, int in,
                         CUstream_st* stream);
// GEMVs with 128-bit weight loads (16 int8 codes or 32 int4 codes per lane and step, inside one
// activation block) and __dp4a; n <= kDecodeMaxRows. int8: in % 16 == 0 and block % 16 == 0 or
// block >= in; int4: in % 32 == 0, blocks of 32.
void int8_act_linear_gemv128(const std::int8_t* xq, const float* xs, int block, Int8Weights w, float* y, int n,
                             int out, int in, CUstream_st* stream);
void int4_act_linear_gemv128(const std::int8_t* xq, const float* xs, Int4Weights w, float* y, int n, int out,
                             int in, CUstream_st* stream);

// y[r, o] = acc[r, o] * row_scale[r] * col_scale[o] (the epilogue of an int32 GEMM; may not alias).
void scale_int32_output(const std::int32_t* acc, const float* row_scale, const float* col_scale, float* y, int n,
                        int out, CUstream_st* stream);

}  // namespace inferlab::cuda
