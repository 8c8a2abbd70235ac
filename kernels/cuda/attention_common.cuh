// Device helpers shared by the paged-attention kernels: finding a row's sequence, resolving a
// position through the block table, and loading one K/V element as float (int8 codes times
// their (slot, kv head) scale, so quantised KV is dequantised in the tile loop).
#pragma once
#include <cuda_runtime.h>

#include "kernels/cuda/attention.h"

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

// Element c of the K (or V) vector of kv head h at `slot`, as float.
__device__ inline float kv_load(const void* base, const float* scale, bool int8, long long slot, int n_kv_heads,
                                int h, int head_dim, int c) {
  const long long cell = slot * n_kv_heads + h;
  if (!int8) return static_cast<const float*>(base)[cell * head_dim + c];
  return scale[cell] * static_cast<float>(static_cast<const signed char*>(base)[cell * head_dim + c]);
}

}  // namespace inferlab::cuda::detail
