// Device helpers shared by the paged-attention kernels: finding a row's sequence, resolving a
// position through the block table, and loading one K/V element as float (f16 / bf16 widened
// in registers, int8 codes times their (slot, kv head) scale, so quantised KV is dequantised in
// the tile loop; no dequantised copy of the cache exists).
#pragma once
#include <cuda_runtime.h>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/kv_values.cuh"

namespace inferlab::cuda::detail {

constexpr unsigned kFullMask = 0xffffffffu;

__device__ inline float warp_sum(float x) {
  for (int o = 16; o > 0; o >>= 1) x += __shfl_xor_sync(kFullMask, x, o);
  return x;
}
__device__ inline float warp_max(float x) {
  for (int o = 16; o > 0; o >>= 1) x = fmaxf(x, __shfl_xor_sync(kFullMask, x, o));
  return x;
}

// The sequence that owns batch row `row`: the s with query_start[s] <= row < query_start[s+1]
// (binary search; empty sequences are skipped because their range is empty).
__device__ inline int seq_of_row(const PagedBatch& b, int row) {
  int lo = 0, hi = b.n_seqs - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (b.query_start[mid] <= row) lo = mid; else hi = mid - 1;
  }
  return lo;
}

// Physical slot of logical position p of sequence s.
__device__ inline long long slot_of(const PagedBatch& b, const PagedKv& kv, int s, int p) {
  const int block = b.block_table[static_cast<long long>(s) * b.max_blocks + p / kv.block_size];
  return static_cast<long long>(block) * kv.block_size + p % kv.block_size;
}

// Element c of the K (or V) vector of kv head h at `slot`, stored as `dtype`, as float. The
// branch is uniform over a launch (one dtype per side and layer).
__device__ inline float kv_load(const void* base, const float* scale, KvDtype dtype, long long slot, int n_kv_heads,
                                int h, int head_dim, int c) {
  const long long at = (slot * n_kv_heads + h) * head_dim + c;
  switch (dtype) {
    case KvDtype::kF16: return kv_value_to_float(static_cast<const __half*>(base)[at]);
    case KvDtype::kBf16: return kv_value_to_float(static_cast<const __nv_bfloat16*>(base)[at]);
    case KvDtype::kInt8:
      return scale[slot * n_kv_heads + h] * static_cast<float>(static_cast<const signed char*>(base)[at]);
    default: return static_cast<const float*>(base)[at];
  }
}

// Elements c and c + 1 of the K (or V) vector of kv head h at `slot` of an f16 / bf16 side, as
// floats, from one 4-byte load (c and head_dim even, so the pair is 4-byte aligned).
__device__ inline float2 kv_load_half_pair(const void* base, KvDtype dtype, long long slot, int n_kv_heads, int h,
                                           int head_dim, int c) {
  const long long pair = ((slot * n_kv_heads + h) * head_dim + c) / 2;
  if (dtype == KvDtype::kF16) return __half22float2(static_cast<const __half2*>(base)[pair]);
  return __bfloat1622float2(static_cast<const __nv_bfloat162*>(base)[pair]);
}

}  // namespace inferlab::cuda::detail
