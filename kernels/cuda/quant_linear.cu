// Weight-only quantized linears on CUDA (int8 per channel, int4 groups), fp32 activations.
//
// What: y[n, out] = x[n, in] · W^T with W dequantised on the fly — never materialised in fp32.
//  - GEMV (n <= 16, decode): one warp per output channel; each lane loads 8 weights at a time
//    (one 8-byte int8 load or one 4-byte word of int4 codes), dequantises them in registers and
//    FMAs them against up to 16 activation rows (register accumulators), then a warp-shuffle sum.
//  - GEMM (n > 16, prefill): 64 x 64 output tiles, 256 threads of 4 x 4 outputs; each K step of
//    16 stages an x tile and the *dequantised* W tile in shared memory (the fused alternative to
//    dequantise-then-cuBLAS: no fp32 scratch copy of W, no extra pass over memory).
// Launch: GEMV grid (ceil(out / 4), ceil(n / 16)), 128 threads; GEMM grid (ceil(out / 64),
// ceil(n / 64)), 256 threads, 8 KiB static shared memory.
// Roofline: decode is bound by the weight stream: out * in bytes (+ 4 * out scales) for int8,
// out * in / 2 (+ 4 * out * in / group_size scales, + as many zero bytes / 4 asymmetric) for
// int4 — 4x / ~7x fewer than fp32 — plus n * in * 4 bytes of x (read from L2 by every warp).
// Prefill tiles do 64 FMAs per loaded weight element: compute bound on fp32 CUDA cores
// (cuBLAS on tensor cores would be faster; not used so W stays compressed).
#include <algorithm>

#include "kernels/cuda/check.h"
#include "kernels/cuda/quant_weights.cuh"

namespace inferlab::cuda {

namespace {

constexpr int kGemvThreads = 128;
constexpr int kGemvWarps = kGemvThreads / 32;

template <class W>
__global__ void dequant_gemv_kernel(const float* x, W w, float* y, int n, int out, int in) {
  const int lane = threadIdx.x % 32;
  const int o = blockIdx.x * kGemvWarps + threadIdx.x / 32;
  if (o >= out) return;  // whole warp
  const int r0 = blockIdx.y * kGemvRows;
  const int nr = min(kGemvRows, n - r0);
  const bool x_vec = in % 4 == 0;  // rows of x are 16-byte aligned: float4 loads
  float acc[kGemvRows] = {};
  for (int i = 8 * lane; i < in; i += 8 * 32) {
    float wv[8];
    w.load8(o, i, wv);
#pragma unroll
    for (int r = 0; r < kGemvRows; ++r) {
      if (r >= nr) break;
      const float* xr = x + static_cast<long long>(r0 + r) * in + i;
      if (x_vec && i + 8 <= in) {
        const float4 a = *reinterpret_cast<const float4*>(xr), b = *reinterpret_cast<const float4*>(xr + 4);
        acc[r] += wv[0] * a.x + wv[1] * a.y + wv[2] * a.z + wv[3] * a.w + wv[4] * b.x + wv[5] * b.y + wv[6] * b.z +
                  wv[7] * b.w;
      } else {
        for (int k = 0; k < 8 && i + k < in; ++k) acc[r] += wv[k] * xr[k];
      }
    }
  }
#pragma unroll
  for (int r = 0; r < kGemvRows; ++r) {
    float v = acc[r];
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    if (lane == 0 && r < nr) y[static_cast<long long>(r0 + r) * out + o] = v;
  }
}

constexpr int kTile = 64;  // rows and output channels per GEMM block
constexpr int kTileK = 16;

template <class W>
__global__ void dequant_gemm_kernel(const float* x, W w, float* y, int n, int out, int in) {
  __shared__ float xs[kTileK][kTile];  // [k, row]
  __shared__ float ws[kTileK][kTile];  // [k, output channel], dequantised
  const int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
  const int r0 = blockIdx.y * kTile, o0 = blockIdx.x * kTile;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < in; k0 += kTileK) {
    for (int e = tid; e < kTile * kTileK; e += blockDim.x) {
      const int kk = e % kTileK, rr = e / kTileK;  // consecutive threads walk k: coalesced x rows
      const int i = k0 + kk;
      xs[kk][rr] = (r0 + rr < n && i < in) ? x[static_cast<long long>(r0 + rr) * in + i] : 0.0f;
      ws[kk][rr] = (o0 + rr < out && i < in) ? w.at(o0 + rr, i) : 0.0f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kTileK; ++kk) {
      float a[4], b[4];
      for (int u = 0; u < 4; ++u) a[u] = xs[kk][ty * 4 + u];
      for (int u = 0; u < 4; ++u) b[u] = ws[kk][tx * 4 + u];
      for (int u = 0; u < 4; ++u)
        for (int v = 0; v < 4; ++v) acc[u][v] += a[u] * b[v];
    }
    __syncthreads();
  }
  for (int u = 0; u < 4; ++u)
    for (int v = 0; v < 4; ++v) {
      const int r = r0 + ty * 4 + u, o = o0 + tx * 4 + v;
      if (r < n && o < out) y[static_cast<long long>(r) * out + o] = acc[u][v];
    }
}

template <class W>
void dequant_linear(const float* x, W w, float* y, int n, int out, int in, CUstream_st* stream) {
  if (n <= 0 || out <= 0) return;
  if (n <= kGemvRows) {
    const dim3 grid(static_cast<unsigned>((out + kGemvWarps - 1) / kGemvWarps), 1);
    dequant_gemv_kernel<<<grid, kGemvThreads, 0, stream>>>(x, w, y, n, out, in);
  } else {
    const dim3 grid(static_cast<unsigned>((out + kTile - 1) / kTile), static_cast<unsigned>((n + kTile - 1) / kTile));
    dequant_gemm_kernel<<<grid, 256, 0, stream>>>(x, w, y, n, out, in);
  }
  INFERLAB_CUDA_CHECK_LAUNCH(dequant_gemm_kernel);
}

}  // namespace

void int8_linear(const float* x, Int8Weights w, float* y, int n, int out, int in, CUstream_st* stream) {
  dequant_linear(x, detail::Int8View{w, in}, y, n, out, in, stream);
}

void int4_linear(const float* x, Int4Weights w, float* y, int n, int out, int in, CUstream_st* stream) {
  check(w.group_size > 0 && w.group_size % 8 == 0,
        "cuda int4_linear: group_size must be a positive multiple of 8, got " + std::to_string(w.group_size));
  dequant_linear(x, detail::Int4View{w, in}, y, n, out, in, stream);
}

}  // namespace inferlab::cuda
