// CUDA elementwise ops of the Llama layer (contracts: kernels/cuda/ops.h; truth: kernels/ref).
// Deliberately simple, obviously-correct kernels: one thread per element (grid-stride) for the
// streaming ops, one block per row for RMSNorm (double sum, as the CPU kernel, so the two
// devices agree to rounding), one warp per (row, head) for the int8 KV write. The row bodies are
// ops_rows.cuh's, shared with the fused kernels (fused.cu). All are memory-bound: bytes moved /
// time against the copy_f32 bandwidth is their roofline (scripts/gpu_check.sh prints it).
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/cuda/check.h"
#include "kernels/cuda/kv_values.cuh"
#include "kernels/cuda/ops.h"
#include "kernels/cuda/ops_rows.cuh"

namespace inferlab::cuda {
namespace {

constexpr int kThreads = 256;

// Blocks for n elements at kThreads per block, capped (grid-stride loops cover the rest).
unsigned int blocks_for(std::size_t n) {
  const std::size_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned int>(std::clamp<std::size_t>(b, 1, 65535u * 8u));
}

__global__ void embedding_kernel(const float* __restrict__ table, const int* __restrict__ tokens, int rows, int dim,
                                 float* __restrict__ out) {
  const std::size_t n = static_cast<std::size_t>(rows) * dim;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t r = i / dim, c = i % dim;
    out[i] = table[static_cast<std::size_t>(tokens[r]) * dim + c];
  }
}

__global__ void rmsnorm_kernel(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ out,
                               int dim, float eps) {
  __shared__ double partial[row_ops::kNormThreads];
  const float* xr = x + static_cast<std::size_t>(blockIdx.x) * dim;
  float* o = out + static_cast<std::size_t>(blockIdx.x) * dim;
  double ss = 0.0;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) ss = row_ops::add_square(ss, xr[i]);
  const float inv = row_ops::rms_inv(ss, partial, dim, eps);
  for (int i = threadIdx.x; i < dim; i += blockDim.x) o[i] = row_ops::norm_value(xr[i], w[i], inv);
}

// One thread per (row, head, pair) of q and then of k.
__global__ void rope_kernel(float* __restrict__ q, float* __restrict__ k, const int* __restrict__ positions, int rows,
                            int n_heads, int n_kv_heads, int head_dim, const float* __restrict__ inv_freq,
                            bool half_style) {
  const int half = head_dim / 2;
  const std::size_t q_pairs = static_cast<std::size_t>(rows) * n_heads * half;
  const std::size_t k_pairs = static_cast<std::size_t>(rows) * n_kv_heads * half;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < q_pairs + k_pairs;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    row_ops::rope_pair(q, k, positions, q_pairs, n_heads, n_kv_heads, head_dim, inv_freq, half_style, i);
}

// T = float (f32 cache), __half (f16) or __nv_bfloat16 (bf16).
template <class T>
__global__ void kv_write_kernel(T* __restrict__ k_cache, T* __restrict__ v_cache, const float* __restrict__ k,
                                const float* __restrict__ v, const int* __restrict__ slots, int rows, int kv_dim) {
  const std::size_t n = static_cast<std::size_t>(rows) * kv_dim;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    const std::size_t r = i / kv_dim, c = i % kv_dim;
    const std::size_t dst = static_cast<std::size_t>(slots[r]) * kv_dim + c;
    k_cache[dst] = detail::to_kv_value<T>(k[i]);
    v_cache[dst] = detail::to_kv_value<T>(v[i]);
  }
}

// One warp per (row, head) of K or V: warp max of |x|, then each lane writes its codes.
// Rounding: lroundf (half away from zero), as std::lround in the reference.
__global__ void kv_write_int8_kernel(std::int8_t* __restrict__ k_codes, std::int8_t* __restrict__ v_codes,
                                     float* __restrict__ k_scale, float* __restrict__ v_scale,
                                     const float* __restrict__ k, const float* __restrict__ v,
                                     const int* __restrict__ slots, int rows, int n_kv_heads, int head_dim) {
  const int warps_per_block = blockDim.x / 32;
  const std::size_t units = static_cast<std::size_t>(rows) * n_kv_heads * 2;  // (row, head, K|V)
  const std::size_t unit = static_cast<std::size_t>(blockIdx.x) * warps_per_block + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (unit >= units) return;
  const bool is_v = unit % 2 == 1;
  const std::size_t rh = unit / 2, r = rh / n_kv_heads, h = rh % n_kv_heads;
  const float* x = (is_v ? v : k) + rh * head_dim;
  float amax = 0.0f;
  for (int c = lane; c < head_dim; c += 32) amax = fmaxf(amax, fabsf(x[c]));
  for (int off = 16; off > 0; off /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
  const float s = amax / 127.0f, inv = s > 0.0f ? 1.0f / s : 0.0f;
  const std::size_t cell = static_cast<std::size_t>(slots[r]) * n_kv_heads + h;
  if (lane == 0) (is_v ? v_scale : k_scale)[cell] = s;
  std::int8_t* dst = (is_v ? v_codes : k_codes) + cell * head_dim;
  for (int c = lane; c < head_dim; c += 32) {
    const long q = lroundf(x[c] * inv);
    dst[c] = static_cast<std::int8_t>(q < -127 ? -127 : (q > 127 ? 127 : q));
  }
}

__global__ void add_kernel(float* __restrict__ x, const float* __restrict__ y, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    x[i] += y[i];
}

__global__ void swiglu_kernel(float* __restrict__ gate, const float* __restrict__ up, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
    gate[i] = row_ops::swiglu_value(gate[i], up[i]);
  }
}

__global__ void add_bias_kernel(float* __restrict__ y, const float* __restrict__ b, int rows, int width) {
  const std::size_t n = static_cast<std::size_t>(rows) * width;
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    y[i] += b[i % width];
}

__global__ void copy_f32x4_kernel(float4* __restrict__ dst, const float4* __restrict__ src, std::size_t n4) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n4;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

__global__ void copy_f32_kernel(float* __restrict__ dst, const float* __restrict__ src, std::size_t n) {
  for (std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<std::size_t>(gridDim.x) * blockDim.x)
    dst[i] = src[i];
}

}  // namespace

void embedding(const float* table, const int* tokens, int rows, int dim, float* out, Stream stream) {
  if (rows <= 0 || dim <= 0) return;
  embedding_kernel<<<blocks_for(static_cast<std::size_t>(rows) * dim), kThreads, 0, stream>>>(table, tokens, rows,
                                                                                              dim, out);
  INFERLAB_CUDA_CHECK_LAUNCH("embedding");
}

void rmsnorm(const float* x, const float* w, float* out, int rows, int dim, float eps, Stream stream) {
  if (rows <= 0 || dim <= 0) return;
  rmsnorm_kernel<<<static_cast<unsigned int>(rows), row_ops::kNormThreads, 0, stream>>>(x, w, out, dim, eps);
  INFERLAB_CUDA_CHECK_LAUNCH("rmsnorm");
}

void rope(float* q, float* k, const int* positions, int rows, int n_heads, int n_kv_heads, int head_dim,
          const float* inv_freq, RopeStyle style, Stream stream) {
  if (rows <= 0 || head_dim < 2) return;
  const std::size_t pairs = static_cast<std::size_t>(rows) * (n_heads + n_kv_heads) * (head_dim / 2);
  rope_kernel<<<blocks_for(pairs), kThreads, 0, stream>>>(q, k, positions, rows, n_heads, n_kv_heads, head_dim,
                                                          inv_freq, style == RopeStyle::kHalf);
  INFERLAB_CUDA_CHECK_LAUNCH("rope");
}

void kv_write_f32(float* k_cache, float* v_cache, const float* k, const float* v, const int* slots, int rows,
                  int kv_dim, Stream stream) {
  if (rows <= 0 || kv_dim <= 0) return;
  kv_write_kernel<float><<<blocks_for(static_cast<std::size_t>(rows) * kv_dim), kThreads, 0, stream>>>(
      k_cache, v_cache, k, v, slots, rows, kv_dim);
  INFERLAB_CUDA_CHECK_LAUNCH("kv_write_f32");
}

void kv_write_half(KvDtype dtype, void* k_cache, void* v_cache, const float* k, const float* v, const int* slots,
                   int rows, int kv_dim, Stream stream) {
  check(kv_dtype_half(dtype), std::string("cuda kv_write_half: dtype ") + kv_dtype_name(dtype) + " (allowed: f16, bf16)");
  if (rows <= 0 || kv_dim <= 0) return;
  const unsigned int blocks = blocks_for(static_cast<std::size_t>(rows) * kv_dim);
  if (dtype == KvDtype::kF16)
    kv_write_kernel<__half><<<blocks, kThreads, 0, stream>>>(static_cast<__half*>(k_cache), static_cast<__half*>(v_cache),
                                                             k, v, slots, rows, kv_dim);
  else
    kv_write_kernel<__nv_bfloat16><<<blocks, kThreads, 0, stream>>>(static_cast<__nv_bfloat16*>(k_cache),
                                                                    static_cast<__nv_bfloat16*>(v_cache), k, v, slots,
                                                                    rows, kv_dim);
  INFERLAB_CUDA_CHECK_LAUNCH("kv_write_half");
}

void kv_write_int8(std::int8_t* k_codes, std::int8_t* v_codes, float* k_scale, float* v_scale, const float* k,
                   const float* v, const int* slots, int rows, int n_kv_heads, int head_dim, Stream stream) {
  if (rows <= 0 || n_kv_heads <= 0 || head_dim <= 0) return;
  const std::size_t warps = static_cast<std::size_t>(rows) * n_kv_heads * 2;
  constexpr int kWarps = kThreads / 32;
  const auto blocks = static_cast<unsigned int>((warps + kWarps - 1) / kWarps);
  kv_write_int8_kernel<<<blocks, kThreads, 0, stream>>>(k_codes, v_codes, k_scale, v_scale, k, v, slots, rows,
                                                         n_kv_heads, head_dim);
  INFERLAB_CUDA_CHECK_LAUNCH("kv_write_int8");
}

void add(float* x, const float* y, std::size_t n, Stream stream) {
  if (n == 0) return;
  add_kernel<<<blocks_for(n), kThreads, 0, stream>>>(x, y, n);
  INFERLAB_CUDA_CHECK_LAUNCH("add");
}

void swiglu(float* gate, const float* up, std::size_t n, Stream stream) {
  if (n == 0) return;
  swiglu_kernel<<<blocks_for(n), kThreads, 0, stream>>>(gate, up, n);
  INFERLAB_CUDA_CHECK_LAUNCH("swiglu");
}

void add_bias(float* y, const float* b, int rows, int width, Stream stream) {
  if (rows <= 0 || width <= 0) return;
  add_bias_kernel<<<blocks_for(static_cast<std::size_t>(rows) * width), kThreads, 0, stream>>>(y, b, rows, width);
  INFERLAB_CUDA_CHECK_LAUNCH("add_bias");
}

void copy_f32(float* dst, const float* src, std::size_t n, Stream stream) {
  if (n == 0) return;
  const bool aligned = reinterpret_cast<std::uintptr_t>(dst) % 16 == 0 && reinterpret_cast<std::uintptr_t>(src) % 16 == 0;
  if (aligned && n % 4 == 0) {
    copy_f32x4_kernel<<<blocks_for(n / 4), kThreads, 0, stream>>>(reinterpret_cast<float4*>(dst),
                                                                  reinterpret_cast<const float4*>(src), n / 4);
  } else {
    copy_f32_kernel<<<blocks_for(n), kThreads, 0, stream>>>(dst, src, n);
  }
  INFERLAB_CUDA_CHECK_LAUNCH("copy_f32");
}

}  // namespace inferlab::cuda
