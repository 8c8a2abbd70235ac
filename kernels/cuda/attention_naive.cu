// Naive paged attention on CUDA: the memory-traffic baseline the tiled kernels improve on.
//
// What: for each (query row, head) one thread block scores every visible position (one warp per
// position, lanes over head_dim, warp-shuffle sum), writes the score row to global scratch
// (materialised: [rows, n_heads, max_context]), softmaxes it in place (block max / sum
// reductions), then sums V with one thread per output element.
// Launch: grid (rows, n_heads), 128 threads, head_dim floats of shared memory (the query).
// Roofline: every (row, head) reads its sequence's K and V once, so a decode token moves
// 2 * ctx * head_dim * b bytes per head (b = 4 f32, 2 f16 / bf16, 1 + 4 / head_dim int8) plus 2 * 4 * ctx of
// score traffic — GQA groups re-read their kv head (n_heads / n_kv_heads times the minimum), which
// is the waste flash removes. Bandwidth bound; the score round trip adds ~4 / (head_dim * b) on top.
#include <cfloat>

#include "kernels/cuda/attention_common.cuh"
#include "kernels/cuda/check.h"

namespace inferlab::cuda {

namespace {

constexpr int kNaiveThreads = 128;

// Reduces v over the block (op = max or sum); every thread gets the result.
template <bool kMax>
__device__ float block_reduce(float v, float* red) {
  v = kMax ? detail::warp_max(v) : detail::warp_sum(v);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  if (lane == 0) red[warp] = v;
  __syncthreads();
  float r = red[0];
  for (int w = 1; w < static_cast<int>(blockDim.x / 32); ++w) r = kMax ? fmaxf(r, red[w]) : r + red[w];
  __syncthreads();  // red is reused by the next reduction
  return r;
}

__global__ void naive_attention_kernel(PagedBatch b, PagedKv kv, const float* q, float* out, float* scores,
                                       int first_row, int max_context) {
  extern __shared__ float q_s[];  // [head_dim]
  __shared__ float red[32];
  const int row = first_row + static_cast<int>(blockIdx.x), h = blockIdx.y, d = b.head_dim;
  const int kvh = h / (b.n_heads / b.n_kv_heads);
  const int s = detail::seq_of_row(b, row);
  const int n_q = b.query_start[s + 1] - b.query_start[s];
  const int pos = b.context_len[s] - n_q + (row - b.query_start[s]);  // attends to [0, pos]
  const long long vec = static_cast<long long>(row) * b.n_heads + h;
  const long long local_vec = static_cast<long long>(blockIdx.x) * b.n_heads + h;
  for (int c = threadIdx.x; c < d; c += blockDim.x) q_s[c] = q[vec * d + c];
  __syncthreads();
  float* score = scores + local_vec * max_context;  // [max_context], [0, pos] used

  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = blockDim.x / 32;
  float local_max = -FLT_MAX;
  for (int p = warp; p <= pos; p += warps) {
    const long long slot = detail::slot_of(b, kv, s, p);
    float dot = 0.0f;
    for (int c = lane; c < d; c += 32) dot += q_s[c] * detail::kv_load(kv.k, kv.k_scale, kv.k_dtype, slot, b.n_kv_heads, kvh, d, c);
    dot = detail::warp_sum(dot) * b.scale;
    if (lane == 0) score[p] = dot;
    local_max = fmaxf(local_max, dot);
  }
  const float max_score = block_reduce<true>(local_max, red);  // also orders the score writes

  float local_sum = 0.0f;
  for (int p = threadIdx.x; p <= pos; p += blockDim.x) {
    const float e = expf(score[p] - max_score);
    score[p] = e;
    local_sum += e;
  }
  const float inv = 1.0f / block_reduce<false>(local_sum, red);

  for (int c = threadIdx.x; c < d; c += blockDim.x) {
    float acc = 0.0f;
    for (int p = 0; p <= pos; ++p)
      acc += score[p] * detail::kv_load(kv.v, kv.v_scale, kv.v_dtype, detail::slot_of(b, kv, s, p), b.n_kv_heads, kvh, d, c);
    out[vec * d + c] = acc * inv;
  }
}

}  // namespace

void naive_attention(const PagedBatch& batch, const PagedKv& kv, const float* q, float* out, float* scores,
                     int first_row, int rows, int max_context, CUstream_st* stream) {
  if (rows <= 0 || batch.n_heads <= 0) return;
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(batch.n_heads));
  const std::size_t shared = static_cast<std::size_t>(batch.head_dim) * sizeof(float);
  naive_attention_kernel<<<grid, kNaiveThreads, shared, stream>>>(batch, kv, q, out, scores, first_row, max_context);
  INFERLAB_CUDA_CHECK_LAUNCH(naive_attention_kernel);
}

}  // namespace inferlab::cuda
