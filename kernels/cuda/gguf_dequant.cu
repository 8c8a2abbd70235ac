// Prefill on a GGUF file's own blocks: W dequantised tile by tile to f16 in a scratch the
// caller owns (allocated once: tile_rows x in halves), each tile multiplied on tensor cores by
// cuBLAS (cublasGemmEx, f16 inputs, fp32 accumulation and output) into its columns of y.
//
// What: (1) gguf_dequantize_f16: one thread per (row, sub-block of 32) decodes the sub-block
// (gguf_block_math.h, the GEMV's own decoder) and writes its 32 halves (16 half2 stores);
// (2) cublasGemmEx per tile: y[:, o0 : o0 + rows] = xh · W_tile^T, ldc = out.
// A first step: the tile makes one round trip through memory (2 bytes per weight written and
// read) where an mma kernel would dequantise into shared memory; at prefill sizes (n >= 9 rows)
// the GEMM's arithmetic dominates the extra traffic.
// Launch: dequantise grid ceil(rows * in / 32 / 256) (at most 65535 * 8, grid-stride), 256
// threads.
#include <cublas_v2.h>
#include <cuda_fp16.h>

#include <algorithm>

#include "kernels/cuda/check.h"
#include "kernels/cuda/gguf.h"
#include "kernels/cuda/gguf_block_math.h"

namespace inferlab::cuda {

namespace {

constexpr int kThreads = 256;

template <GgmlType T>
__global__ void gguf_dequantize_f16_kernel(const std::uint8_t* __restrict__ w, long long row_bytes, int row0,
                                           long long rows, int in, __half* __restrict__ dst) {
  using B = gguf::Block<T>;
  const long long subs = in / 32, total = rows * subs;
  for (long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long r = idx / subs;
    const int s = static_cast<int>(idx % subs);
    gguf::SubBlock sb;
    B::decode(w + (row0 + r) * row_bytes, s, sb);
    auto* out = reinterpret_cast<__half2*>(dst + r * in + 32LL * s);  // 64-byte aligned
#pragma unroll
    for (int i = 0; i < 32; i += 2) out[i / 2] = __floats2half2_rn(gguf::weight_at(sb, i), gguf::weight_at(sb, i + 1));
  }
}

__global__ void act_blocks_to_f16_kernel(const std::int8_t* __restrict__ xq, const float* __restrict__ xs,
                                         long long n, __half* __restrict__ dst) {
  for (long long i = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<long long>(gridDim.x) * blockDim.x)
    dst[i] = __float2half_rn(static_cast<float>(xq[i]) * xs[i / 32]);
}

template <GgmlType T>
void dequantize(const std::uint8_t* w, int row0, int rows, int in, std::uint16_t* dst, CUstream_st* stream) {
  const long long row_bytes = static_cast<long long>(in / (32 * gguf::Block<T>::kSubs)) * gguf::Block<T>::kBytes;
  const long long total = static_cast<long long>(rows) * (in / 32);
  const auto grid = static_cast<unsigned>(std::min<long long>((total + kThreads - 1) / kThreads, 65535LL * 8));
  gguf_dequantize_f16_kernel<T><<<grid, kThreads, 0, stream>>>(w, row_bytes, row0, rows, in,
                                                                reinterpret_cast<__half*>(dst));
  INFERLAB_CUDA_CHECK_LAUNCH(gguf_dequantize_f16_kernel);
}

}  // namespace

void gguf_dequantize_f16(GgmlType type, const std::uint8_t* w, int row0, int rows, int in, std::uint16_t* dst,
                         CUstream_st* stream) {
  if (rows <= 0) return;
  check(gguf::runs(type) && in > 0 && in % static_cast<int>(ggml_block_elements(type)) == 0,
        "cuda gguf_dequantize_f16: " + ggml_type_name(static_cast<std::uint32_t>(type)) + " rows of " +
            std::to_string(in) + " (allowed: Q8_0, Q4_0, Q4_1, Q4_K, Q6_K, rows of whole blocks)");
  switch (type) {
    case GgmlType::kQ8_0: return dequantize<GgmlType::kQ8_0>(w, row0, rows, in, dst, stream);
    case GgmlType::kQ4_0: return dequantize<GgmlType::kQ4_0>(w, row0, rows, in, dst, stream);
    case GgmlType::kQ4_1: return dequantize<GgmlType::kQ4_1>(w, row0, rows, in, dst, stream);
    case GgmlType::kQ4_K: return dequantize<GgmlType::kQ4_K>(w, row0, rows, in, dst, stream);
    default: return dequantize<GgmlType::kQ6_K>(w, row0, rows, in, dst, stream);
  }
}

void gguf_act_blocks_to_f16(const std::int8_t* xq, const float* xs, long long n_values, std::uint16_t* dst,
                            CUstream_st* stream) {
  if (n_values <= 0) return;
  const auto grid = static_cast<unsigned>(std::min<long long>((n_values + kThreads - 1) / kThreads, 65535LL * 8));
  act_blocks_to_f16_kernel<<<grid, kThreads, 0, stream>>>(xq, xs, n_values, reinterpret_cast<__half*>(dst));
  INFERLAB_CUDA_CHECK_LAUNCH(act_blocks_to_f16_kernel);
}

void gguf_gemm_f16(cublasContext* handle, CUstream_st* stream, GgmlType type, const std::uint8_t* w,
                   const std::uint16_t* xh, std::uint16_t* w_tile, int tile_rows, float* y, int n, int out, int in) {
  if (n <= 0 || out <= 0) return;
  check(tile_rows > 0, "cuda gguf_gemm_f16: tile_rows must be positive");
  const float alpha = 1.0f, beta = 0.0f;
  for (int o0 = 0; o0 < out; o0 += tile_rows) {
    const int rows = std::min(tile_rows, out - o0);
    gguf_dequantize_f16(type, w, o0, rows, in, w_tile, stream);
    // Column-major view (gemm.h): y^T[o0 .. o0 + rows, :] = W_tile (read transposed) · xh^T.
    INFERLAB_CUBLAS_CHECK(cublasGemmEx(handle, CUBLAS_OP_T, CUBLAS_OP_N, rows, n, in, &alpha, w_tile, CUDA_R_16F, in,
                                       xh, CUDA_R_16F, in, &beta, y + o0, CUDA_R_32F, out, CUBLAS_COMPUTE_32F,
                                       CUBLAS_GEMM_DEFAULT));
  }
}

}  // namespace inferlab::cuda
