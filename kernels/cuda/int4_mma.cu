// Weight-only quantized linears with fp32 activations (int4 groups, W4A16; int8 per channel,
// W8A16): bf16 tensor-core tiles for prefill, a 128-bit GEMV for decode. y[n, out] =
// x[n, in] · W^T, w = scale[o, g] * (u - zero[o, g]) or scale[o] * q[o, i] (quant_linear.h).
//
// What:
//  - dequant_mma_kernel (prefill): 64 rows x 64 outputs per block, 4 warps of 32 x 32, K steps of
//    32. Each step stages x as bf16 hi and lo halves (x - hi, so hi + lo keeps ~16 significant
//    bits) and the weights as bf16 integers — int4 codes minus zero points from one 64-bit load of
//    packed nibbles per thread, or int8 codes from one 128-bit load (exact: |code| <= 127).
//    Each warp issues 2 x 8 mma.sync
//    m16n8k16 per k16 (hi and lo against the same codes) into fp32 accumulators, which are
//    multiplied by the scale when its run ends (an int4 group, group_size % 32 == 0; an int8 row)
//    and added to the output accumulators — the scale never enters the tensor cores, so the only rounding is the
//    activations' split and fp32 accumulation.
//  - gemv128_kernel (decode): one warp per output channel, each lane one 128-bit load of codes per
//    step (32 int4 codes of one group, with the group's scale and zero point in registers; or 16
//    int8 codes), codes times x as fp32 FMAs per row (up to kDecodeMaxRows), one scale multiply
//    per step (int4) or per row (int8), a warp-shuffle sum.
// Launch: mma grid (ceil(out / 64), ceil(n / 64)), 128 threads, 15 KiB static shared memory; GEMV
// grid (ceil(out / 4)), 128 threads.
// Roofline: decode reads out * in / 2 bytes of codes + 4 * out * in / group_size of scales (int4)
// or out * in + 4 * out (int8) once
// (x from L2): bound by the HBM stream. Prefill does 2 * 64 MACs per loaded code on bf16 tensor
// cores (hi + lo halve the dense bf16 peak, still ~8x the fp32 CUDA cores of quant_linear.cu).
#include <algorithm>
#include <string>

#include "kernels/cuda/check.h"
#include "kernels/cuda/linear_plan.h"
#include "kernels/cuda/mma.cuh"
#include "kernels/cuda/tensor_core_linear.h"

namespace inferlab::cuda {
namespace {

constexpr int kBM = 64, kBN = 64, kBK = 32;
constexpr int kThreads = 128;      // 4 warps as 2 x 2, each 32 rows x 32 outputs
constexpr int kStride = kBK + 8;   // bf16 per shared row: 80 bytes, conflict-free fragment loads

__device__ __forceinline__ int group_count(int in, int group_size) { return (in + group_size - 1) / group_size; }

// The weight tiles as bf16 integers (exact: |code| <= 127) and the fp32 scale that multiplies a
// run of `steps_per_scale` K steps of 32.
struct Int4Bf16 {
  Int4Weights w;
  int in;
  __device__ int steps_per_scale() const { return w.group_size / kBK; }
  __device__ float scale(int o, int k0) const {
    return w.scale[static_cast<long long>(o) * group_count(in, w.group_size) + k0 / w.group_size];
  }
  // Codes k..k+15 of output o minus their zero point (0 past `in` or `out`); k a multiple of 16,
  // so the 16 codes share one group (group_size % 32 == 0).
  __device__ void stage16(int o, int out, int k, std::uint16_t* dst) const {
    int codes[16] = {};
    if (o < out && k < in) {
      const long long row_bytes = (in + 1) / 2;
      const int z = w.zero ? static_cast<int>(w.zero[static_cast<long long>(o) * group_count(in, w.group_size) +
                                                     k / w.group_size])
                           : 8;
      const std::uint8_t* row = w.packed + static_cast<long long>(o) * row_bytes;
      if (k + 16 <= in && in % 16 == 0) {  // rows of 8-byte multiples: one aligned 64-bit load
        const uint2 v = *reinterpret_cast<const uint2*>(row + k / 2);
        mma::unpack_codes8(v.x, z, codes);
        mma::unpack_codes8(v.y, z, codes + 8);
      } else {
        for (int j = 0; j < 16 && k + j < in; ++j) codes[j] = ((row[(k + j) / 2] >> (((k + j) & 1) * 4)) & 0xF) - z;
      }
    }
#pragma unroll
    for (int j = 0; j < 16; ++j) dst[j] = mma::bf16_bits_rne(static_cast<float>(codes[j]));
  }
};

struct Int8Bf16 {
  Int8Weights w;
  int in;
  __device__ int steps_per_scale() const { return (in + kBK - 1) / kBK; }  // one scale per row
  __device__ float scale(int o, int) const { return w.scale[o]; }
  __device__ void stage16(int o, int out, int k, std::uint16_t* dst) const {
    signed char c[16] = {};
    if (o < out && k < in) {
      const signed char* row = reinterpret_cast<const signed char*>(w.q) + static_cast<long long>(o) * in;
      if (k + 16 <= in && in % 16 == 0)
        *reinterpret_cast<uint4*>(c) = *reinterpret_cast<const uint4*>(row + k);
      else
        for (int j = 0; j < 16 && k + j < in; ++j) c[j] = row[k + j];
    }
#pragma unroll
    for (int j = 0; j < 16; ++j) dst[j] = mma::bf16_bits_rne(static_cast<float>(c[j]));
  }
};

// x[r, k..k+15] split into bf16 hi and lo (0 past `n` or `in`).
__device__ void stage_x16(const float* x, int r, int n, int k, int in, std::uint16_t* hi, std::uint16_t* lo) {
  float v[16];
  if (r < n && k + 16 <= in && in % 4 == 0) {
    const float4* p = reinterpret_cast<const float4*>(x + static_cast<long long>(r) * in + k);
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const float4 f = p[q];
      v[4 * q] = f.x, v[4 * q + 1] = f.y, v[4 * q + 2] = f.z, v[4 * q + 3] = f.w;
    }
  } else {
    for (int j = 0; j < 16; ++j) v[j] = r < n && k + j < in ? x[static_cast<long long>(r) * in + k + j] : 0.0f;
  }
#pragma unroll
  for (int j = 0; j < 16; ++j) mma::split_bf16(v[j], hi[j], lo[j]);
}

__device__ __forceinline__ std::uint32_t word_at(const std::uint16_t* tile, int row, int col) {
  return *reinterpret_cast<const std::uint32_t*>(tile + row * kStride + col);
}

template <class W>
__global__ void __launch_bounds__(kThreads) dequant_mma_kernel(const float* __restrict__ x, W w,
                                                               float* __restrict__ y, int n, int out, int in) {
  __shared__ __align__(16) std::uint16_t x_hi[kBM * kStride];
  __shared__ __align__(16) std::uint16_t x_lo[kBM * kStride];
  __shared__ __align__(16) std::uint16_t w_t[kBN * kStride];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, wm = warp / 2, wn = warp % 2;
  const int r0 = blockIdx.y * kBM, o0 = blockIdx.x * kBN;
  const int steps_per_scale = w.steps_per_scale();
  const int steps = (in + kBK - 1) / kBK;
  const int st_row = tid / 2, st_col = 16 * (tid % 2);  // each thread stages 16 of a row's 32
  float acc[2][4][4] = {}, part[2][4][4] = {};
  for (int s = 0; s < steps; ++s) {
    const int k0 = s * kBK;
    stage_x16(x, r0 + st_row, n, k0 + st_col, in, x_hi + st_row * kStride + st_col, x_lo + st_row * kStride + st_col);
    w.stage16(o0 + st_row, out, k0 + st_col, w_t + st_row * kStride + st_col);
    __syncthreads();
#pragma unroll
    for (int ks = 0; ks < kBK; ks += 16) {
      std::uint32_t b[4][2];
#pragma unroll
      for (int nt = 0; nt < 4; ++nt)
        for (int r = 0; r < 2; ++r)
          b[nt][r] = word_at(w_t, wn * 32 + nt * 8 + mma::b_col(lane), ks + mma::b_k(lane, r, 0, mma::kHalfPerReg));
#pragma unroll
      for (int mt = 0; mt < 2; ++mt) {
        std::uint32_t a_hi[4], a_lo[4];
        for (int r = 0; r < 4; ++r) {
          const int row = wm * 32 + mt * 16 + mma::a_row(lane, r), col = ks + mma::a_col(lane, r, 0, mma::kHalfPerReg);
          a_hi[r] = word_at(x_hi, row, col);
          a_lo[r] = word_at(x_lo, row, col);
        }
#pragma unroll
        for (int nt = 0; nt < 4; ++nt) {
          mma::mma_bf16_16816(part[mt][nt], a_hi, b[nt]);
          mma::mma_bf16_16816(part[mt][nt], a_lo, b[nt]);
        }
      }
    }
    __syncthreads();
    if ((s + 1) % steps_per_scale == 0 || s + 1 == steps) {  // the scale of k0's run ends: apply it
#pragma unroll
      for (int nt = 0; nt < 4; ++nt)
        for (int i = 0; i < 4; ++i) {
          const int o = o0 + wn * 32 + nt * 8 + mma::c_col(lane, i);
          const float sc = o < out ? w.scale(o, k0) : 0.0f;
          for (int mt = 0; mt < 2; ++mt) {
            acc[mt][nt][i] += sc * part[mt][nt][i];
            part[mt][nt][i] = 0.0f;
          }
        }
    }
  }
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
    for (int nt = 0; nt < 4; ++nt)
      for (int i = 0; i < 4; ++i) {
        const int r = r0 + wm * 32 + mt * 16 + mma::c_row(lane, i), o = o0 + wn * 32 + nt * 8 + mma::c_col(lane, i);
        if (r < n && o < out) y[static_cast<long long>(r) * out + o] = acc[mt][nt][i];
      }
}

constexpr int kGemvWarps = 4;

// One 128-bit load of codes per lane and step, dequantised to integers in registers: int4, 32
// codes of one group (its zero point subtracted, its scale applied per step); int8, 16 codes (the
// row scale applied once at the end).
struct Int4Lanes {
  Int4Weights w;
  int in;
  static constexpr int kCodes = 32;
  __device__ float load(int o, int k, int* c) const {
    const uint4 v = *reinterpret_cast<const uint4*>(w.packed + static_cast<long long>(o) * (in / 2) + k / 2);
    const long long cell = static_cast<long long>(o) * group_count(in, w.group_size) + k / w.group_size;
    const int z = w.zero ? static_cast<int>(w.zero[cell]) : 8;
    mma::unpack_codes8(v.x, z, c);
    mma::unpack_codes8(v.y, z, c + 8);
    mma::unpack_codes8(v.z, z, c + 16);
    mma::unpack_codes8(v.w, z, c + 24);
    return w.scale[cell];
  }
  __device__ float row_scale(int) const { return 1.0f; }
};

struct Int8Lanes {
  Int8Weights w;
  int in;
  static constexpr int kCodes = 16;
  __device__ float load(int o, int k, int* c) const {
    const uint4 v = *reinterpret_cast<const uint4*>(w.q + static_cast<long long>(o) * in + k);
    const std::uint32_t words[4] = {v.x, v.y, v.z, v.w};
    for (int j = 0; j < 16; ++j) c[j] = static_cast<signed char>((words[j / 4] >> (8 * (j % 4))) & 0xFFu);
    return 1.0f;
  }
  __device__ float row_scale(int o) const { return w.scale[o]; }
};

template <class W>
__global__ void __launch_bounds__(32 * kGemvWarps) gemv128_kernel(const float* __restrict__ x, W w,
                                                                    float* __restrict__ y, int n, int out, int in) {
  constexpr int kCodes = W::kCodes;
  const int lane = threadIdx.x % 32;
  const int o = blockIdx.x * kGemvWarps + threadIdx.x / 32;
  if (o >= out) return;  // whole warp
  float acc[kDecodeMaxRows] = {};
  for (int k = kCodes * lane; k < in; k += kCodes * 32) {
    int c[kCodes];
    const float s = w.load(o, k, c);
#pragma unroll
    for (int r = 0; r < kDecodeMaxRows; ++r) {
      if (r >= n) break;
      const float4* xr = reinterpret_cast<const float4*>(x + static_cast<long long>(r) * in + k);
      float d = 0.0f;
#pragma unroll
      for (int q = 0; q < kCodes / 4; ++q) {
        const float4 f = xr[q];
        d += static_cast<float>(c[4 * q]) * f.x + static_cast<float>(c[4 * q + 1]) * f.y +
             static_cast<float>(c[4 * q + 2]) * f.z + static_cast<float>(c[4 * q + 3]) * f.w;
      }
      acc[r] += s * d;
    }
  }
  const float rs = w.row_scale(o);
#pragma unroll
  for (int r = 0; r < kDecodeMaxRows; ++r) {
    float v = acc[r];
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    if (lane == 0 && r < n) y[static_cast<long long>(r) * out + o] = v * rs;
  }
}

template <class W>
void launch_gemv128(const float* x, W w, float* y, int n, int out, int in, CUstream_st* stream) {
  const dim3 grid(static_cast<unsigned>((out + kGemvWarps - 1) / kGemvWarps));
  gemv128_kernel<<<grid, 32 * kGemvWarps, 0, stream>>>(x, w, y, n, out, in);
  INFERLAB_CUDA_CHECK_LAUNCH(gemv128_kernel);
}

template <class W>
void launch_mma(const float* x, W w, float* y, int n, int out, int in, CUstream_st* stream) {
  const dim3 grid(static_cast<unsigned>((out + kBN - 1) / kBN), static_cast<unsigned>((n + kBM - 1) / kBM));
  dequant_mma_kernel<<<grid, kThreads, 0, stream>>>(x, w, y, n, out, in);
  INFERLAB_CUDA_CHECK_LAUNCH(dequant_mma_kernel);
}

}  // namespace

void int4_linear_mma(const float* x, Int4Weights w, float* y, int n, int out, int in, CUstream_st* stream) {
  if (n <= 0 || out <= 0) return;
  check(w.group_size > 0 && w.group_size % kBK == 0,
        "cuda int4_linear_mma: group_size must be a positive multiple of 32, got " + std::to_string(w.group_size));
  launch_mma(x, Int4Bf16{w, in}, y, n, out, in, stream);
}

void int8_linear_mma(const float* x, Int8Weights w, float* y, int n, int out, int in, CUstream_st* stream) {
  if (n <= 0 || out <= 0) return;
  launch_mma(x, Int8Bf16{w, in}, y, n, out, in, stream);
}

void int4_linear_gemv128(const float* x, Int4Weights w, float* y, int n, int out, int in, CUstream_st* stream) {
  if (n <= 0 || out <= 0) return;
  check(n <= kDecodeMaxRows && in % 32 == 0 && w.group_size > 0 && w.group_size % 32 == 0,
        "cuda int4_linear_gemv128: needs rows <= " + std::to_string(kDecodeMaxRows) +
            ", in and group_size multiples of 32; got rows " + std::to_string(n) + ", in " + std::to_string(in) +
            ", group_size " + std::to_string(w.group_size));
  launch_gemv128(x, Int4Lanes{w, in}, y, n, out, in, stream);
}

void int8_linear_gemv128(const float* x, Int8Weights w, float* y, int n, int out, int in, CUstream_st* stream) {
  if (n <= 0 || out <= 0) return;
  check(n <= kDecodeMaxRows && in % 16 == 0,
        "cuda int8_linear_gemv128: needs rows <= " + std::to_string(kDecodeMaxRows) +
            " and in a multiple of 16; got rows " + std::to_string(n) + ", in " + std::to_string(in));
  launch_gemv128(x, Int8Lanes{w, in}, y, n, out, in, stream);
}

}  // namespace inferlab::cuda
