// Reference weight-only int4 matmul with group-wise scales, and the quantizer that defines the
// format (the storage of GPTQ/AWQ checkpoints and of llama.cpp's Q4 family, without their
// calibration). The truth kernels/cpu/matmul_int4 is tested against.
//
// Format, for W [out, in] and a group size gs:
//   - each row o is cut into G = ceil(in / gs) groups of gs input channels; the last group holds
//     in - (G - 1) * gs channels when gs does not divide in.
//   - packed: [out, row_bytes] with row_bytes = ceil(in / 2); weight (o, i) is the 4-bit code
//     u in [0, 15] in byte i / 2 of row o, low nibble for even i, high nibble for odd i. So the
//     little-endian 32-bit word at byte k / 2 (k a multiple of 8) holds codes k..k+7 at bit
//     offsets 0, 4, ..., 28.
//   - scale: [out, G] fp32; zero: [out, G] uint8 code in [0, 15] (asymmetric), or no array at
//     all (symmetric, the zero point is the constant 8).
//   - the weight a code stands for: w = scale[o, g] * (u - zero[o, g]).
#pragma once
#include <cstddef>
#include <cstdint>

namespace inferlab::ref {

inline int int4_groups(int in, int group_size) { return (in + group_size - 1) / group_size; }
inline std::size_t int4_row_bytes(int in) { return static_cast<std::size_t>(in + 1) / 2; }
// Zero point of the symmetric scheme: codes 0..15 stand for q = u - 8 in [-8, 7].
inline constexpr int kInt4SymmetricZero = 8;

// w: [out, in] fp32 -> packed [out, int4_row_bytes(in)], scale [out, G], zero [out, G].
// Per group, with a = max |w|, lo = min(min w, 0), hi = max(max w, 0):
//   symmetric  (zero == nullptr): scale = a / 7, u = round(w / scale) + 8, so q in [-7, 7]
//              (code 0, q = -8, is never produced: ±a are both exact);
//   asymmetric (zero != nullptr): scale = (hi - lo) / 15, zero = round(-lo / scale) in [0, 15],
//              u = clamp(round(w / scale) + zero, 0, 15) (the range always contains 0, so 0 is
//              exact and no weight is more than scale / 2 outside the grid).
// Either way |w - scale * (u - zero)| <= scale / 2. An all-zero group gets scale 0 (and zero 0,
// code 8 if symmetric), so it dequantizes to exactly 0. Rounding is half away from zero.
void quantize_int4_groups(const float* w, int out, int in, int group_size, std::uint8_t* packed,
                          float* scale, std::uint8_t* zero);
// quantize_int4_groups' rule for one group, from lo = min(min w, 0), hi = max(max w, 0) and
// a = max |w| over it: its scale and zero point (kInt4SymmetricZero when symmetric).
struct Int4GroupGrid {
  float scale;
  long zero;
};
Int4GroupGrid int4_group_grid(float lo, float hi, float amax, bool asymmetric);
// The code of weight w on that grid: clamp(round(w / scale) + zero, 0, 15), rounding half away
// from zero (std::lround); zero itself when the scale is 0.
int int4_code(float w, Int4GroupGrid grid);

// w: [out, in] = scale * (u - zero), the exact values the codes stand for (computed in double,
// rounded once to float).
void dequantize_int4(const std::uint8_t* packed, const float* scale, const std::uint8_t* zero,
                     int out, int in, int group_size, float* w);

// y[r, o] = sum_i x[r, i] * scale[o, g(i)] * (u[o, i] - zero[o, g(i)]), accumulated in double.
// x: [n, in], y: [n, out]; zero == nullptr means symmetric.
void matmul_int4(const float* x, const std::uint8_t* packed, const float* scale,
                 const std::uint8_t* zero, float* y, int n, int out, int in, int group_size);

// int4 weights against int8 activation blocks (W4A8, dynamic): xq / xs as made by
// ref::quantize_act_rows (blocks of 32, kernels/ref/matmul_int8.h); group_size a multiple of 32
// so that every activation block lies in one weight group. Per block b in group g:
// y += xs[r, b] * scale[o, g] * (sum_i u[o, i] * xq[r, i] - zero[o, g] * sum_i xq[r, i]), the two
// integer sums exact, the rest in double.
void matmul_int4_act(const std::int8_t* xq, const float* xs, const std::uint8_t* packed, const float* scale,
                     const std::uint8_t* zero, float* y, int n, int out, int in, int group_size);

}  // namespace inferlab::ref
