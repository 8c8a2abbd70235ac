// Token choice on the GPU from a classifier's logits, so a decode step downloads one int per
// sequence instead of a [vocab] row of floats (the reference: kernels/ref/ops_fused.h argmax and sample_row).
// Pointers are device memory; launches are asynchronous on `stream`, allocate nothing and never
// synchronise; a launch failure throws Error. Plain C++ declarations (no CUDA header).
#pragma once

struct CUstream_st;

namespace inferlab::cuda {

// out[r] = the index of the largest of logits[r, :vocab], the lowest index on ties; a NaN never
// wins, and a NaN at index 0 gives 0 (plugins/common/decoding/sampling.h argmax's rule). One
// block of 256 threads per row.
void argmax_rows(const float* logits, int rows, int vocab, int* out, CUstream_st* stream);

// out[r] = a token drawn from softmax(logits[r, :] / temperature) by the uniform u[r] in [0, 1)
// (u: device memory, [rows]): the chunked draw of kernels/ref/token_choice.h, bit-identical to
// ref::sample_row and so to sample_token without top-k / top-p for the same u. temperature > 0.
void sample_rows(const float* logits, int rows, int vocab, double temperature, const double* u, int* out,
                 CUstream_st* stream);

}  // namespace inferlab::cuda
