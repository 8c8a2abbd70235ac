// Split-K paged attention (Flash-Decoding, Dao et al. 2023) on CUDA: the merge pass.
//
// What: a decode (or speculative-verify) sequence has few query rows, so the tiled kernel alone
// would give it only n_kv_heads thread blocks — far too few to fill a GPU at long context. The
// split pass cuts its context into `splits` chunks and runs each chunk as its own tiled item
// (attention_flash.cu, grid (items, n_kv_heads)), leaving an un-normalised softmax state
// (running max m_j, denominator l_j, weighted V sum a_j) per query vector and chunk. This file's
// kernel merges them: M = max_j m_j, out = sum_j e^(m_j - M) a_j / sum_j e^(m_j - M) l_j.
// Launch (merge): grid (merges, n_kv_heads), 128 threads, one warp per query vector, lanes over
// head_dim; no shared memory.
// Roofline: the split pass moves the same K/V bytes as flash (2 * ctx * kv_dim * b per decode
// token and layer) but over splits * n_kv_heads blocks, so it can run at HBM bandwidth; the
// merge adds splits * (head_dim + 2) * 4 bytes written and read per query vector, small next to
// the K/V stream when ctx / splits >> 1.
#include <cmath>

#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/check.h"

namespace inferlab::cuda {

namespace {

constexpr int kMergeThreads = 128;

__global__ void merge_partial_kernel(PagedBatch b, const AttentionMerge* merges, PartialState state, float* out) {
  const AttentionMerge mg = merges[blockIdx.x];
  const int kvh = blockIdx.y, d = b.head_dim, group = b.n_heads / b.n_kv_heads;
  const int nv = mg.rows * group;
  const int q0 = b.query_start[mg.seq];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  for (int v = warp; v < nv; v += warps) {
    // Split j's state of this vector sits at vector base + j * stride.
    const long long base = static_cast<long long>(mg.partial) + static_cast<long long>(kvh) * nv + v;
    const long long stride = static_cast<long long>(b.n_kv_heads) * nv;
    float big = -INFINITY;
    for (int j = 0; j < mg.splits; ++j) big = fmaxf(big, state.max[base + j * stride]);
    float denom = 0.0f;
    for (int j = 0; j < mg.splits; ++j) {
      const float m = state.max[base + j * stride];
      if (m != -INFINITY) denom += expf(m - big) * state.denom[base + j * stride];
    }
    const int row = q0 + mg.row_begin + v / group, h = kvh * group + v % group;
    float* o = out + (static_cast<long long>(row) * b.n_heads + h) * d;
    for (int c = lane; c < d; c += 32) {
      float acc = 0.0f;
      for (int j = 0; j < mg.splits; ++j) {
        const float m = state.max[base + j * stride];
        if (m != -INFINITY) acc += expf(m - big) * state.acc[(base + j * stride) * d + c];
      }
      o[c] = acc / denom;
    }
  }
}

}  // namespace

void merge_partial_attention(const PagedBatch& batch, const AttentionMerge* merges, int n_merges,
                             PartialState state, float* out, CUstream_st* stream) {
  if (n_merges <= 0) return;
  const dim3 grid(static_cast<unsigned>(n_merges), static_cast<unsigned>(batch.n_kv_heads));
  merge_partial_kernel<<<grid, kMergeThreads, 0, stream>>>(batch, merges, state, out);
  INFERLAB_CUDA_CHECK_LAUNCH(merge_partial_kernel);
}

}  // namespace inferlab::cuda
