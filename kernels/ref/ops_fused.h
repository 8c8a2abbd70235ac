// Reference math of the fused decode ops (the truth kernels/cpu/ops_fused.h and kernels/cuda/
// fused.h are tested against): each is the unfused reference ops of ops.h and matmul_int8.h in
// sequence, written out plainly. Not bit-identical to either device (double sums, theta-derived
// angles), so tests compare with a tolerance: floats to 1e-5 relative, int8 codes equal or one
// step apart (a value within rounding of a half step may round either way), scales to 1e-5.
#pragma once
#include <cstdint>

#include "inferlab/rope_style.h"

namespace inferlab::ref {

// Per row: x += y (y may be null), then rmsnorm(x) with w [dim] into out (may be null) and/or
// quantised per 32-block (quantize_act_rows) into act_q [rows, dim], act_scale
// [rows, act_blocks(dim)] (act_q may be null).
void residual_rmsnorm(float* x, const float* y, const float* w, float* out, std::int8_t* act_q, float* act_scale,
                      int rows, int dim, float eps);

// Per row r: rope of q [n_heads, head_dim] and k [n_kv_heads, head_dim] at positions[r] (theta),
// then the rotated k and v [n_kv_heads * head_dim] stored at row slots[r] of k_cache / v_cache.
void rope_kv_write_f32(float* q, float* k, const float* v, const int* positions, const int* slots, int rows,
                       int n_heads, int n_kv_heads, int head_dim, float theta, RopeStyle style, float* k_cache,
                       float* v_cache);

// gate [rows, width] = silu(gate) * up, then quantised per 32-block into act_q, act_scale.
void swiglu_quantize(float* gate, const float* up, std::int8_t* act_q, float* act_scale, int rows, int width);

// The classifier's token choice (kernels/cuda/classify.h): the index of the largest logit, the
// lowest on ties, a NaN never winning and a NaN at index 0 giving 0.
int argmax(const float* logits, int vocab);
// The token u in [0, 1) draws from softmax(logits / temperature) (temperature > 0), by the
// chunked draw of kernels/ref/token_choice.h: bit-identical to the GPU's sample_rows for the
// same u (and what sample_token draws without top-k / top-p).
int sample_row(const float* logits, int vocab, double temperature, double u);

}  // namespace inferlab::ref
