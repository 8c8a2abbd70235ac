// The loader's dequantisation of every quantised GGML type it takes equals, bit for bit, the gguf
// Python package's (gguf.quants.dequantize) on committed golden vectors: tests/data/gguf_golden,
// random blocks (wild scales included: subnormal, huge, infinite, NaN) and the package's values,
// written by tests/gguf/make_golden.py. Runs without the package (unlike ctest's
// gguf.dequant_matches_gguf_package, which checks fresh random blocks where it is installed).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <vector>

#include "inferlab/formats/formats.h"
#include "inferlab/ggml_types.h"
#include "test_support.h"

namespace inferlab {
namespace {

std::vector<char> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in.good()) << path << " is missing (tests/gguf/make_golden.py writes it)";
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class GgufGolden : public ::testing::TestWithParam<GgmlType> {};

TEST_P(GgufGolden, DequantizeEqualsTheGgufPackageBitForBit) {
  const GgmlType type = GetParam();
  const std::string name = ggml_type_name(static_cast<std::uint32_t>(type));
  const std::string base = testing::source_dir() + "/tests/data/gguf_golden/" + name;
  const std::vector<char> blocks = read_all(base + ".blocks"), want_bytes = read_all(base + ".f32");
  ASSERT_FALSE(want_bytes.empty());
  ASSERT_EQ(want_bytes.size() % sizeof(float), 0u);
  const std::size_t n = want_bytes.size() / sizeof(float);
  ASSERT_EQ(blocks.size(), ggml_tensor_bytes(type, n)) << name << ": blocks and values disagree in size";
  std::vector<float> got(n);
  dequantize(type, reinterpret_cast<const std::uint8_t*>(blocks.data()), n, got.data());
  int mismatches = 0, nans = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint32_t w = 0;  // little-endian float32, as numpy's "<f4" wrote it
    for (int b = 3; b >= 0; --b) w = (w << 8) | static_cast<unsigned char>(want_bytes[4 * i + static_cast<std::size_t>(b)]);
    const float want = std::bit_cast<float>(w);
    const bool same = std::isnan(want) ? std::isnan(got[i]) : std::bit_cast<std::uint32_t>(got[i]) == w;
    nans += std::isnan(want) ? 1 : 0;
    if (!same && ++mismatches <= 5)
      ADD_FAILURE() << name << " value " << i << " (block " << i / ggml_block_elements(type) << "): inferlab " << got[i]
                    << ", gguf " << want;
  }
  EXPECT_EQ(mismatches, 0) << name << ": " << mismatches << " of " << n << " values differ";
  EXPECT_LT(nans, static_cast<int>(n) / 4) << name << ": the golden values are mostly NaN; they test little";
}

INSTANTIATE_TEST_SUITE_P(Types, GgufGolden,
                         ::testing::Values(GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0,
                                           GgmlType::kQ5_1, GgmlType::kIQ4_NL, GgmlType::kQ2_K, GgmlType::kQ3_K,
                                           GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K, GgmlType::kIQ4_XS),
                         [](const ::testing::TestParamInfo<GgmlType>& p) {
                           return ggml_type_name(static_cast<std::uint32_t>(p.param));
                         });

// Every quantised type the loader takes has golden vectors: a type added to ggml_type_supported
// without them fails here.
TEST(GgufGolden, EverySupportedBlockTypeHasVectors) {
  for (std::uint32_t t = 0; t < 64; ++t) {
    if (!ggml_type_supported(t) || !ggml_type_is_quantized(static_cast<GgmlType>(t))) continue;
    const std::string path = testing::source_dir() + "/tests/data/gguf_golden/" + ggml_type_name(t) + ".f32";
    EXPECT_TRUE(std::ifstream(path).good()) << ggml_type_name(t) << " is loadable but has no golden vectors: run tests/gguf/make_golden.py";
  }
}

}  // namespace
}  // namespace inferlab
