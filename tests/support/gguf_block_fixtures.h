// Random GGML block matrices for the native GGUF kernels' tests and benchmark: every code byte
// random, every fp16 scale (and min) a random value of the size real checkpoints store (so sums
// stay finite), K-quant sub-block scales random over their full 6- or 8-bit range.
#pragma once
#include <cstdint>
#include <vector>

#include "inferlab/formats/formats.h"
#include "inferlab/support/rng.h"
#include "inferlab/gguf_blocks.h"

namespace inferlab::testing {

// W [out, in] as `out` rows of GGML blocks of `type` (in a multiple of its block).
inline std::vector<std::uint8_t> random_gguf_blocks(GgmlType type, int out, int in, std::uint64_t seed) {
  Rng rng(seed);
  const std::uint64_t n = static_cast<std::uint64_t>(out) * static_cast<std::uint64_t>(in);
  std::vector<std::uint8_t> b(ggml_tensor_bytes(type, n));
  for (std::uint8_t& byte : b) byte = static_cast<std::uint8_t>(rng.next_u64());
  auto put_half = [&](std::size_t at, double lo, double hi) {
    const std::uint16_t h = fp32_to_fp16(static_cast<float>(lo + (hi - lo) * rng.uniform()));
    b[at] = static_cast<std::uint8_t>(h & 0xFF);
    b[at + 1] = static_cast<std::uint8_t>(h >> 8);
  };
  const std::size_t bytes = ggml_block_bytes(type);
  for (std::size_t at = 0; at < b.size(); at += bytes) switch (type) {
      case GgmlType::kQ8_0:
      case GgmlType::kQ4_0:
      case GgmlType::kQ5_0:
      case GgmlType::kIQ4_NL:
        put_half(at, 0.001, 0.02);  // d
        break;
      case GgmlType::kQ4_1:
      case GgmlType::kQ5_1:
        put_half(at, 0.001, 0.02);   // d
        put_half(at + 2, -0.1, 0.0);  // m
        break;
      case GgmlType::kQ2_K:
        put_half(at + 80, 1e-4, 1e-3);  // d, dmin (at the end)
        put_half(at + 82, 1e-4, 1e-3);
        break;
      case GgmlType::kQ3_K:
        put_half(at + 108, 1e-4, 1e-3);  // d (at the end)
        break;
      case GgmlType::kIQ4_XS:
        put_half(at, 1e-4, 1e-3);  // d
        break;
      case GgmlType::kQ4_K:
      case GgmlType::kQ5_K:
        put_half(at, 1e-4, 1e-3);      // d
        put_half(at + 2, 1e-4, 1e-3);  // dmin
        break;
      case GgmlType::kQ6_K:
        put_half(at + 208, 1e-4, 1e-3);  // d (at the end)
        break;
      default:
        break;
    }
  return b;
}

}  // namespace inferlab::testing
