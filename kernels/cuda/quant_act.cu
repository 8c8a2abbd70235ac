// int8-activation linears on CUDA: W8A8 (int8 weights, SmoothQuant or int8 with activations =
// "int8") and W4A8 (int4 groups with activations = "int8").
//
// What: (1) quantize_activations: one thread block per (row, activation block) takes
// max|x ⊙ s⁻¹| (block reduction), scale = max / 127, codes = round(x / scale) — per 32-block
// (llama.cpp Q8_0, the CPU kernels' format) or per token (block = in, SmoothQuant).
// (2) a GEMV with integer dot products: one warp per output channel; an activation block is
// covered by L lanes (L = 8 for blocks of 32, 32 for per-token) that each __dp4a four int8 weights
// (or four int4 codes widened to bytes) against four int8 activations into an int32, an exact
// integer block sum after an L-lane shuffle reduction; for int4 a second __dp4a against 0x01010101
// gives sum(xq) for the zero-point term. Block sums are scaled in fp32 (xs · group scale) and
// summed over the warp. Rows go 16 at a time (grid.y), so prefill re-reads the weights once per
// 16 rows.
// Launch: quantize grid (n, blocks per row), 128 threads; GEMV grid (ceil(out / 4),
// ceil(n / 16)), 128 threads.
// Roofline: the weight stream as in quant_linear.cu (out * in or out * in / 2 bytes) plus
// n * in int8 activations (a quarter of fp32 x); __dp4a does 4 MACs per instruction, so decode
// stays bandwidth bound.
#include <algorithm>

#include "kernels/cuda/check.h"
#include "kernels/cuda/quant_weights.cuh"

namespace inferlab::cuda {

namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;

__global__ void quantize_activations_kernel(const float* x, const float* inv_smooth, int in, int block,
                                            signed char* xq, float* xs) {
  __shared__ float red[kWarps];
  const int r = blockIdx.x, b = blockIdx.y, blocks = gridDim.y;
  const int i0 = b * block, i1 = min(in, i0 + block);
  const float* xr = x + static_cast<long long>(r) * in;
  float amax = 0.0f;
  for (int i = i0 + threadIdx.x; i < i1; i += blockDim.x)
    amax = fmaxf(amax, fabsf(inv_smooth ? xr[i] * inv_smooth[i] : xr[i]));
  for (int off = 16; off > 0; off >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
  if (threadIdx.x % 32 == 0) red[threadIdx.x / 32] = amax;
  __syncthreads();
  amax = red[0];
  for (int w = 1; w < kWarps; ++w) amax = fmaxf(amax, red[w]);
  const float s = amax / 127.0f;
  const float inv = s > 0.0f ? 1.0f / s : 0.0f;
  if (threadIdx.x == 0) xs[static_cast<long long>(r) * blocks + b] = s;
  for (int i = i0 + threadIdx.x; i < i1; i += blockDim.x) {
    const float v = inv_smooth ? xr[i] * inv_smooth[i] : xr[i];
    xq[static_cast<long long>(r) * in + i] = static_cast<signed char>(fminf(fmaxf(roundf(v * inv), -127.0f), 127.0f));
  }
}

// lanes_per_block: a power of two in [1, 32] (see the file comment).
template <class W>
__global__ void int8_act_gemv_kernel(const signed char* xq, const float* xs, int block, int lanes_per_block, W w,
                                     float* y, int n, int out, int in) {
  const int lane = threadIdx.x % 32;
  const int o = blockIdx.x * kWarps + threadIdx.x / 32;
  if (o >= out) return;  // whole warp
  const int r0 = blockIdx.y * kGemvRows;
  const int nr = min(kGemvRows, n - r0);
  const int blocks = (in + block - 1) / block;
  const int L = lanes_per_block, per_pass = 32 / L;
  float acc[kGemvRows] = {};
  for (int b0 = 0; b0 < blocks; b0 += per_pass) {
    const int b = b0 + lane / L;
    const bool active = b < blocks;
    const int i0 = b * block, i1 = active ? min(in, i0 + block) : i0;
    int dot[kGemvRows] = {}, xsum[kGemvRows] = {};
    for (int i = i0 + 4 * (lane % L); i < i1; i += 4 * L) {
      const int wword = w.word4(o, i, i1);
#pragma unroll
      for (int r = 0; r < kGemvRows; ++r) {
        if (r >= nr) break;
        const int xword = detail::pack4(xq + static_cast<long long>(r0 + r) * in, i, i1);
        dot[r] = __dp4a(wword, xword, dot[r]);
        if (W::kZeroPoint) xsum[r] = __dp4a(0x01010101, xword, xsum[r]);
      }
    }
    // Exact int32 block sums over the block's L lanes.
#pragma unroll
    for (int r = 0; r < kGemvRows; ++r) {
      for (int off = L / 2; off > 0; off >>= 1) {
        dot[r] += __shfl_xor_sync(0xffffffffu, dot[r], off);
        if (W::kZeroPoint) xsum[r] += __shfl_xor_sync(0xffffffffu, xsum[r], off);
      }
      if (active && lane % L == 0 && r < nr) {
        const int integer = dot[r] - w.block_zero(o, i0) * xsum[r];
        acc[r] += xs[static_cast<long long>(r0 + r) * blocks + b] * w.block_scale(o, i0) * static_cast<float>(integer);
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kGemvRows; ++r) {
    float v = acc[r];
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    if (lane == 0 && r < nr) y[static_cast<long long>(r0 + r) * out + o] = v * w.row_scale(o);
  }
}

template <class W>
void act_linear(const std::int8_t* xq, const float* xs, int block, W w, float* y, int n, int out, int in,
                CUstream_st* stream) {
  if (n <= 0 || out <= 0) return;
  // Every block but a single whole-row one must start on a 4-byte boundary of the codes.
  check(block > 0 && (block % 4 == 0 || block >= in),
        "cuda int8-activation linear: block must be a positive multiple of 4 (or the whole row), got " +
            std::to_string(block));
  int lanes = 1;
  while (lanes < 32 && lanes * 4 < block) lanes *= 2;
  const dim3 grid(static_cast<unsigned>((out + kWarps - 1) / kWarps),
                  static_cast<unsigned>((n + kGemvRows - 1) / kGemvRows));
  int8_act_gemv_kernel<<<grid, kThreads, 0, stream>>>(reinterpret_cast<const signed char*>(xq), xs, block, lanes, w,
                                                      y, n, out, in);
  INFERLAB_CUDA_CHECK_LAUNCH(int8_act_gemv_kernel);
}

__global__ void scale_columns_kernel(const float* x, const float* s, float* y, long long total, int in) {
  for (long long k = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; k < total;
       k += static_cast<long long>(gridDim.x) * blockDim.x)
    y[k] = x[k] * s[k % in];
}

}  // namespace

void scale_columns(const float* x, const float* s, float* y, int n, int in, CUstream_st* stream) {
  const long long total = static_cast<long long>(n) * in;
  if (total <= 0) return;
  const unsigned blocks = static_cast<unsigned>(std::min<long long>((total + 255) / 256, 65535));
  scale_columns_kernel<<<blocks, 256, 0, stream>>>(x, s, y, total, in);
  INFERLAB_CUDA_CHECK_LAUNCH(scale_columns_kernel);
}

void quantize_activations(const float* x, const float* inv_smooth, int n, int in, int block, std::int8_t* xq,
                          float* xs, CUstream_st* stream) {
  if (n <= 0 || in <= 0) return;
  check(block > 0, "cuda quantize_activations: block must be positive");
  const dim3 grid(static_cast<unsigned>(n), static_cast<unsigned>((in + block - 1) / block));
  quantize_activations_kernel<<<grid, kThreads, 0, stream>>>(x, inv_smooth, in, block,
                                                             reinterpret_cast<signed char*>(xq), xs);
  INFERLAB_CUDA_CHECK_LAUNCH(quantize_activations_kernel);
}

void int8_act_linear(const std::int8_t* xq, const float* xs, int block, Int8Weights w, float* y, int n, int out,
                     int in, CUstream_st* stream) {
  act_linear(xq, xs, block, detail::Int8View{w, in}, y, n, out, in, stream);
}

void int4_act_linear(const std::int8_t* xq, const float* xs, Int4Weights w, float* y, int n, int out, int in,
                     CUstream_st* stream) {
  check(w.group_size % 32 == 0, "cuda int4_act_linear: group_size must be a multiple of 32, got " +
                                    std::to_string(w.group_size));
  act_linear(xq, xs, 32, detail::Int4View{w, in}, y, n, out, in, stream);
}

}  // namespace inferlab::cuda
