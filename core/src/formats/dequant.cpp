// GGML tensor types: names, block sizes, and dequantisation of the block layouts inferlab loads
// (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS;
// inferlab/gguf_blocks.h describes
// them). Each value is computed with ggml's own float expression (e.g. Q4_K's
// (d * sc) * q - dmin * m), so the results equal ggml's dequantize_row_* bit for bit.
#include <bit>
#include <cstring>
#include <set>

#include "inferlab/error.h"
#include "inferlab/formats/formats.h"
#include "inferlab/gguf_blocks.h"

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
