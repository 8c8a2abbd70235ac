// Fused decode ops on CUDA (contracts: kernels/cuda/fused.h).
//
// What: residual_rmsnorm does the residual add, the RMSNorm and the int8 activation blocks of
// the linears reading its output in one pass over a row (one block of 256 threads per row; the
// 32-value activation blocks line up with warps, so a block's max|x| is one warp shuffle);
// rope_kv_write_f32 / _half rotate q and k and store the rotated k and v in the f32 (f16, bf16)
// cache (one thread per pair or V value); swiglu_quantize does SwiGLU and w2's activation blocks (a block per row).
// The row bodies are ops_rows.cuh's, as the unfused kernels', hence bit-identical results.
// Roofline (decode, memory-bound): unfused, an RMSNorm feeding int8 linears reads x and y,
// writes x (add), reads x, writes xn (norm), reads xn, writes codes (quantise): 6 row trips and
// three launches; fused it reads x and y, writes x and the codes: 3 trips and one launch. Per
// decode token these ops move kilobytes, so their gain is the launches (~2-5 µs each), not bytes.
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/cuda/check.h"
#include "kernels/cuda/fused.h"
#include "kernels/cuda/kv_values.cuh"
#include "kernels/cuda/ops_rows.cuh"

namespace inferlab::cuda {
namespace {

constexpr int kThreads = row_ops::kNormThreads;  // 256: eight 32-value activation blocks a pass
constexpr int kBlock = 32;                       // kernels/ref/matmul_int8.h's kActBlock

__global__ void residual_rmsnorm_kernel(float* __restrict__ x, const float* __restrict__ y,
                                        const float* __restrict__ w, float* __restrict__ out,
                                        signed char* __restrict__ act_q, float* __restrict__ act_scale, int dim,
                                        float eps) {
  __shared__ double partial[kThreads];
  const std::size_t row = blockIdx.x;
  float* xr = x + row * dim;
  double ss = 0.0;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    float v = xr[i];
    if (y != nullptr) {
      v += y[row * dim + i];
      xr[i] = v;
    }
    ss = row_ops::add_square(ss, v);
  }
  const float inv = row_ops::rms_inv(ss, partial, dim, eps);
  const int blocks = (dim + kBlock - 1) / kBlock, warp = threadIdx.x / 32;
  for (int i0 = 0; i0 < dim; i0 += kThreads) {  // block-uniform trip count: every lane shuffles
    const int i = i0 + static_cast<int>(threadIdx.x);
    const bool valid = i < dim;
    const float o = valid ? row_ops::norm_value(xr[i], w[i], inv) : 0.0f;
    if (out != nullptr && valid) out[row * dim + i] = o;
    const int first = i0 + warp * kBlock;  // this warp's activation block
    if (act_q != nullptr && first < dim)
      row_ops::quantize_block(o, valid, act_q + row * dim + i, act_scale + row * blocks + first / kBlock);
  }
}

// Index space: q pairs, then k pairs (rotated, then stored), then V values (stored). T: the
// cache's element (float, __half, __nv_bfloat16; kv_values.cuh rounds as kv_write does).
template <class T>
__global__ void rope_kv_write_kernel(float* __restrict__ q, float* __restrict__ k, const float* __restrict__ v,
                                     const int* __restrict__ positions, const int* __restrict__ slots, int rows,
                                     int n_heads, int n_kv_heads, int head_dim, const float* __restrict__ inv_freq,
                                     bool half_style, T* __restrict__ k_cache, T* __restrict__ v_cache) {
  const int half = head_dim / 2;
  const std::size_t kv_dim = static_cast<std::size_t>(n_kv_heads) * head_dim;
  const std::size_t q_pairs = static_cast<std::size_t>(rows) * n_heads * half;
  const std::size_t k_pairs = static_cast<std::size_t>(rows) * n_kv_heads * half;
  const std::size_t total = q_pairs + k_pairs + static_cast<std::size_t>(rows) * kv_dim;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    if (i >= q_pairs + k_pairs) {
      const std::size_t e = i - q_pairs - k_pairs, r = e / kv_dim;
      v_cache[static_cast<std::size_t>(slots[r]) * kv_dim + e % kv_dim] = detail::to_kv_value<T>(v[e]);
      continue;
    }
    const row_ops::RopedPair rp =
        row_ops::rope_pair(q, k, positions, q_pairs, n_heads, n_kv_heads, head_dim, inv_freq, half_style, i);
    if (!rp.is_q) {
      const float* vec = k + (rp.row * n_kv_heads + rp.head) * head_dim;
      T* dst = k_cache + static_cast<std::size_t>(slots[rp.row]) * kv_dim + rp.head * head_dim;
      dst[rp.a] = detail::to_kv_value<T>(vec[rp.a]);
      dst[rp.b] = detail::to_kv_value<T>(vec[rp.b]);
    }
  }
}

__global__ void swiglu_quantize_kernel(float* __restrict__ gate, const float* __restrict__ up,
                                       signed char* __restrict__ act_q, float* __restrict__ act_scale, int width) {
  const std::size_t row = blockIdx.x;
  const int blocks = (width + kBlock - 1) / kBlock, warp = threadIdx.x / 32;
  float* g = gate + row * width;
  const float* u = up + row * width;
  for (int i0 = 0; i0 < width; i0 += kThreads) {
    const int i = i0 + static_cast<int>(threadIdx.x);
    const bool valid = i < width;
    float h = 0.0f;
    if (valid) {
      h = row_ops::swiglu_value(g[i], u[i]);
      g[i] = h;
    }
    const int first = i0 + warp * kBlock;
    if (first < width)
      row_ops::quantize_block(h, valid, act_q + row * width + i, act_scale + row * blocks + first / kBlock);
  }
}

}  // namespace

void residual_rmsnorm(float* x, const float* y, const float* w, float* out, std::int8_t* act_q, float* act_scale,
                      int rows, int dim, float eps, CUstream_st* stream) {
  if (rows <= 0 || dim <= 0) return;
  check(act_q == nullptr || act_scale != nullptr, "cuda residual_rmsnorm: activation codes without scales");
  residual_rmsnorm_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      x, y, w, out, reinterpret_cast<signed char*>(act_q), act_scale, dim, eps);
  INFERLAB_CUDA_CHECK_LAUNCH("residual_rmsnorm");
}

namespace {

// One launch of rope_kv_write_kernel<T>: a thread per rotated pair or stored V value.
template <class T>
void launch_rope_kv_write(float* q, float* k, const float* v, const int* positions, const int* slots, int rows,
                          int n_heads, int n_kv_heads, int head_dim, const float* inv_freq, RopeStyle style,
                          T* k_cache, T* v_cache, CUstream_st* stream) {
  const std::size_t work = static_cast<std::size_t>(rows) *
                           ((static_cast<std::size_t>(n_heads) + n_kv_heads) * (head_dim / 2) +
                            static_cast<std::size_t>(n_kv_heads) * head_dim);
  const auto blocks = static_cast<unsigned>(std::clamp<std::size_t>((work + kThreads - 1) / kThreads, 1, 65535u * 8u));
  rope_kv_write_kernel<T><<<blocks, kThreads, 0, stream>>>(q, k, v, positions, slots, rows, n_heads, n_kv_heads,
                                                           head_dim, inv_freq, style == RopeStyle::kHalf, k_cache,
                                                           v_cache);
  INFERLAB_CUDA_CHECK_LAUNCH("rope_kv_write");
}

}  // namespace

void rope_kv_write_f32(float* q, float* k, const float* v, const int* positions, const int* slots, int rows,
                       int n_heads, int n_kv_heads, int head_dim, const float* inv_freq, RopeStyle style,
                       float* k_cache, float* v_cache, CUstream_st* stream) {
  if (rows <= 0 || head_dim < 2) return;
  launch_rope_kv_write(q, k, v, positions, slots, rows, n_heads, n_kv_heads, head_dim, inv_freq, style, k_cache,
                       v_cache, stream);
}

void rope_kv_write_half(KvDtype dtype, float* q, float* k, const float* v, const int* positions, const int* slots,
                        int rows, int n_heads, int n_kv_heads, int head_dim, const float* inv_freq, RopeStyle style,
                        void* k_cache, void* v_cache, CUstream_st* stream) {
  check(kv_dtype_half(dtype),
        std::string("cuda rope_kv_write_half: dtype ") + kv_dtype_name(dtype) + " (allowed: f16, bf16)");
  if (rows <= 0 || head_dim < 2) return;
  if (dtype == KvDtype::kF16)
    launch_rope_kv_write(q, k, v, positions, slots, rows, n_heads, n_kv_heads, head_dim, inv_freq, style,
                         static_cast<__half*>(k_cache), static_cast<__half*>(v_cache), stream);
  else
    launch_rope_kv_write(q, k, v, positions, slots, rows, n_heads, n_kv_heads, head_dim, inv_freq, style,
                         static_cast<__nv_bfloat16*>(k_cache), static_cast<__nv_bfloat16*>(v_cache), stream);
}

void swiglu_quantize(float* gate, const float* up, std::int8_t* act_q, float* act_scale, int rows, int width,
                     CUstream_st* stream) {
  if (rows <= 0 || width <= 0) return;
  swiglu_quantize_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(
      gate, up, reinterpret_cast<signed char*>(act_q), act_scale, width);
  INFERLAB_CUDA_CHECK_LAUNCH("swiglu_quantize");
}

}  // namespace inferlab::cuda
