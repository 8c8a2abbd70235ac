// Device bodies of the elementwise ops, shared by the unfused kernels (ops.cu) and the fused ones
// (fused.cu) so both paths compute the same floats in the same order: with [device] fuse = true a
// CUDA run is bit-identical to the unfused one (tests/cuda/test_cuda_fused.cpp checks it). The
// rotation's products are explicit (__fmul_rn / __fmaf_rn), so nvcc's FMA contraction cannot
// round the two paths differently (likewise the sum of squares); the activation quantisation is
// quant_act.cu's formula.
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

namespace inferlab::cuda::row_ops {

// Threads of an RMSNorm block (a power of two, a multiple of the 32-value activation block).
constexpr int kNormThreads = 256;

// ss + x² in double, one explicit fused multiply-add (both paths round it the same way).
__device__ inline double add_square(double ss, float x) {
  const double d = x;
  return __fma_rn(d, d, ss);
}

// 1 / sqrt(sum / dim + eps) of one row, where each thread passes its own partial sum of squares
// (in double) and `partial` is [kNormThreads] shared memory; a tree over the block, then every
// thread reads the root. Called by every thread of a kNormThreads block.
__device__ inline float rms_inv(double own, double* partial, int dim, float eps) {
  partial[threadIdx.x] = own;
  __syncthreads();
  for (int stride = kNormThreads / 2; stride > 0; stride /= 2) {
    if (static_cast<int>(threadIdx.x) < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
    __syncthreads();
  }
  return static_cast<float>(1.0 / sqrt(partial[0] / dim + eps));
}

// One RMSNorm output value: w * (inv * x).
__device__ inline float norm_value(float x, float w, float inv) { return w * (inv * x); }

// Pair (v[a], v[b]) turned by the angle of cos c, sin s.
__device__ inline void rotate_pair(float* v, int a, int b, float c, float s) {
  const float v0 = v[a], v1 = v[b];
  v[a] = __fmaf_rn(v0, c, -__fmul_rn(v1, s));
  v[b] = __fmaf_rn(v0, s, __fmul_rn(v1, c));
}

// Pair i of the RoPE index space (q's pairs [rows, n_heads, head_dim / 2] first, then k's)
// rotated in place; says where it was, for the fused kernel's KV write.
struct RopedPair {
  bool is_q;
  std::size_t row, head;  // head within q's or k's heads
  int a, b;               // the two elements of that head's vector
};
__device__ inline RopedPair rope_pair(float* q, float* k, const int* positions, std::size_t q_pairs, int n_heads,
                                     int n_kv_heads, int head_dim, const float* inv_freq, bool half_style,
                                     std::size_t i) {
  const int half = head_dim / 2;
  const bool is_q = i < q_pairs;
  const std::size_t p = is_q ? i : i - q_pairs;
  const int heads = is_q ? n_heads : n_kv_heads;
  const std::size_t j = p % half, rh = p / half;  // rh = row * heads + head
  const float angle = static_cast<float>(positions[rh / heads]) * inv_freq[j];
  const int a = half_style ? static_cast<int>(j) : 2 * static_cast<int>(j), b = half_style ? a + half : a + 1;
  rotate_pair((is_q ? q : k) + rh * head_dim, a, b, cosf(angle), sinf(angle));
  return {is_q, rh / heads, rh % heads, a, b};
}

// silu(g) * u.
__device__ inline float swiglu_value(float g, float u) { return g / (1.0f + expf(-g)) * u; }

// The int8 code of x at the block's 1 / scale (0 when the block is all zero): round half away
// from zero, clamped to [-127, 127] (kernels/ref/matmul_int8.h).
__device__ inline signed char act_code(float x, float inv) {
  return static_cast<signed char>(fminf(fmaxf(roundf(x * inv), -127.0f), 127.0f));
}

// Per-32-block quantisation of the values a warp holds, one per lane, that form one activation
// block (lanes past the row's end pass valid = false): the block's scale s = max|x| / 127 goes
// to *scale (lane 0), each valid lane's code to *code. Called by all 32 lanes.
__device__ inline void quantize_block(float x, bool valid, signed char* code, float* scale) {
  float amax = valid ? fabsf(x) : 0.0f;
  for (int off = 16; off > 0; off >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
  const float s = amax / 127.0f;
  const float inv = s > 0.0f ? 1.0f / s : 0.0f;
  if (threadIdx.x % 32 == 0) *scale = s;
  if (valid) *code = act_code(x, inv);
}

}  // namespace inferlab::cuda::row_ops
