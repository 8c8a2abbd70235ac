// Launchers of the CUDA kernels that run a GGUF file's own blocks (Q8_0, Q4_0, Q4_1, Q4_K, Q6_K;
// gguf_block_math.h has the arithmetic): y[n, out] = x[n, in] · W^T with W [out, in] stored as
// `out` rows of ggml_tensor_bytes(type, in) bytes, exactly as the file stores them (in a
// multiple of the type's block: 32, or 256 for the K-quants). Plain C++ declarations, called
// from .cpp files of a CUDA build; pointers are device memory, launches asynchronous on `stream`
// (and the handle's stream, bound to it), failures throw inferlab::Error.
#pragma once
#include <cstdint>

#include "inferlab/ggml_types.h"

struct CUstream_st;
struct cublasContext;

namespace inferlab::cuda {

// Rows one GEMV thread block carries (its accumulators live in registers), and the most rows the
// plugin sends to the GEMV (more go to the GEMM): up to 32 rows (batched decode) the GEMV's
// passes over the weights — the second and later mostly from L2 — move fewer bytes than an f16
// copy of W (4 bytes per weight written and read) does. Unmeasured on a GPU: to be tuned there.
inline constexpr int kGgufGemvRows = 8;
inline constexpr int kGgufGemvMaxRows = 32;

// Decode (gguf_mmvq.cu), any n (the plugin sends n <= kGgufGemvMaxRows): activations quantised
// per 32 (quantize_activations with block 32: xq [n, in], xs [n, in / 32]); one warp per output
// row and group of kGgufGemvRows rows, each lane one sub-block of 32 weights at a time, __dp4a
// integer dots, fp32 block sums (gguf_block_math.h).
void gguf_gemv(GgmlType type, const std::uint8_t* w, const std::int8_t* xq, const float* xs, float* y, int n,
               int out, int in, CUstream_st* stream);

// dst[i] = xq[i] * xs[i / 32] rounded to f16, i < n_values (activation blocks of 32, as
// quantize_activations writes them, widened for the prefill GEMM).
void gguf_act_blocks_to_f16(const std::int8_t* xq, const float* xs, long long n_values, std::uint16_t* dst,
                            CUstream_st* stream);

// Rows row0 .. row0 + rows of W dequantised to f16: dst [rows, in] (gguf_dequant.cu).
void gguf_dequantize_f16(GgmlType type, const std::uint8_t* w, int row0, int rows, int in, std::uint16_t* dst,
                         CUstream_st* stream);

// Prefill (gguf_dequant.cu): y[n, out] = xh[n, in] (f16) · W^T on tensor cores (cublasGemmEx,
// fp32 accumulation and output), W dequantised tile_rows rows at a time into w_tile
// [tile_rows, in] f16 (scratch the caller owns), each tile's GEMM writing y's columns o0 ..
// o0 + rows (ldc = out).
void gguf_gemm_f16(cublasContext* handle, CUstream_st* stream, GgmlType type, const std::uint8_t* w,
                   const std::uint16_t* xh, std::uint16_t* w_tile, int tile_rows, float* y, int n, int out, int in);

}  // namespace inferlab::cuda
