// fp32 -> GGML blocks, the reference quantisers of the block layouts dequant.cpp reads:
// F32, F16 (round to nearest even) and the 32-element Q8_0 / Q4_0 blocks. The rounding rules
// are those of ggml's quantize_row_q8_0_ref / quantize_row_q4_0_ref, so a tensor quantised here
// has the bytes llama.cpp's llama-quantize writes for the same fp32 input:
//   Q8_0: d = max|x| / 127, q = round(x / d) (half away from zero);
//   Q4_0: m = the element of largest magnitude (first one on a tie, sign kept), d = m / -8,
//         q = min(15, trunc(x / d + 8.5)); nibble j holds element j (low) and j + 16 (high).
// Both divide by the fp32 d and store d as fp16.
#include <cmath>
#include <cstring>

#include "inferlab/error.h"
#include "inferlab/formats/formats.h"

namespace inferlab {

namespace {

constexpr std::size_t kQk = 32;

void store_u16(std::uint8_t* p, std::uint16_t v) {
  p[0] = static_cast<std::uint8_t>(v & 0xff);
  p[1] = static_cast<std::uint8_t>(v >> 8);
}

// One Q8_0 block: [2 bytes fp16 d][32 x int8].
void quantize_block_q8_0(const float* x, std::uint8_t* blk) {
  float amax = 0.0f;
  for (std::size_t j = 0; j < kQk; ++j) amax = std::fmax(amax, std::fabs(x[j]));
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16(blk, fp32_to_fp16(d));
  for (std::size_t j = 0; j < kQk; ++j)
    blk[2 + j] = static_cast<std::uint8_t>(static_cast<std::int8_t>(std::roundf(x[j] * id)));
}

// One Q4_0 block: [2 bytes fp16 d][16 bytes: element j in the low nibble, j + 16 in the high].
void quantize_block_q4_0(const float* x, std::uint8_t* blk) {
  float amax = 0.0f, max = 0.0f;
  for (std::size_t j = 0; j < kQk; ++j)
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  const float d = max / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  store_u16(blk, fp32_to_fp16(d));
  auto level = [&](float v) {
    const int q = static_cast<int>(static_cast<std::int8_t>(v * id + 8.5f));  // truncates, as ggml
    return static_cast<std::uint8_t>(q < 15 ? q : 15);
  };
  for (std::size_t j = 0; j < kQk / 2; ++j)
    blk[2 + j] = static_cast<std::uint8_t>(level(x[j]) | (level(x[j + kQk / 2]) << 4));
}

}  // namespace

bool ggml_type_quantizable(GgmlType type) {
  return type == GgmlType::kF32 || type == GgmlType::kF16 || type == GgmlType::kQ8_0 || type == GgmlType::kQ4_0;
}

void quantize(GgmlType type, const float* src, std::size_t n, std::uint8_t* dst) {
  if (!ggml_type_quantizable(type))
    throw Error("quantising to " + ggml_type_name(static_cast<std::uint32_t>(type)) +
                " is not supported; allowed: F32, F16, Q8_0, Q4_0");
  const std::size_t per = ggml_block_elements(type);
  if (n % per != 0)
    throw Error(std::to_string(n) + " elements is not a multiple of the " +
                ggml_type_name(static_cast<std::uint32_t>(type)) + " block size " + std::to_string(per));
  const std::size_t bytes = ggml_block_bytes(type);
  switch (type) {
    case GgmlType::kF32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case GgmlType::kF16:
      for (std::size_t i = 0; i < n; ++i) store_u16(dst + 2 * i, fp32_to_fp16(src[i]));
      return;
    case GgmlType::kQ8_0:
      for (std::size_t b = 0; b < n / kQk; ++b) quantize_block_q8_0(src + b * kQk, dst + b * bytes);
      return;
    case GgmlType::kQ4_0:
      for (std::size_t b = 0; b < n / kQk; ++b) quantize_block_q4_0(src + b * kQk, dst + b * bytes);
      return;
    default:
      break;
  }
}

}  // namespace inferlab
