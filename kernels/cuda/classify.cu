// Greedy and temperature sampling on the GPU (contracts: kernels/cuda/classify.h).
//
// What: one block of 256 threads per logits row. argmax: each thread keeps the best (value,
// index) of a strided scan, then a shared-memory tree keeps the larger value, the lower index on
// ties. sample: the row max (tree), then each thread sums the weights of one contiguous chunk in
// double, thread 0 turns the 256 chunk sums into exclusive prefixes, and the thread whose chunk
// holds u * total walks it to the token — kernels/ref/token_choice.h's draw, bit for bit.
// Roofline: reads the row once (argmax) or twice (sample): 128 KB for a 32000-token vocabulary,
// ~40 ns of HBM time; what it saves is the [rows, vocab] download and the host scan.
#include <cuda_runtime.h>

#include <cfloat>

#include "kernels/cuda/check.h"
#include "kernels/cuda/classify.h"
#include "kernels/ref/token_choice.h"

namespace inferlab::cuda {
namespace {

constexpr int kThreads = 256;

// Whether (v, i) beats (best, at): larger, or equal at a lower index; NaN never beats.
__device__ inline bool beats(float v, int i, float best, int at) { return v > best || (v == best && i < at); }

__global__ void argmax_kernel(const float* __restrict__ logits, int vocab, int* __restrict__ out) {
  __shared__ float best_s[kThreads];
  __shared__ int at_s[kThreads];
  const float* row = logits + static_cast<std::size_t>(blockIdx.x) * vocab;
  float best = -INFINITY;
  int at = vocab;  // none yet: any non-NaN value, -inf included, beats it at a lower index
  for (int i = threadIdx.x; i < vocab; i += blockDim.x)
    if (beats(row[i], i, best, at)) {
      best = row[i];
      at = i;
    }
  best_s[threadIdx.x] = best;
  at_s[threadIdx.x] = at;
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    const int t = threadIdx.x;
    if (t < stride && beats(best_s[t + stride], at_s[t + stride], best_s[t], at_s[t])) {
      best_s[t] = best_s[t + stride];
      at_s[t] = at_s[t + stride];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = row[0] != row[0] || at_s[0] >= vocab ? 0 : at_s[0];
}

// The chunked draw of kernels/ref/token_choice.h, one thread per chunk: the same operations in
// the same order as ref::sample_row, so the token is bit-identical for the same u.
__global__ void sample_kernel(const float* __restrict__ logits, int vocab, double temperature,
                              const double* __restrict__ u, int* __restrict__ out) {
  static_assert(kThreads == ref::kSampleChunks, "one thread per chunk of the reference draw");
  __shared__ float max_s[kThreads];
  __shared__ double prefix_s[kThreads];
  __shared__ double total;
  __shared__ int token;
  const float* row = logits + static_cast<std::size_t>(blockIdx.x) * vocab;
  const int t = threadIdx.x;
  float m = -INFINITY;
  for (int i = t; i < vocab; i += blockDim.x) m = fmaxf(m, row[i]);
  max_s[t] = m;
  if (t == 0) token = vocab - 1;  // no chunk holds u * total
  __syncthreads();
  for (int stride = kThreads / 2; stride > 0; stride /= 2) {
    if (t < stride) max_s[t] = fmaxf(max_s[t], max_s[t + stride]);
    __syncthreads();
  }
  const float top = max_s[0];
  int begin = 0, end = 0;
  ref::sample_chunk(vocab, t, begin, end);
  double sum = 0.0;
  for (int i = begin; i < end; ++i) sum += ref::sample_weight(row[i], top, temperature);
  prefix_s[t] = sum;
  __syncthreads();
  if (t == 0) {  // exclusive prefixes in chunk order, and the total
    double run = 0.0;
    for (int j = 0; j < kThreads; ++j) {
      const double chunk_sum = prefix_s[j];
      prefix_s[j] = run;
      run += chunk_sum;
    }
    total = run;
  }
  __syncthreads();
  const double r = u[blockIdx.x] * total;
  // The chunk holding r walks to its token; off its end by rounding, its last index.
  if (begin < end && prefix_s[t] <= r && r < prefix_s[t] + sum) {
    double cum = prefix_s[t];
    int pick = end - 1;
    for (int i = begin; i < end; ++i) {
      cum += ref::sample_weight(row[i], top, temperature);
      if (r < cum) {
        pick = i;
        break;
      }
    }
    token = pick;
  }
  __syncthreads();
  if (t == 0) out[blockIdx.x] = token;
}

}  // namespace

void argmax_rows(const float* logits, int rows, int vocab, int* out, CUstream_st* stream) {
  if (rows <= 0) return;
  check(vocab > 0, "cuda argmax_rows: empty logits");
  argmax_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, vocab, out);
  INFERLAB_CUDA_CHECK_LAUNCH("argmax_rows");
}

void sample_rows(const float* logits, int rows, int vocab, double temperature, const double* u, int* out,
                 CUstream_st* stream) {
  if (rows <= 0) return;
  check(vocab > 0, "cuda sample_rows: empty logits");
  check(temperature > 0.0, "cuda sample_rows: temperature must be > 0 (0 is argmax_rows)");
  sample_kernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(logits, vocab, temperature, u, out);
  INFERLAB_CUDA_CHECK_LAUNCH("sample_rows");
}

}  // namespace inferlab::cuda
