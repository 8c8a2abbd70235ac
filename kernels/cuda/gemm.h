// Row-major GEMMs of the linears on cuBLAS, and the activation conversions the half-precision
// ones need. y[n, out] = x[n, in] · W^T with W [out, in] row-major (the Linear contract).
// cuBLAS is column-major: a row-major [r, c] matrix is the column-major [c, r] one, so y^T
// [out, n] = W [out, in] (W^T's storage read transposed, lda = in) · x^T [in, n] (ldb = in),
// ldc = out — one cublas*gemm with op(A) = T, op(B) = N, m = out, n = n, k = in.
// Plain C++ declarations; all pointers device memory, asynchronous on the handle's stream.
#pragma once
#include <cstddef>
#include <cstdint>

struct CUstream_st;
struct cublasContext;

namespace inferlab::cuda {

// fp32 weights and activations, fp32 accumulation (cublasSgemm; no TF32: the handle's default
// math mode), so it matches the reference to float rounding.
void gemm_f32(cublasContext* handle, const float* x, const float* w, float* y, int n, int out, int in);

enum class HalfType { kF16, kBF16 };
// dst[i] = src[i] rounded to nearest even in the half type (f16 saturates to ±inf beyond 65504).
void convert_f32_to_half(const float* src, std::uint16_t* dst, std::size_t n, HalfType type, CUstream_st* stream);
// Half weights [out, in] and half activations [n, in], fp32 output and accumulation on tensor
// cores (cublasGemmEx, CUBLAS_COMPUTE_32F).
void gemm_half(cublasContext* handle, const std::uint16_t* x, const std::uint16_t* w, float* y, int n, int out,
               int in, HalfType type);

}  // namespace inferlab::cuda
