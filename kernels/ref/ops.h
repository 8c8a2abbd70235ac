// Reference (naive, readable) versions of the dense ops of a Llama-family layer. These are the
// truth the fast kernels in kernels/cpu are tested against; they favour clarity and double
// accumulation over speed.
#pragma once

#include "inferlab/rope_style.h"

namespace inferlab::ref {

// out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i], for one row of `dim` values (llama2.c rmsnorm).
// out may alias x.
void rmsnorm(float* out, const float* x, const float* w, int dim, float eps);

// Rotates `vec` [n_heads, head_dim] in place for position `pos`. Pair j of a head (j in
// [0, head_dim/2)) turns by pos * theta^(-2j/head_dim); kInterleaved pairs are (2j, 2j+1)
// (llama2.c), kHalf pairs are (j, j + head_dim/2) (Hugging Face / NeoX).
void rope(float* vec, int n_heads, int head_dim, int pos, float theta, RopeStyle style);

// x * sigmoid(x).
float silu(float x);

// gate[i] = silu(gate[i]) * up[i] for n values (SwiGLU).
void swiglu(float* gate, const float* up, int n);

// In-place softmax of n values (max-subtracted).
void softmax(float* x, int n);

// out[r, :] = table[tokens[r], :] for rows rows of dim values.
void embedding(const float* table, const int* tokens, int rows, int dim, float* out);

// cache[slots[r] * width + i] = src[r * width + i]: one row of K (or V) per slot.
void kv_write(float* cache, const float* src, const int* slots, int rows, int width);

// int8 KV rows: for each row r and head h (x = src[r, h*head_dim : (h+1)*head_dim]),
// scale[slots[r] * n_heads + h] = max|x| / 127 and codes[(slots[r] * n_heads + h) * head_dim + c]
// = clamp(round(x[c] / scale), -127, 127); an all-zero x gets scale 0 and zero codes.
void kv_write_int8(signed char* codes, float* scale, const float* src, const int* slots, int rows, int n_heads,
                   int head_dim);

// x[i] += y[i] for n values.
void add(float* x, const float* y, int n);

// y[r, :] += b for rows rows of width values.
void add_bias(float* y, const float* b, int rows, int width);

// y[n, out] = x[n, in] · W^T with W [out, in], accumulated in double.
void matmul(const float* x, const float* w, float* y, int n, int out, int in);

}  // namespace inferlab::ref
