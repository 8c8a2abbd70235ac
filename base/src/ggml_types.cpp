// GGML type names, block sizes and half / bfloat16 conversions (ggml_types.h).
#include "inferlab/ggml_types.h"

#include <bit>
#include <cstring>

#include "inferlab/error.h"
#include "inferlab/gguf_blocks.h"

namespace inferlab {

namespace {
constexpr std::size_t kQk = 32;  // elements per block of the 4- and 8-bit types
}  // namespace

std::string ggml_type_name(std::uint32_t type) {
  static const char* const kNames[] = {
      "F32",  "F16",    "Q4_0",   "Q4_1",    "Q4_2",  "Q4_3",  "Q5_0",   "Q5_1",
      "Q8_0", "Q8_1",   "Q2_K",   "Q3_K",    "Q4_K",  "Q5_K",  "Q6_K",   "Q8_K",
      "IQ2_XXS", "IQ2_XS", "IQ3_XXS", "IQ1_S", "IQ4_NL", "IQ3_S", "IQ2_S", "IQ4_XS",
      "I8",   "I16",    "I32",    "I64",     "F64",   "IQ1_M", "BF16",   "Q4_0_4_4",
      "Q4_0_4_8", "Q4_0_8_8", "TQ1_0", "TQ2_0"};
  if (type < sizeof(kNames) / sizeof(kNames[0])) return kNames[type];
  return "type " + std::to_string(type);
}

bool ggml_type_supported(std::uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16:
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_0:
    case GgmlType::kQ5_1:
    case GgmlType::kIQ4_NL:
    case GgmlType::kQ2_K:
    case GgmlType::kQ3_K:
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
    case GgmlType::kQ6_K:
    case GgmlType::kIQ4_XS:
      return true;
  }
  return false;
}

std::string ggml_supported_type_names() {
  return "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS";
}

bool ggml_type_is_quantized(GgmlType type) { return ggml_block_elements(type) > 1; }

std::size_t ggml_block_elements(GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16:
      return 1;
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1:
    case GgmlType::kQ5_0:
    case GgmlType::kQ5_1:
    case GgmlType::kIQ4_NL:
      return kQk;
    case GgmlType::kQ2_K:
    case GgmlType::kQ3_K:
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
    case GgmlType::kQ6_K:
    case GgmlType::kIQ4_XS:
      return ref::kGgufSuper;
  }
  throw Error("unsupported GGML tensor type " + ggml_type_name(static_cast<std::uint32_t>(type)));
}

std::size_t ggml_block_bytes(GgmlType type) {
  switch (type) {
    case GgmlType::kF32: return 4;
    case GgmlType::kF16: return 2;
    case GgmlType::kBF16: return 2;
    case GgmlType::kQ8_0: return 2 + kQk;          // d, qs[32]
    case GgmlType::kQ4_0: return 2 + kQk / 2;      // d, qs[16]
    case GgmlType::kQ4_1: return 2 + 2 + kQk / 2;  // d, m, qs[16]
    case GgmlType::kQ5_0: return ref::kQ5_0Bytes;
    case GgmlType::kQ5_1: return ref::kQ5_1Bytes;
    case GgmlType::kIQ4_NL: return ref::kIq4NlBytes;
    case GgmlType::kQ2_K: return ref::kQ2KBytes;
    case GgmlType::kQ3_K: return ref::kQ3KBytes;
    case GgmlType::kIQ4_XS: return ref::kIq4XsBytes;
    case GgmlType::kQ4_K: return ref::kQ4KBytes;
    case GgmlType::kQ5_K: return ref::kQ5KBytes;
    case GgmlType::kQ6_K: return ref::kQ6KBytes;
  }
  throw Error("unsupported GGML tensor type " + ggml_type_name(static_cast<std::uint32_t>(type)));
}

std::uint64_t ggml_tensor_bytes(GgmlType type, std::uint64_t n) {
  const std::uint64_t per = ggml_block_elements(type);
  if (n % per != 0)
    throw Error(std::to_string(n) + " elements is not a multiple of the " + ggml_type_name(static_cast<std::uint32_t>(type)) +
                " block size " + std::to_string(per));
  return n / per * ggml_block_bytes(type);
}

float fp16_to_fp32(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1f;
  std::uint32_t mant = h & 0x3ffu;
  std::uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf / nan
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;  // signed zero
  } else {
    // Subnormal half: normalise into a float exponent.
    int e = -1;
    do {
      ++e;
      mant <<= 1;
    } while ((mant & 0x400u) == 0);
    bits = sign | (static_cast<std::uint32_t>(112 - e) << 23) | ((mant & 0x3ffu) << 13);
  }
  return std::bit_cast<float>(bits);
}

std::uint16_t fp32_to_fp16(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint16_t sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  const std::uint32_t abs = x & 0x7fffffffu;
  if (abs >= 0x7f800000u)  // inf or nan (keep nan quiet)
    return static_cast<std::uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  if (abs >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds to inf
  const int exp = static_cast<int>(abs >> 23) - 127;
  if (exp >= -14) {
    // Normal half: drop 13 mantissa bits, round to nearest even.
    std::uint32_t m = abs & 0x7fffffu;
    std::uint32_t half = (static_cast<std::uint32_t>(exp + 15) << 10) | (m >> 13);
    const std::uint32_t rest = m & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) ++half;
    return static_cast<std::uint16_t>(sign | half);
  }
  if (exp < -25) return sign;  // below half the smallest subnormal
  // Subnormal half: value = m * 2^-24 with the implicit bit restored.
  const std::uint32_t m = (abs & 0x7fffffu) | 0x800000u;
  const int shift = -exp - 14 + 13;  // 14..25 -> bits to drop
  std::uint32_t half = m >> shift;
  const std::uint32_t rest = m & ((1u << shift) - 1u);
  const std::uint32_t mid = 1u << (shift - 1);
  if (rest > mid || (rest == mid && (half & 1u))) ++half;
  return static_cast<std::uint16_t>(sign | half);
}

float bf16_to_fp32(std::uint16_t b) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

std::uint16_t fp32_to_bf16(float f) {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  return static_cast<std::uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);  // ties to even
}

}  // namespace inferlab
