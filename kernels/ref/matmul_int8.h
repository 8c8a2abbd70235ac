// Reference weight-only int8 matmul and the quantizer that defines the format: symmetric,
// one scale per output channel (row of W). The truth kernels/cpu/matmul_int8 is tested against.
#pragma once
#include <cstdint>

namespace inferlab::ref {

// w: [out, in] fp32 -> q: [out, in] int8, scale: [out]. scale[o] = max_i |w[o, i]| / 127 and
// q[o, i] = clamp(round(w[o, i] / scale[o]), -127, 127); an all-zero row gets scale 0, q 0.
// Hence |w[o, i] - scale[o] * q[o, i]| <= scale[o] / 2.
void quantize_int8_rows(const float* w, int out, int in, std::int8_t* q, float* scale);

// y[r, o] = scale[o] * sum_i x[r, i] * q[o, i], accumulated in double.
// x: [n, in], q: [out, in], scale: [out], y: [n, out].
void matmul_int8(const float* x, const std::int8_t* q, const float* scale, float* y, int n,
                 int out, int in);

// Activations quantised on the fly (W8A8, dynamic): each row of x is cut into blocks of
// kActBlock values (the last one shorter when in is not a multiple), each with its own scale
// xs = max|x_block| / 127 and xq = round(x / xs) in [-127, 127] — the Q8_0 activation block of
// llama.cpp. x: [n, in] -> xq: [n, in], xs: [n, act_blocks(in)].
inline constexpr int kActBlock = 32;
inline int act_blocks(int in) { return (in + kActBlock - 1) / kActBlock; }
void quantize_act_rows(const float* x, int n, int in, std::int8_t* xq, float* xs);

// y[r, o] = scale[o] * sum_b xs[r, b] * (sum_{i in b} xq[r, i] * q[o, i]): exact integer block
// sums, then double. The truth for kernels/cpu matmul_int8_act.
void matmul_int8_act(const std::int8_t* xq, const float* xs, const std::int8_t* q, const float* scale, float* y,
                     int n, int out, int in);

}  // namespace inferlab::ref
