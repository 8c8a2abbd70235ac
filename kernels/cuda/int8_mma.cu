// int8-activation linears (W8A8, W4A8) on IMMA tensor cores (prefill) and a 128-bit __dp4a GEMV
// (decode), plus the scale epilogue of cuBLASLt's int32 GEMM (gemm_lt.cu). The contract is
// quant_act.cu's: y[r, o] = row_scale(o) * sum_b xs[r, b] * block_scale(o, b) * (exact int32 sum
// over block b of xq[r, i] * (q[o, i] - zero(o, b))).
//
// What:
//  - act_mma_kernel: 64 rows x 64 outputs per block, 4 warps of 32 x 32, K steps of 32. Each step
//    stages 32 int8 activations per row (128-bit loads) and 32 weight codes per output (int8 as
//    they are; int4 unpacked in registers to code minus zero point, an s8), then each warp issues
//    8 mma.sync m16n8k32 s8 into int32 accumulators. When the activation block ends (every step
//    for blocks of 32, once per row for SmoothQuant's per-token scale) the int32 sums are scaled
//    by xs and the weights' block scale into fp32 — the same integers as quant_act.cu's __dp4a.
//  - act_gemv128_kernel: one warp per output channel, each lane one 128-bit load of weights per
//    step (16 int8 or 32 int4 codes, inside one activation block) and the matching int8
//    activations of each row (up to kDecodeMaxRows), __dp4a into an exact int32, scaled once
//    per lane and step; a warp-shuffle sum at the end.
// Launch: mma grid (ceil(out / 64), ceil(n / 64)), 128 threads, 6 KiB static shared memory; GEMV
// grid (ceil(out / 4)), 128 threads; epilogue grid-stride, 256 threads.
// Roofline: decode reads out * in (int8) or out * in / 2 (int4) bytes once, plus n * in int8
// activations from L2; prefill does 64 MACs per loaded code on the s8 tensor cores (2x the dense
// bf16 rate on sm_90).
#include <algorithm>
#include <string>

#include "kernels/cuda/check.h"
#include "kernels/cuda/linear_plan.h"
#include "kernels/cuda/mma.cuh"
#include "kernels/cuda/tensor_core_linear.h"

namespace inferlab::cuda {
namespace {

constexpr int kBM = 64, kBN = 64, kBK = 32;
constexpr int kThreads = 128;     // 4 warps as 2 x 2, each 32 rows x 32 outputs
constexpr int kStride = kBK + 16;  // bytes per shared row: 48, conflict-free fragment loads

// 16 int8 codes from p[k..k+15] of a row of `in` (0 past `in`); aligned: one 128-bit load.
__device__ __forceinline__ void load_s8x16(const signed char* row, int k, int in, signed char* dst) {
  if (k + 16 <= in && in % 16 == 0) {
    *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(row + k);
    return;
  }
  for (int j = 0; j < 16; ++j) dst[j] = k + j < in ? row[k + j] : static_cast<signed char>(0);
}

struct Int8Tile {
  Int8Weights w;
  int in;
  // Codes k..k+15 of output o (0 past `in` or `out`); k a multiple of 16.
  __device__ void stage16(int o, int out, int k, signed char* dst) const {
    if (o >= out) {
      *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);
      return;
    }
    load_s8x16(reinterpret_cast<const signed char*>(w.q) + static_cast<long long>(o) * in, k, in, dst);
  }
  __device__ float block_scale(int, int) const { return 1.0f; }
  __device__ float row_scale(int o) const { return w.scale[o]; }
  // 16 codes per lane: one 128-bit load, four __dp4a words.
  static constexpr int kLaneCodes = 16;
  __device__ void lane_words(int o, int k, int* words) const {
    const uint4 v = *reinterpret_cast<const uint4*>(w.q + static_cast<long long>(o) * in + k);
    words[0] = static_cast<int>(v.x), words[1] = static_cast<int>(v.y), words[2] = static_cast<int>(v.z),
    words[3] = static_cast<int>(v.w);
  }
};

struct Int4Tile {
  Int4Weights w;
  int in;
  __device__ int groups() const { return (in + w.group_size - 1) / w.group_size; }
  __device__ int zero_of(int o, int k) const {
    return w.zero ? static_cast<int>(w.zero[static_cast<long long>(o) * groups() + k / w.group_size]) : 8;
  }
  // Codes k..k+15 of output o minus their zero point, as s8 (0 past `in` or `out`).
  __device__ void stage16(int o, int out, int k, signed char* dst) const {
    int c[16] = {};
    if (o < out && k < in) {
      const int z = zero_of(o, k);
      const std::uint8_t* row = w.packed + static_cast<long long>(o) * ((in + 1) / 2);
      if (k + 16 <= in && in % 16 == 0) {
        const uint2 v = *reinterpret_cast<const uint2*>(row + k / 2);
        mma::unpack_codes8(v.x, z, c);
        mma::unpack_codes8(v.y, z, c + 8);
      } else {
        for (int j = 0; j < 16 && k + j < in; ++j) c[j] = ((row[(k + j) / 2] >> (((k + j) & 1) * 4)) & 0xF) - z;
      }
    }
    for (int q = 0; q < 4; ++q)
      reinterpret_cast<std::uint32_t*>(dst)[q] = mma::pack_s8x4(c[4 * q], c[4 * q + 1], c[4 * q + 2], c[4 * q + 3]);
  }
  __device__ float block_scale(int o, int k) const {
    return w.scale[static_cast<long long>(o) * groups() + k / w.group_size];
  }
  __device__ float row_scale(int) const { return 1.0f; }
  // 32 codes per lane (one 32-block, one group): one 128-bit load of nibbles, eight __dp4a words.
  static constexpr int kLaneCodes = 32;
  __device__ void lane_words(int o, int k, int* words) const {
    const uint4 v = *reinterpret_cast<const uint4*>(w.packed + static_cast<long long>(o) * (in / 2) + k / 2);
    const std::uint32_t packed[4] = {v.x, v.y, v.z, v.w};
    const int z = zero_of(o, k);
    for (int q = 0; q < 4; ++q) {
      int c[8];
      mma::unpack_codes8(packed[q], z, c);
      words[2 * q] = static_cast<int>(mma::pack_s8x4(c[0], c[1], c[2], c[3]));
      words[2 * q + 1] = static_cast<int>(mma::pack_s8x4(c[4], c[5], c[6], c[7]));
    }
  }
};

__device__ __forceinline__ std::uint32_t word_at(const signed char* tile, int row, int col) {
  return *reinterpret_cast<const std::uint32_t*>(tile + row * kStride + col);
}

// span: K steps (of 32) that share one activation block, hence one xs and one block scale.
template <class W>
__global__ void __launch_bounds__(kThreads) act_mma_kernel(const signed char* __restrict__ xq,
                                                           const float* __restrict__ xs, int block, int span, W w,
                                                           float* __restrict__ y, int n, int out, int in) {
  __shared__ __align__(16) signed char x_t[kBM * kStride];
  __shared__ __align__(16) signed char w_t[kBN * kStride];
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, wm = warp / 2, wn = warp % 2;
  const int r0 = blockIdx.y * kBM, o0 = blockIdx.x * kBN;
  const int steps = (in + kBK - 1) / kBK, blocks = (in + block - 1) / block;
  const int st_row = tid / 2, st_col = 16 * (tid % 2);
  float acc[2][4][4] = {};
  int part[2][4][4] = {};
  for (int s = 0; s < steps; ++s) {
    const int k0 = s * kBK;
    signed char* xd = x_t + st_row * kStride + st_col;
    if (r0 + st_row < n)
      load_s8x16(xq + static_cast<long long>(r0 + st_row) * in, k0 + st_col, in, xd);
    else
      *reinterpret_cast<uint4*>(xd) = make_uint4(0, 0, 0, 0);
    w.stage16(o0 + st_row, out, k0 + st_col, w_t + st_row * kStride + st_col);
    __syncthreads();
    std::uint32_t b[4][2];
#pragma unroll
    for (int nt = 0; nt < 4; ++nt)
      for (int r = 0; r < 2; ++r)
        b[nt][r] = word_at(w_t, wn * 32 + nt * 8 + mma::b_col(lane), mma::b_k(lane, r, 0, mma::kInt8PerReg));
#pragma unroll
    for (int mt = 0; mt < 2; ++mt) {
      std::uint32_t a[4];
      for (int r = 0; r < 4; ++r)
        a[r] = word_at(x_t, wm * 32 + mt * 16 + mma::a_row(lane, r), mma::a_col(lane, r, 0, mma::kInt8PerReg));
#pragma unroll
      for (int nt = 0; nt < 4; ++nt) mma::mma_s8_16832(part[mt][nt], a, b[nt]);
    }
    __syncthreads();
    if ((s + 1) % span == 0 || s + 1 == steps) {  // the activation block of k0 ends
      const int b_idx = k0 / block;
#pragma unroll
      for (int mt = 0; mt < 2; ++mt)
        for (int nt = 0; nt < 4; ++nt)
          for (int i = 0; i < 4; ++i) {
            const int r = r0 + wm * 32 + mt * 16 + mma::c_row(lane, i), o = o0 + wn * 32 + nt * 8 + mma::c_col(lane, i);
            if (r < n && o < out)
              acc[mt][nt][i] += xs[static_cast<long long>(r) * blocks + b_idx] * w.block_scale(o, k0) *
                                static_cast<float>(part[mt][nt][i]);
            part[mt][nt][i] = 0;
          }
    }
  }
#pragma unroll
  for (int mt = 0; mt < 2; ++mt)
    for (int nt = 0; nt < 4; ++nt)
      for (int i = 0; i < 4; ++i) {
        const int r = r0 + wm * 32 + mt * 16 + mma::c_row(lane, i), o = o0 + wn * 32 + nt * 8 + mma::c_col(lane, i);
        if (r < n && o < out) y[static_cast<long long>(r) * out + o] = acc[mt][nt][i] * w.row_scale(o);
      }
}

constexpr int kGemvWarps = 4;

template <class W>
__global__ void __launch_bounds__(32 * kGemvWarps) act_gemv128_kernel(const signed char* __restrict__ xq,
                                                                        const float* __restrict__ xs, int block, W w,
                                                                        float* __restrict__ y, int n, int out, int in) {
  constexpr int kCodes = W::kLaneCodes, kWords = kCodes / 4;
  const int lane = threadIdx.x % 32;
  const int o = blockIdx.x * kGemvWarps + threadIdx.x / 32;
  if (o >= out) return;  // whole warp
  const int blocks = (in + block - 1) / block;
  float acc[kDecodeMaxRows] = {};
  for (int k = kCodes * lane; k < in; k += kCodes * 32) {
    int wv[kWords];
    w.lane_words(o, k, wv);
    const float ws = w.block_scale(o, k);
    const int b_idx = k / block;
#pragma unroll
    for (int r = 0; r < kDecodeMaxRows; ++r) {
      if (r >= n) break;
      const uint4* xr = reinterpret_cast<const uint4*>(xq + static_cast<long long>(r) * in + k);
      int d = 0;
#pragma unroll
      for (int q = 0; q < kWords / 4; ++q) {
        const uint4 xv = xr[q];
        d = __dp4a(wv[4 * q], static_cast<int>(xv.x), d);
        d = __dp4a(wv[4 * q + 1], static_cast<int>(xv.y), d);
        d = __dp4a(wv[4 * q + 2], static_cast<int>(xv.z), d);
        d = __dp4a(wv[4 * q + 3], static_cast<int>(xv.w), d);
      }
      acc[r] += xs[static_cast<long long>(r) * blocks + b_idx] * ws * static_cast<float>(d);
    }
  }
#pragma unroll
  for (int r = 0; r < kDecodeMaxRows; ++r) {
    float v = acc[r];
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    if (lane == 0 && r < n) y[static_cast<long long>(r) * out + o] = v * w.row_scale(o);
  }
}

template <class W>
void launch_mma(const std::int8_t* xq, const float* xs, int block, W w, float* y, int n, int out, int in,
                CUstream_st* stream) {
  if (n <= 0 || out <= 0) return;
  check(block >= in || (block > 0 && block % kBK == 0),
        "cuda int8-activation mma: block must be a multiple of 32 or the whole row, got " + std::to_string(block));
  const int span = block >= in ? (in + kBK - 1) / kBK : block / kBK;
  const dim3 grid(static_cast<unsigned>((out + kBN - 1) / kBN), static_cast<unsigned>((n + kBM - 1) / kBM));
  act_mma_kernel<<<grid, kThreads, 0, stream>>>(reinterpret_cast<const signed char*>(xq), xs, block, span, w, y, n,
                                                out, in);
  INFERLAB_CUDA_CHECK_LAUNCH(act_mma_kernel);
}

template <class W>
void launch_gemv128(const std::int8_t* xq, const float* xs, int block, W w, float* y, int n, int out, int in,
                    CUstream_st* stream) {
  if (n <= 0 || out <= 0) return;
  constexpr int kCodes = W::kLaneCodes;
  check(n <= kDecodeMaxRows && in % kCodes == 0 && (block >= in || (block > 0 && block % kCodes == 0)),
        "cuda int8-activation gemv128: needs rows <= " + std::to_string(kDecodeMaxRows) +
            ", in and block multiples of " + std::to_string(kCodes) + " (or block >= in); got rows " +
            std::to_string(n) + ", in " + std::to_string(in) + ", block " + std::to_string(block));
  const dim3 grid(static_cast<unsigned>((out + kGemvWarps - 1) / kGemvWarps));
  act_gemv128_kernel<<<grid, 32 * kGemvWarps, 0, stream>>>(reinterpret_cast<const signed char*>(xq), xs, block, w, y,
                                                            n, out, in);
  INFERLAB_CUDA_CHECK_LAUNCH(act_gemv128_kernel);
}

void check_int4_groups(const Int4Weights& w, const char* who) {
  check(w.group_size > 0 && w.group_size % 32 == 0,
        std::string(who) + ": group_size must be a positive multiple of 32, got " + std::to_string(w.group_size));
}

__global__ void scale_int32_kernel(const int* __restrict__ acc, const float* __restrict__ row_scale,
                                   const float* __restrict__ col_scale, float* __restrict__ y, long long total,
                                   int out) {
  for (long long k = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; k < total;
       k += static_cast<long long>(gridDim.x) * blockDim.x)
    y[k] = static_cast<float>(acc[k]) * row_scale[k / out] * col_scale[k % out];
}

}  // namespace

void int8_act_linear_mma(const std::int8_t* xq, const float* xs, int block, Int8Weights w, float* y, int n, int out,
                         int in, CUstream_st* stream) {
  launch_mma(xq, xs, block, Int8Tile{w, in}, y, n, out, in, stream);
}

void int4_act_linear_mma(const std::int8_t* xq, const float* xs, Int4Weights w, float* y, int n, int out, int in,
                         CUstream_st* stream) {
  check_int4_groups(w, "cuda int4_act_linear_mma");
  launch_mma(xq, xs, 32, Int4Tile{w, in}, y, n, out, in, stream);
}

void int8_act_linear_gemv128(const std::int8_t* xq, const float* xs, int block, Int8Weights w, float* y, int n,
                             int out, int in, CUstream_st* stream) {
  launch_gemv128(xq, xs, block, Int8Tile{w, in}, y, n, out, in, stream);
}

void int4_act_linear_gemv128(const std::int8_t* xq, const float* xs, Int4Weights w, float* y, int n, int out,
                             int in, CUstream_st* stream) {
  check_int4_groups(w, "cuda int4_act_linear_gemv128");
  launch_gemv128(xq, xs, 32, Int4Tile{w, in}, y, n, out, in, stream);
}

void scale_int32_output(const std::int32_t* acc, const float* row_scale, const float* col_scale, float* y, int n,
                        int out, CUstream_st* stream) {
  const long long total = static_cast<long long>(n) * out;
  if (total <= 0) return;
  const unsigned blocks = static_cast<unsigned>(std::min<long long>((total + 255) / 256, 65535));
  scale_int32_kernel<<<blocks, 256, 0, stream>>>(reinterpret_cast<const int*>(acc), row_scale, col_scale, y, total,
                                                 out);
  INFERLAB_CUDA_CHECK_LAUNCH(scale_int32_kernel);
}

}  // namespace inferlab::cuda
