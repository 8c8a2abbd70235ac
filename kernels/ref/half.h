// Scalar IEEE binary16 (f16) and bfloat16 (bf16) conversions, the truth for the half-precision
// linears: float -> half rounds to nearest, ties to even (f16 overflows to ±inf, subnormals
// kept; NaN stays NaN), half -> float is exact. Bit-level, so results never depend on the CPU.
#pragma once
#include <cstdint>
#include <cstring>

namespace inferlab::ref {

inline std::uint32_t float_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// bf16 is the top half of an fp32.
inline float bf16_to_float(std::uint16_t h) { return bits_float(static_cast<std::uint32_t>(h) << 16); }
inline std::uint16_t float_to_bf16(float f) {
  const std::uint32_t u = float_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  const std::uint32_t round = 0x7fffu + ((u >> 16) & 1u);  // ties to even
  return static_cast<std::uint16_t>((u + round) >> 16);
}

inline float f16_to_float(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
  if (exp == 0x1fu) return bits_float(sign | 0x7f800000u | (mant << 13));  // inf / NaN
  if (exp != 0) return bits_float(sign | ((exp + 112u) << 23) | (mant << 13));  // normal: bias 15 -> 127
  if (mant == 0) return bits_float(sign);                                      // ±0
  // Subnormal: mant · 2^-24.
  const float v = static_cast<float>(mant) * bits_float(0x33800000u);  // 2^-24
  return sign ? -v : v;
}

inline std::uint16_t float_to_f16(float f) {
  const std::uint32_t u = float_bits(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  const std::uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);  // NaN
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds to >= 65520: inf
  if (abs >= 0x38800000u) {  // normal in f16 (>= 2^-14): rebias, round 13 dropped bits to even
    const std::uint32_t v = abs - (112u << 23);
    const std::uint32_t round = 0xfffu + ((v >> 13) & 1u);
    return static_cast<std::uint16_t>(sign | ((v + round) >> 13));
  }
  if (abs < 0x33000000u) return sign;  // below half the smallest subnormal (2^-25): ±0
  // Subnormal in f16: value / 2^-24 rounded to even, as an integer mantissa (may round up to
  // the smallest normal, which the encoding carries naturally).
  const std::uint32_t exp = abs >> 23, mant = (abs & 0x7fffffu) | 0x800000u;
  const std::uint32_t shift = 126u - exp;  // 14..24 bits dropped so the result is in 2^-24 units
  const std::uint32_t half_bit = 1u << (shift - 1), rest = mant & ((half_bit << 1) - 1u);
  std::uint32_t q = mant >> shift;
  if (rest > half_bit || (rest == half_bit && (q & 1u))) ++q;
  return static_cast<std::uint16_t>(sign | q);
}

}  // namespace inferlab::ref
