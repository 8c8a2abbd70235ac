// Launchers of the CUDA quantized-linear kernels (quant_linear.cu: fp32 activations,
// quant_act.cu: int8 activations): y[n, out] = x[n, in] · W^T for W stored as int8 per output
// channel (kernels/ref/matmul_int8.h) or int4 groups (kernels/ref/matmul_int4.h). Plain C++
// declarations, called from .cpp files under #if INFERLAB_HAVE_CUDA; pointers are device memory,
// launches are asynchronous on `stream`; launch failures throw inferlab::Error.
#pragma once
#include <cstdint>

struct CUstream_st;  // cudaStream_t = CUstream_st*: no CUDA header needed to include this file

namespace inferlab::cuda {

// int8 weights: q [out, in], scale [out]; w = scale[o] * q[o, i].
struct Int8Weights {
  const std::int8_t* q = nullptr;
  const float* scale = nullptr;
};

// int4 groups: packed [out, ceil(in / 2)] (low nibble = even i), scale [out, G], zero [out, G]
// or null (symmetric: zero point 8); w = scale[o, g] * (u - zero[o, g]). group_size: a
// multiple of 8.
struct Int4Weights {
  const std::uint8_t* packed = nullptr;
  const float* scale = nullptr;
  const std::uint8_t* zero = nullptr;
  int group_size = 0;
};

// Rows handled by one pass of the GEMV kernels (their accumulators live in registers).
inline constexpr int kGemvRows = 16;

// ---- fp32 activations (weight-only) ---------------------------------------------------------
// n <= kGemvRows: GEMV, one warp per output channel, weights dequantised in registers from
// 8-byte (int8) / 4-byte (int4) vector loads. n > kGemvRows: a tiled GEMM that dequantises the
// weight tile into shared memory (fused; no fp32 copy of W).
void int8_linear(const float* x, Int8Weights w, float* y, int n, int out, int in, CUstream_st* stream);
void int4_linear(const float* x, Int4Weights w, float* y, int n, int out, int in, CUstream_st* stream);

// ---- int8 activations (W8A8 / W4A8) ---------------------------------------------------------
// x' = x ⊙ inv_smooth (inv_smooth [in] or null) cut into blocks of `block` values per row (the
// last one shorter), each with xs = max|x'| / 127 and xq = round(x' / xs) in [-127, 127] —
// block 32 is ref::quantize_act_rows, block = in the per-token scale of SmoothQuant.
// xq: [n, in], xs: [n, ceil(in / block)].
void quantize_activations(const float* x, const float* inv_smooth, int n, int in, int block, std::int8_t* xq,
                          float* xs, CUstream_st* stream);
// y[r, o] = scale[o] * sum_b xs[r, b] * (sum_{i in b} xq[r, i] q[o, i]): __dp4a int8 dots into
// exact int32 block sums, then fp32. block: a multiple of 4 or >= in, as given to quantize_activations.
void int8_act_linear(const std::int8_t* xq, const float* xs, int block, Int8Weights w, float* y, int n, int out,
                     int in, CUstream_st* stream);
// y[r, o] = sum_b xs[r, b] * scale[o, g] * (sum u·xq - zero[o, g] * sum xq), blocks of 32, the
// weights' group_size a multiple of 32.
void int4_act_linear(const std::int8_t* xq, const float* xs, Int4Weights w, float* y, int n, int out, int in,
                     CUstream_st* stream);

// y[r, i] = x[r, i] * s[i] (AWQ's and SmoothQuant's per-input-channel s⁻¹ before an fp32 or
// weight-only GEMM). x, y: [n, in] (may alias); s: [in].
void scale_columns(const float* x, const float* s, float* y, int n, int in, CUstream_st* stream);

}  // namespace inferlab::cuda
