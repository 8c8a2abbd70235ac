// Token choice on the GPU from a classifier's logits, so a decode step downloads one int per
// sequence instead of a [vocab] row of floats (the reference math: kernels/ref/ops_fused.h).
// Pointers are device memory; launches are asynchronous on `stream`, allocate nothing and never
// synchronise; a launch failure throws Error. Plain C++ declarations (no CUDA header).
#pragma once

struct CUstream_st;

namespace inferlab::cuda {

// out[r] = the index of the largest of logits[r, :vocab], the lowest index on ties; a NaN never
// wins, and a NaN at index 0 gives 0 (plugins/common/decoding/sampling.h argmax's rule). One
// block of 256 threads per row.
void argmax_rows(const float* logits, int rows, int vocab, int* out, CUstream_st* stream);

// out[r] = a token drawn from softmax(logits[r, :] / temperature) by the uniform u[r] in [0, 1):
// weights exp((l - max) / T) summed in double in index order within each of the block's 256
// contiguous chunks, and the first index whose running sum exceeds u * total (the last index
// when rounding leaves none), as sample_token without top-k / top-p. temperature > 0.
void sample_rows(const float* logits, int rows, int vocab, double temperature, const double* u, int* out,
                 CUstream_st* stream);

}  // namespace inferlab::cuda
