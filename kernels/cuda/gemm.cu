// Row-major GEMMs on cuBLAS (see gemm.h for the layout argument).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "kernels/cuda/check.h"
#include "kernels/cuda/gemm.h"

namespace inferlab::cuda {
namespace {

__global__ void to_f16_kernel(const float* __restrict__ src, __half* __restrict__ dst, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    dst[i] = __float2half_rn(src[i]);
}

__global__ void to_bf16_kernel(const float* __restrict__ src, __nv_bfloat16* __restrict__ dst, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    dst[i] = __float2bfloat16_rn(src[i]);
}

}  // namespace

void gemm_f32(cublasContext* handle, const float* x, const float* w, float* y, int n, int out, int in) {
  if (n <= 0) return;
  const float alpha = 1.0f, beta = 0.0f;
  INFERLAB_CUBLAS_CHECK(cublasSgemm(handle, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, &alpha, w, in, x, in, &beta, y, out));
}

void convert_f32_to_half(const float* src, std::uint16_t* dst, std::size_t n, HalfType type, CUstream_st* stream) {
  if (n == 0) return;
  constexpr int kThreads = 256;
  const auto blocks = static_cast<unsigned int>(std::min<std::size_t>((n + kThreads - 1) / kThreads, 65535u * 8u));
  if (type == HalfType::kF16)
    to_f16_kernel<<<blocks, kThreads, 0, stream>>>(src, reinterpret_cast<__half*>(dst), n);
  else
    to_bf16_kernel<<<blocks, kThreads, 0, stream>>>(src, reinterpret_cast<__nv_bfloat16*>(dst), n);
  INFERLAB_CUDA_CHECK_LAUNCH("convert_f32_to_half");
}

void gemm_half(cublasContext* handle, const std::uint16_t* x, const std::uint16_t* w, float* y, int n, int out,
               int in, HalfType type) {
  if (n <= 0) return;
  const float alpha = 1.0f, beta = 0.0f;
  const cudaDataType_t ab = type == HalfType::kF16 ? CUDA_R_16F : CUDA_R_16BF;
  INFERLAB_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, &alpha, w, ab, in, x, ab, in, &beta,
                                     y, CUDA_R_32F, out, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace inferlab::cuda
