// GGML tensor types: names, block sizes, and dequantisation of the block layouts inferlab loads
// (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS;
// kernels/ref/gguf_blocks.h describes
// them). Each value is computed with ggml's own float expression (e.g. Q4_K's
// (d * sc) * q - dmin * m), so the results equal ggml's dequantize_row_* bit for bit.
#include <bit>
#include <cstring>
#include <set>

#include "inferlab/error.h"
#include "inferlab/formats.h"
#include "kernels/ref/gguf_blocks.h"

namespace inferlab {

namespace {

constexpr std::size_t kQk = 32;  // elements per block of the 4- and 8-bit types

using ref::load_le16;

// One super-block (256 values) of Q4_K or Q5_K (q5).
void dequantize_q45_k(const std::uint8_t* blk, bool q5, float* y) {
  const float d = fp16_to_fp32(load_le16(blk)), dmin = fp16_to_fp32(load_le16(blk + 2));
  for (int j = 0; j < 8; ++j) {
    std::uint8_t sc = 0, m = 0;
    ref::kq_scale_min(blk + 4, j, sc, m);
    const float dj = d * static_cast<float>(sc), mj = dmin * static_cast<float>(m);
    for (int l = 0; l < 32; ++l) {
      const int code = q5 ? ref::q5k_code(blk, j, l) : ref::q4k_code(blk, j, l);
      y[32 * j + l] = dj * static_cast<float>(code) - mj;
    }
  }
}

void dequantize_q6_k(const std::uint8_t* blk, float* y) {
  const auto* sc = reinterpret_cast<const std::int8_t*>(blk + 192);
  const float d = fp16_to_fp32(load_le16(blk + 208));
  for (int c = 0; c < 8; ++c)  // sub-block c: values 32 c .., a scale per 16
    for (int l = 0; l < 32; ++l)
      y[32 * c + l] = d * static_cast<float>(sc[2 * c + l / 16]) * static_cast<float>(ref::q6k_code(blk, c, l) - 32);
}

void dequantize_q5(const std::uint8_t* blk, bool q5_1, float* y) {
  const float d = fp16_to_fp32(load_le16(blk));
  if (q5_1) {
    const float m = fp16_to_fp32(load_le16(blk + 2));
    for (int i = 0; i < 32; ++i) y[i] = d * static_cast<float>(ref::q5_code(blk + 4, i)) + m;
  } else {
    for (int i = 0; i < 32; ++i) y[i] = d * static_cast<float>(ref::q5_code(blk + 2, i) - 16);
  }
}

void dequantize_q2_k(const std::uint8_t* blk, float* y) {
  const float d = fp16_to_fp32(load_le16(blk + 80)), dmin = fp16_to_fp32(load_le16(blk + 82));
  for (int c = 0; c < 8; ++c)
    for (int l = 0; l < 32; ++l) {
      const std::uint8_t sm = blk[2 * c + l / 16];
      const float dl = d * static_cast<float>(sm & 0x0F), ml = dmin * static_cast<float>(sm >> 4);
      y[32 * c + l] = dl * static_cast<float>(ref::q2k_code(blk, c, l)) - ml;
    }
}

void dequantize_q3_k(const std::uint8_t* blk, float* y) {
  const float d = fp16_to_fp32(load_le16(blk + 108));
  for (int c = 0; c < 8; ++c)
    for (int l = 0; l < 32; ++l) {
      const float dl = d * static_cast<float>(ref::q3k_scale(blk, 2 * c + l / 16) - 32);
      y[32 * c + l] = dl * static_cast<float>(ref::q3k_code(blk, c, l) - 4);
    }
}

void dequantize_iq4_xs(const std::uint8_t* blk, float* y) {
  const float d = fp16_to_fp32(load_le16(blk));
  for (int c = 0; c < 8; ++c) {
    const float dl = d * static_cast<float>(ref::iq4xs_scale(blk, c) - 32);
    for (int l = 0; l < 32; ++l) y[32 * c + l] = dl * static_cast<float>(ref::kIq4Values[ref::split_nibble(blk + 8 + 16 * c, l)]);
  }
}

}  // namespace

std::string quantized_source_note(const std::map<std::string, std::uint32_t>& source_linear_types) {
  std::set<std::string> quantized;
  for (const auto& [name, type] : source_linear_types)
    if (ggml_type_is_quantized(static_cast<GgmlType>(type))) quantized.insert(ggml_type_name(type));
  if (quantized.empty()) return "";
  std::string names;
  for (const auto& q : quantized) names += (names.empty() ? "" : ", ") + q;
  return "linears stored as " + names +
         ": the fp32 reference (quantization none) is the dequantised file, not a float checkpoint, so quality "
         "metrics (kl_vs_baseline, top1_agree_frac, perplexity ratios) are measured against it";
}

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

void dequantize(GgmlType type, const std::uint8_t* src, std::size_t n, float* dst) {
  const std::size_t per = ggml_block_elements(type);
  if (n % per != 0)
    throw Error(std::to_string(n) + " elements is not a multiple of the " +
                ggml_type_name(static_cast<std::uint32_t>(type)) + " block size");
  switch (type) {
    case GgmlType::kF32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case GgmlType::kF16:
      for (std::size_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(load_le16(src + 2 * i));
      return;
    case GgmlType::kBF16:
      for (std::size_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(load_le16(src + 2 * i));
      return;
    case GgmlType::kQ8_0:
      for (std::size_t b = 0; b < n / kQk; ++b) {
        const std::uint8_t* blk = src + b * ggml_block_bytes(type);
        const float d = fp16_to_fp32(load_le16(blk));
        for (std::size_t j = 0; j < kQk; ++j)
          dst[b * kQk + j] = static_cast<float>(static_cast<std::int8_t>(blk[2 + j])) * d;
      }
      return;
    case GgmlType::kQ4_0:
      for (std::size_t b = 0; b < n / kQk; ++b) {
        const std::uint8_t* blk = src + b * ggml_block_bytes(type);
        const float d = fp16_to_fp32(load_le16(blk));
        for (std::size_t j = 0; j < kQk / 2; ++j) {  // low nibbles: 0..15, high: 16..31
          dst[b * kQk + j] = static_cast<float>((blk[2 + j] & 0x0f) - 8) * d;
          dst[b * kQk + j + kQk / 2] = static_cast<float>((blk[2 + j] >> 4) - 8) * d;
        }
      }
      return;
    case GgmlType::kQ4_1:
      for (std::size_t b = 0; b < n / kQk; ++b) {
        const std::uint8_t* blk = src + b * ggml_block_bytes(type);
        const float d = fp16_to_fp32(load_le16(blk));
        const float m = fp16_to_fp32(load_le16(blk + 2));
        for (std::size_t j = 0; j < kQk / 2; ++j) {
          dst[b * kQk + j] = static_cast<float>(blk[4 + j] & 0x0f) * d + m;
          dst[b * kQk + j + kQk / 2] = static_cast<float>(blk[4 + j] >> 4) * d + m;
        }
      }
      return;
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K: {
      for (std::size_t b = 0; b < n / ref::kGgufSuper; ++b)
        dequantize_q45_k(src + b * ggml_block_bytes(type), type == GgmlType::kQ5_K, dst + b * ref::kGgufSuper);
      return;
    }
    case GgmlType::kQ6_K:
      for (std::size_t b = 0; b < n / ref::kGgufSuper; ++b)
        dequantize_q6_k(src + b * ref::kQ6KBytes, dst + b * ref::kGgufSuper);
      return;
    case GgmlType::kQ5_0:
    case GgmlType::kQ5_1:
      for (std::size_t b = 0; b < n / kQk; ++b)
        dequantize_q5(src + b * ggml_block_bytes(type), type == GgmlType::kQ5_1, dst + b * kQk);
      return;
    case GgmlType::kIQ4_NL:
      for (std::size_t b = 0; b < n / kQk; ++b) {
        const std::uint8_t* blk = src + b * ref::kIq4NlBytes;
        const float d = fp16_to_fp32(load_le16(blk));
        for (std::size_t j = 0; j < kQk; ++j)
          dst[b * kQk + j] = d * static_cast<float>(ref::kIq4Values[ref::split_nibble(blk + 2, static_cast<int>(j))]);
      }
      return;
    case GgmlType::kQ2_K:
      for (std::size_t b = 0; b < n / ref::kGgufSuper; ++b) dequantize_q2_k(src + b * ref::kQ2KBytes, dst + b * ref::kGgufSuper);
      return;
    case GgmlType::kQ3_K:
      for (std::size_t b = 0; b < n / ref::kGgufSuper; ++b) dequantize_q3_k(src + b * ref::kQ3KBytes, dst + b * ref::kGgufSuper);
      return;
    case GgmlType::kIQ4_XS:
      for (std::size_t b = 0; b < n / ref::kGgufSuper; ++b)
        dequantize_iq4_xs(src + b * ref::kIq4XsBytes, dst + b * ref::kGgufSuper);
      return;
  }
  throw Error("unsupported GGML tensor type " + ggml_type_name(static_cast<std::uint32_t>(type)));
}

}  // namespace inferlab
