// Decode GEMV on a GGUF file's own blocks with int8 activations (the technique of llama.cpp's
// mmvq, written here from the block layouts): y[r, o] = sum_sub xs[r, sub] * (integer dot of the
// sub-block's codes and xq[r, sub]) scaled by the sub-block's scales (gguf_block_math.h).
//
// What: one warp per output row o; lane l takes sub-blocks l, l + 32, ... of the row, decodes
// each once into 8 words of signed codes and its scales (SubBlock) and runs it against the N
// activation rows of its group (N <= kGgufGemvRows, a template argument, so the accumulators stay
// in registers): 8 __dp4a per row (plus 8 for sum(xq) where the type has a min). A warp shuffle
// sums the lanes. The codes are never widened in memory: the weight stream is the file's bytes.
// Launch: grid (ceil(out / 4), n / 8) of 8-row groups, 128 threads (4 warps, 4 rows), then one
// grid (ceil(out / 4), 1) for the n % 8 rows left.
// Roofline: decode reads out * row_bytes of weights (Q4_0: 18 bytes per 32 weights, 0.5625 B/w;
// Q8_0 1.0625; Q4_K 0.5625; Q6_K 0.82) plus N * in int8 activations; 4 MACs per __dp4a keep it
// bandwidth-bound at N = 1. cuda_kernel_roofline has no row for it yet; gpu_check's
// test_quantization_gguf step checks its results.
#include "kernels/cuda/check.h"
#include "kernels/cuda/gguf.h"
#include "kernels/cuda/gguf_block_math.h"

namespace inferlab::cuda {

namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;

template <GgmlType T, int N>
__global__ void gguf_gemv_kernel(const std::uint8_t* __restrict__ w, long long row_bytes,
                                 const std::int8_t* __restrict__ xq, const float* __restrict__ xs, float* y, int out,
                                 int in) {
  const int lane = threadIdx.x % 32;
  const int o = blockIdx.x * kWarps + threadIdx.x / 32;
  if (o >= out) return;  // whole warp
  const long long r0 = static_cast<long long>(blockIdx.y) * N;  // this group's first activation row
  xq += r0 * in;
  xs += r0 * (in / 32);
  y += r0 * out;
  float acc[N];
#pragma unroll
  for (int r = 0; r < N; ++r) acc[r] = 0.0f;
  gguf::row_partial<T, N>(w + o * row_bytes, xq, xs, in, lane, 32, acc);
#pragma unroll
  for (int r = 0; r < N; ++r) {
    float v = acc[r];
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    if (lane == 0) y[static_cast<long long>(r) * out + o] = v;
  }
}

// `groups` groups of N rows from row 0 of xq / xs / y.
template <GgmlType T, int N>
void launch(const std::uint8_t* w, const std::int8_t* xq, const float* xs, float* y, int groups, int out, int in,
            CUstream_st* stream) {
  const long long row_bytes = static_cast<long long>(in / (32 * gguf::Block<T>::kSubs)) * gguf::Block<T>::kBytes;
  const dim3 grid(static_cast<unsigned>((out + kWarps - 1) / kWarps), static_cast<unsigned>(groups));
  gguf_gemv_kernel<T, N><<<grid, kThreads, 0, stream>>>(w, row_bytes, xq, xs, y, out, in);
  INFERLAB_CUDA_CHECK_LAUNCH(gguf_gemv_kernel);
}

template <GgmlType T>
void launch_rows(const std::uint8_t* w, const std::int8_t* xq, const float* xs, float* y, int n, int out, int in,
                 CUstream_st* stream) {
  static_assert(kGgufGemvRows == 8, "one case per row count below");
  const int full = n / kGgufGemvRows, rest = n % kGgufGemvRows;
  if (full > 0) launch<T, kGgufGemvRows>(w, xq, xs, y, full, out, in, stream);
  const long long r0 = static_cast<long long>(full) * kGgufGemvRows;
  xq += r0 * in;
  xs += r0 * (in / 32);
  y += r0 * out;
  switch (rest) {
    case 0: return;
    case 1: return launch<T, 1>(w, xq, xs, y, 1, out, in, stream);
    case 2: return launch<T, 2>(w, xq, xs, y, 1, out, in, stream);
    case 3: return launch<T, 3>(w, xq, xs, y, 1, out, in, stream);
    case 4: return launch<T, 4>(w, xq, xs, y, 1, out, in, stream);
    case 5: return launch<T, 5>(w, xq, xs, y, 1, out, in, stream);
    case 6: return launch<T, 6>(w, xq, xs, y, 1, out, in, stream);
    default: return launch<T, 7>(w, xq, xs, y, 1, out, in, stream);
  }
}

}  // namespace

void gguf_gemv(GgmlType type, const std::uint8_t* w, const std::int8_t* xq, const float* xs, float* y, int n,
               int out, int in, CUstream_st* stream) {
  if (n <= 0 || out <= 0) return;
  check(n <= 65535 * kGgufGemvRows, "cuda gguf_gemv: at most " + std::to_string(65535 * kGgufGemvRows) +
                                        " rows (grid.y), got " + std::to_string(n));
  check(gguf::runs(type) && in > 0 && in % static_cast<int>(ggml_block_elements(type)) == 0,
        "cuda gguf_gemv: " + ggml_type_name(static_cast<std::uint32_t>(type)) + " rows of " + std::to_string(in) +
            " (allowed: Q8_0, Q4_0, Q4_1, Q4_K, Q6_K, rows of whole blocks)");
  switch (type) {
    case GgmlType::kQ8_0: return launch_rows<GgmlType::kQ8_0>(w, xq, xs, y, n, out, in, stream);
    case GgmlType::kQ4_0: return launch_rows<GgmlType::kQ4_0>(w, xq, xs, y, n, out, in, stream);
    case GgmlType::kQ4_1: return launch_rows<GgmlType::kQ4_1>(w, xq, xs, y, n, out, in, stream);
    case GgmlType::kQ4_K: return launch_rows<GgmlType::kQ4_K>(w, xq, xs, y, n, out, in, stream);
    default: return launch_rows<GgmlType::kQ6_K>(w, xq, xs, y, n, out, in, stream);
  }
}

}  // namespace inferlab::cuda
