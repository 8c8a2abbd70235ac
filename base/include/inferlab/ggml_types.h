// GGML tensor types as GGUF files store them: type ids, names, block sizes and bytes, and the
// IEEE half / bfloat16 conversions their scales use. The block layouts themselves are spelled
// out in inferlab/gguf_blocks.h. Part of the base library (below kernels and core).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

namespace inferlab {

// GGML type ids as stored in GGUF tensor infos (only the ones named here are loadable).
enum class GgmlType : std::uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,   // blocks of 32: fp16 d, 16 bytes of nibbles; x = (q - 8) * d
  kQ4_1 = 3,   // blocks of 32: fp16 d, fp16 m, 16 bytes of nibbles; x = q * d + m
  kQ5_0 = 6,   // blocks of 32: fp16 d, 4 bytes of fifth bits, 16 of nibbles; x = (q - 16) * d
  kQ5_1 = 7,   // blocks of 32: fp16 d, fp16 m, fifth bits, nibbles; x = q * d + m
  kQ8_0 = 8,   // blocks of 32: fp16 d, 32 int8; x = q * d
  kIQ4_NL = 20,  // blocks of 32: fp16 d, 16 bytes of nibbles into a 16-value non-linear grid
  // K-quants: super-blocks of 256 in sub-blocks with their own 6- or 8-bit scales
  // (inferlab/gguf_blocks.h spells out the layouts).
  kQ2_K = 10,  // 84 bytes: 16 scale/min nibble pairs, 64 of 2-bit codes, fp16 d, dmin
  kQ3_K = 11,  // 110 bytes: 32 of high bits, 64 of 2-bit codes, 12 of 6-bit scales, fp16 d
  kQ4_K = 12,  // 144 bytes: fp16 d, dmin, 12 bytes of 6-bit scales/mins, 128 of nibbles
  kQ5_K = 13,  // 176 bytes: as Q4_K plus 32 bytes of fifth bits
  kQ6_K = 14,  // 210 bytes: 128 of low nibbles, 64 of high 2 bits, 16 int8 scales, fp16 d
  kIQ4_XS = 23,  // 136 bytes: fp16 d, 6-bit scales per 32, 128 of nibbles into IQ4_NL's grid
  kBF16 = 30,
};

// "F32", "Q4_K", ... for any GGML type id, "type <n>" for an unknown one.
std::string ggml_type_name(std::uint32_t type);
// True for the types dequantize() handles.
bool ggml_type_supported(std::uint32_t type);
// "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, ...": the supported types, for messages.
std::string ggml_supported_type_names();
// True for the block-quantized types (Q*), false for F32, F16, BF16.
bool ggml_type_is_quantized(GgmlType type);
// Elements per block (1 for float types) and bytes per block.
std::size_t ggml_block_elements(GgmlType type);
std::size_t ggml_block_bytes(GgmlType type);
// Bytes of n elements; throws Error unless n is a multiple of the block size.
std::uint64_t ggml_tensor_bytes(GgmlType type, std::uint64_t n);

// IEEE half and bfloat16 conversions (exact for every input; to-half rounds to nearest even).
float fp16_to_fp32(std::uint16_t h);
std::uint16_t fp32_to_fp16(float f);
float bf16_to_fp32(std::uint16_t b);
// To bfloat16 rounding to nearest even (as __float2bfloat16_rn); NaN stays a quiet NaN.
std::uint16_t fp32_to_bf16(float f);

}  // namespace inferlab
