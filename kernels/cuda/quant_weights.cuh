// Device-side views of the quantized weight formats, shared by the GEMV, GEMM and int8-activation
// kernels: the dequantised value of one weight, eight consecutive weights, and four raw codes
// packed for __dp4a.
#pragma once
#include <cuda_runtime.h>

#include "kernels/cuda/quant_linear.h"

namespace inferlab::cuda::detail {

// The four bytes at p[0..3] (those at index >= limit read as 0) packed little-endian.
__device__ inline int pack4(const signed char* p, int i, int limit) {
  if (i + 4 <= limit && (reinterpret_cast<unsigned long long>(p + i) & 3) == 0)
    return *reinterpret_cast<const int*>(p + i);
  int word = 0;
  for (int k = 0; k < 4; ++k)
    if (i + k < limit) word |= (static_cast<int>(static_cast<unsigned char>(p[i + k])) << (8 * k));
  return word;
}

struct Int8View {
  Int8Weights w;
  int in;
  static constexpr bool kZeroPoint = false;
  __device__ float at(int o, int i) const {
    return w.scale[o] * static_cast<float>(w.q[static_cast<long long>(o) * in + i]);
  }
  // Weights i..i+7 of row o (0 past `in`); i a multiple of 8.
  __device__ void load8(int o, int i, float* out) const {
    const signed char* row = reinterpret_cast<const signed char*>(w.q) + static_cast<long long>(o) * in;
    const float s = w.scale[o];
    if (i + 8 <= in && in % 8 == 0) {
      const int2 v = *reinterpret_cast<const int2*>(row + i);
      const int words[2] = {v.x, v.y};
      for (int k = 0; k < 8; ++k) out[k] = s * static_cast<float>(static_cast<signed char>(words[k / 4] >> (8 * (k % 4))));
      return;
    }
    for (int k = 0; k < 8; ++k) out[k] = i + k < in ? s * static_cast<float>(row[i + k]) : 0.0f;
  }
  // Codes i..i+3 of row o packed for __dp4a (0 at index >= limit); i a multiple of 4.
  __device__ int word4(int o, int i, int limit) const {
    return pack4(reinterpret_cast<const signed char*>(w.q) + static_cast<long long>(o) * in, i, limit);
  }
  __device__ float block_scale(int, int) const { return 1.0f; }
  __device__ int block_zero(int, int) const { return 0; }
  __device__ float row_scale(int o) const { return w.scale[o]; }
};

struct Int4View {
  Int4Weights w;
  int in;
  static constexpr bool kZeroPoint = true;
  __device__ long long row_bytes() const { return (in + 1) / 2; }
  __device__ int groups() const { return (in + w.group_size - 1) / w.group_size; }
  __device__ int code(int o, int i) const {
    return (w.packed[static_cast<long long>(o) * row_bytes() + i / 2] >> ((i & 1) * 4)) & 0xF;
  }
  __device__ int zero_of(int o, int g) const {
    return w.zero ? static_cast<int>(w.zero[static_cast<long long>(o) * groups() + g]) : 8;
  }
  __device__ float scale_of(int o, int g) const { return w.scale[static_cast<long long>(o) * groups() + g]; }
  __device__ float at(int o, int i) const {
    const int g = i / w.group_size;
    return scale_of(o, g) * static_cast<float>(code(o, i) - zero_of(o, g));
  }
  __device__ void load8(int o, int i, float* out) const {
    const int g = i / w.group_size;  // 8 codes never straddle a group (group_size % 8 == 0)
    const float s = scale_of(o, g);
    const int z = zero_of(o, g);
    if (i + 8 <= in && in % 8 == 0) {
      const unsigned word = *reinterpret_cast<const unsigned*>(w.packed + static_cast<long long>(o) * row_bytes() + i / 2);
      for (int k = 0; k < 8; ++k) out[k] = s * static_cast<float>(static_cast<int>((word >> (4 * k)) & 0xF) - z);
      return;
    }
    for (int k = 0; k < 8; ++k) out[k] = i + k < in ? s * static_cast<float>(code(o, i + k) - z) : 0.0f;
  }
  __device__ int word4(int o, int i, int limit) const {
    int word = 0;
    for (int k = 0; k < 4; ++k)
      if (i + k < limit) word |= code(o, i + k) << (8 * k);
    return word;
  }
  __device__ float block_scale(int o, int i) const { return scale_of(o, i / w.group_size); }
  __device__ int block_zero(int o, int i) const { return zero_of(o, i / w.group_size); }
  __device__ float row_scale(int) const { return 1.0f; }
};

}  // namespace inferlab::cuda::detail
