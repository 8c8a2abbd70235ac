// e^x lane by lane on GCC/Clang vector types, shared by the CPU elementwise ops (SwiGLU,
// kernels/cpu/ops_rows.h) and the flash attention plugin's softmax (flash_tile_kernels.h).
#pragma once
#include <cstring>

namespace inferlab::cpu {

// x = e^x for every lane of x, x clamped to [-87, 88] (e^88 < FLT_MAX; below e^-87 results are
// ~1e-38 rather than 0, which no softmax sum or SiLU can see): x = n ln2 + r with |r| <= ln2/2
// (n rounded to nearest by the 1.5 * 2^23 shift), a degree-6 polynomial for e^r, 2^n from the
// exponent bits. Within ~2 ulp of libm's expf. NaN stays NaN. V: a float vector type, I: the
// int32 vector of as many lanes. In place: a 32- or 64-byte vector passed or returned by value
// changes the calling convention between builds of different vector widths.
template <class V, class I>
inline void exp_lanes(V& x) {
  const V lo = V{} - 87.0f, hi = V{} + 88.0f;
  x = x < lo ? lo : x;
  x = x > hi ? hi : x;
  const V shift = V{} + 12582912.0f;                         // 1.5 * 2^23
  V n = (x * 1.44269504f + shift) - shift;                   // round(x / ln2), in [-126, 127]
  const V r = (x - n * 0.693359375f) + n * 2.12194440e-4f;  // x - n ln2, two-part ln2 (NaN stays NaN)
  n = n == n ? n : V{};  // NaN: a defined exponent (the conversion of NaN is undefined: clang gave 0)
  V p = V{} + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const I bits = (__builtin_convertvector(n, I) + 127) << 23;  // 2^n
  V two_n;
  std::memcpy(&two_n, &bits, sizeof two_n);
  x = p * two_n;
}

}  // namespace inferlab::cpu
