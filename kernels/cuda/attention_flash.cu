// Tiled paged attention with online softmax (FlashAttention-2 style) on CUDA; also the split
// pass of Flash-Decoding (attention_split_k.cu launches it with partial states).
//
// What: one thread block takes one work item (a tile of query rows of one sequence, every query
// head of one kv head's GQA group, against a range of K/V positions). It stages the item's
// queries in shared memory, then streams the K/V range in tiles of `tile` positions through the
// block table into shared memory (f16 / bf16 widened to float in registers, two values per
// 4-byte load; int8 codes dequantised by their (slot, kv head) scale while loading). Each warp
// owns some query vectors: lane j scores position j of a 32-position chunk (dot product against
// the shared K row), the warp takes the chunk max (shuffle), rescales its running max /
// denominator / accumulator and adds p_j * V_j with lanes over head_dim. No score row over the
// context exists; every K/V tile is read from global memory once for all (rows x group) vectors
// of the item.
// Launch: grid (items, n_kv_heads), 128 threads (4 warps); dynamic shared memory
// tiled_attention_shared_bytes(): Q and accumulators [rows * group, head_dim] twice, a K tile
// [tile, head_dim + 1] (padded: no bank conflicts when lanes walk K rows), a V tile
// [tile, head_dim], running max / denominator, per-warp probabilities.
// Roofline: K/V bytes per item = 2 * positions * head_dim * b (b = 4 f32, 2 f16 / bf16,
// 1 + 4 / head_dim int8),
// shared by rows * group query vectors: a decode token of a GQA model reads each kv head once
// (n_heads / n_kv_heads times less than naive). Decode is bandwidth bound at
// 2 * ctx * kv_dim * b bytes per token and layer; prefill tiles reach rows * group flops per
// loaded K/V element, so large query_rows moves them toward the compute roof.
#include <algorithm>
#include <cfloat>
#include <cmath>

#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/check.h"

namespace inferlab::cuda {

namespace {

constexpr int kTiledThreads = 128;
constexpr int kTiledWarps = kTiledThreads / 32;

__global__ void tiled_attention_kernel(PagedBatch b, PagedKv kv, const float* q, float* out, const AttentionItem* items,
                                       int max_vectors, int tile, PartialState state) {
  extern __shared__ float smem[];
  const int d = b.head_dim, group = b.n_heads / b.n_kv_heads;
  float* q_s = smem;                          // [max_vectors, d]
  float* o_s = q_s + max_vectors * d;         // [max_vectors, d] un-normalised output
  float* m_s = o_s + max_vectors * d;         // [max_vectors] running max
  float* l_s = m_s + max_vectors;             // [max_vectors] running denominator
  float* k_s = l_s + max_vectors;             // [tile, d + 1]
  float* v_s = k_s + tile * (d + 1);          // [tile, d]
  float* p_s = v_s + tile * d;                // [warps, 32] probabilities of a chunk

  const AttentionItem item = items[blockIdx.x];
  const int kvh = blockIdx.y;
  const int s = item.seq;
  const int q0 = b.query_start[s];
  const int n_q = b.query_start[s + 1] - q0;
  const int ctx = b.context_len[s];
  const int nv = (item.row_end - item.row_begin) * group;
  const int first_pos = ctx - n_q;  // position of local row 0
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;

  for (int i = threadIdx.x; i < nv * d; i += blockDim.x) {
    const int v = i / d, c = i % d;
    const int row = q0 + item.row_begin + v / group, h = kvh * group + v % group;
    q_s[i] = q[(static_cast<long long>(row) * b.n_heads + h) * d + c];
    o_s[i] = 0.0f;
  }
  for (int v = threadIdx.x; v < nv; v += blockDim.x) {
    m_s[v] = -INFINITY;
    l_s[v] = 0.0f;
  }
  const bool half_pairs = d % 2 == 0 && (kv.k_dtype == KvDtype::kF16 || kv.k_dtype == KvDtype::kBf16) &&
                          (kv.v_dtype == KvDtype::kF16 || kv.v_dtype == KvDtype::kBf16);
  // No row of the item sees past its last row's position.
  const int pos_end = min(item.pos_end, first_pos + item.row_end);

  for (int t0 = item.pos_begin; t0 < pos_end; t0 += tile) {
    const int tn = min(tile, pos_end - t0);
    __syncthreads();  // the previous tile is consumed (and Q staged, on the first pass)
    if (half_pairs) {  // f16 / bf16 on both sides: two values per 4-byte load, widened in registers
      for (int i = threadIdx.x; i < tn * d / 2; i += blockDim.x) {
        const int j = 2 * i / d, c = 2 * i % d;
        const long long slot = detail::slot_of(b, kv, s, t0 + j);
        const float2 kp = detail::kv_load_half_pair(kv.k, kv.k_dtype, slot, b.n_kv_heads, kvh, d, c);
        const float2 vp = detail::kv_load_half_pair(kv.v, kv.v_dtype, slot, b.n_kv_heads, kvh, d, c);
        k_s[j * (d + 1) + c] = kp.x;
        k_s[j * (d + 1) + c + 1] = kp.y;
        v_s[j * d + c] = vp.x;
        v_s[j * d + c + 1] = vp.y;
      }
    } else {
      for (int i = threadIdx.x; i < tn * d; i += blockDim.x) {
        const int j = i / d, c = i % d;
        const long long slot = detail::slot_of(b, kv, s, t0 + j);
        k_s[j * (d + 1) + c] = detail::kv_load(kv.k, kv.k_scale, kv.k_dtype, slot, b.n_kv_heads, kvh, d, c);
        v_s[j * d + c] = detail::kv_load(kv.v, kv.v_scale, kv.v_dtype, slot, b.n_kv_heads, kvh, d, c);
      }
    }
    __syncthreads();
    float* p_w = p_s + warp * 32;
    for (int v = warp; v < nv; v += kTiledWarps) {
      const int row_pos = first_pos + item.row_begin + v / group;  // sees positions <= row_pos
      const float* qv = q_s + v * d;
      float* ov = o_s + v * d;
      float m = m_s[v], l = l_s[v];
      for (int j0 = 0; j0 < tn; j0 += 32) {
        const int j = j0 + lane;
        const bool valid = j < tn && t0 + j <= row_pos;
        float score = -INFINITY;
        if (valid) {
          const float* kj = k_s + j * (d + 1);
          float dot = 0.0f;
          for (int c = 0; c < d; ++c) dot += qv[c] * kj[c];
          score = dot * b.scale;
        }
        const float chunk_max = detail::warp_max(score);
        if (chunk_max == -INFINITY) continue;  // warp-uniform: nothing visible in this chunk
        const float m_new = fmaxf(m, chunk_max);
        const float alpha = expf(m - m_new);  // 0 while m is still -inf
        const float p = valid ? expf(score - m_new) : 0.0f;
        l = l * alpha + detail::warp_sum(p);
        p_w[lane] = p;
        __syncwarp();
        const int jn = min(32, tn - j0);
        for (int c = lane; c < d; c += 32) {
          float acc = ov[c] * alpha;
          for (int jj = 0; jj < jn; ++jj) acc += p_w[jj] * v_s[(j0 + jj) * d + c];
          ov[c] = acc;
        }
        __syncwarp();  // p_w is rewritten by the next chunk
        m = m_new;
      }
      __syncwarp();  // every lane has read m_s[v] / l_s[v] (above) before lane 0 rewrites them
      if (lane == 0) {
        m_s[v] = m;
        l_s[v] = l;
      }
    }
  }
  __syncthreads();

  for (int i = threadIdx.x; i < nv * d; i += blockDim.x) {
    const int v = i / d, c = i % d;
    if (item.partial < 0) {
      const int row = q0 + item.row_begin + v / group, h = kvh * group + v % group;
      out[(static_cast<long long>(row) * b.n_heads + h) * d + c] = o_s[i] / l_s[v];
    } else {
      const long long at = static_cast<long long>(item.partial) + static_cast<long long>(kvh) * nv + v;
      state.acc[at * d + c] = o_s[i];
      if (c == 0) {
        state.max[at] = m_s[v];
        state.denom[at] = l_s[v];
      }
    }
  }
}

}  // namespace

std::size_t tiled_attention_shared_bytes(int max_item_rows, int group, int tile, int head_dim) {
  const std::size_t nv = static_cast<std::size_t>(max_item_rows) * static_cast<std::size_t>(group);
  const std::size_t d = static_cast<std::size_t>(head_dim), t = static_cast<std::size_t>(tile);
  return sizeof(float) * (2 * nv * d + 2 * nv + t * (d + 1) + t * d + kTiledWarps * 32);
}

std::size_t max_shared_bytes_per_block() {
  int device = 0, bytes = 0;
  INFERLAB_CUDA_CHECK(cudaGetDevice(&device));
  INFERLAB_CUDA_CHECK(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return static_cast<std::size_t>(bytes);
}

int multiprocessor_count() {
  int device = 0, sms = 0;
  INFERLAB_CUDA_CHECK(cudaGetDevice(&device));
  INFERLAB_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

void tiled_attention(const PagedBatch& batch, const PagedKv& kv, const float* q, float* out,
                     const AttentionItem* items, int n_items, int max_item_rows, int tile, PartialState state,
                     CUstream_st* stream) {
  if (n_items <= 0) return;
  const int group = batch.n_heads / batch.n_kv_heads;
  const std::size_t shared = tiled_attention_shared_bytes(max_item_rows, group, tile, batch.head_dim);
  const std::size_t limit = max_shared_bytes_per_block();
  check(shared <= limit, "tiled attention: " + std::to_string(max_item_rows) + " query rows x " +
                             std::to_string(group) + " heads and a K/V tile of " + std::to_string(tile) +
                             " positions at head_dim " + std::to_string(batch.head_dim) + " need " +
                             std::to_string(shared) + " bytes of shared memory; this GPU allows " +
                             std::to_string(limit) + " (lower tile or query_rows)");
  INFERLAB_CUDA_CHECK(cudaFuncSetAttribute(tiled_attention_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(shared)));
  const dim3 grid(static_cast<unsigned>(n_items), static_cast<unsigned>(batch.n_kv_heads));
  tiled_attention_kernel<<<grid, kTiledThreads, shared, stream>>>(batch, kv, q, out, items, max_item_rows * group,
                                                                   tile, state);
  INFERLAB_CUDA_CHECK_LAUNCH(tiled_attention_kernel);
}

}  // namespace inferlab::cuda
