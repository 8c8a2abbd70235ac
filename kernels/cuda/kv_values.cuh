// The stored element types of the KV cache on CUDA (inferlab/paged_kv.h's layouts): f32 values,
// IEEE half (f16) and bfloat16 (bf16), two bytes each. The writers round to nearest even (as
// kv_quantize_row on the host, bit for bit); the readers widen to float in registers, so the
// attention kernels' arithmetic is fp32 whatever the cache holds.
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

namespace inferlab::cuda::detail {

template <class T>
__device__ __forceinline__ T to_kv_value(float x);
template <>
__device__ __forceinline__ float to_kv_value<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __half to_kv_value<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 to_kv_value<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

__device__ __forceinline__ float kv_value_to_float(float x) { return x; }
__device__ __forceinline__ float kv_value_to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float kv_value_to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

}  // namespace inferlab::cuda::detail
