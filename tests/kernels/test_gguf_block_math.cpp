// The arithmetic of the CUDA GGUF kernels (kernels/cuda/gguf_block_math.h) run on the CPU, so
// the block parsing of the GPU's GEMV and dequantiser is checked where no GPU is: every
// sub-block of random Q8_0 / Q4_0 / Q4_1 / Q4_K / Q6_K rows decodes to the loader's dequantised
// values (an independent decoder, itself checked against the gguf package), and its integer dot
// against activation blocks of 32 equals the double-precision sum of weights times activations.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "gguf_block_fixtures.h"
#include "inferlab/formats/formats.h"
#include "inferlab/support/rng.h"
#include "kernels/cuda/gguf_block_math.h"
#include "kernels/ref/matmul_int8.h"

namespace inferlab {
namespace {

namespace g = cuda::gguf;

using Decode = void (*)(const std::uint8_t*, int, g::SubBlock&);
using Dot = float (*)(const g::SubBlock&, const std::int8_t*, float);

struct TypeCase {
  GgmlType type;
  Decode decode;
  Dot dot;
};

template <GgmlType T>
TypeCase type_case() {
  return {T, &g::Block<T>::decode, &g::sub_dot<g::Block<T>::kMin>};
}

std::vector<TypeCase> all_types() {
  return {type_case<GgmlType::kQ8_0>(), type_case<GgmlType::kQ4_0>(), type_case<GgmlType::kQ4_1>(),
          type_case<GgmlType::kQ4_K>(), type_case<GgmlType::kQ6_K>()};
}

TEST(GgufBlockMath, BlockTraitsMatchTheTypeTables) {
  auto expect = [](GgmlType t, int bytes, int subs) {
    EXPECT_EQ(ggml_block_bytes(t), static_cast<std::size_t>(bytes)) << ggml_type_name(static_cast<std::uint32_t>(t));
    EXPECT_EQ(ggml_block_elements(t), static_cast<std::size_t>(32 * subs));
    EXPECT_TRUE(g::runs(t));
  };
  expect(GgmlType::kQ8_0, g::Block<GgmlType::kQ8_0>::kBytes, g::Block<GgmlType::kQ8_0>::kSubs);
  expect(GgmlType::kQ4_0, g::Block<GgmlType::kQ4_0>::kBytes, g::Block<GgmlType::kQ4_0>::kSubs);
  expect(GgmlType::kQ4_1, g::Block<GgmlType::kQ4_1>::kBytes, g::Block<GgmlType::kQ4_1>::kSubs);
  expect(GgmlType::kQ4_K, g::Block<GgmlType::kQ4_K>::kBytes, g::Block<GgmlType::kQ4_K>::kSubs);
  expect(GgmlType::kQ6_K, g::Block<GgmlType::kQ6_K>::kBytes, g::Block<GgmlType::kQ6_K>::kSubs);
  for (GgmlType t : {GgmlType::kQ5_0, GgmlType::kQ5_1, GgmlType::kQ5_K, GgmlType::kQ2_K, GgmlType::kQ3_K,
                     GgmlType::kIQ4_NL, GgmlType::kIQ4_XS, GgmlType::kF32, GgmlType::kF16})
    EXPECT_FALSE(g::runs(t)) << ggml_type_name(static_cast<std::uint32_t>(t));
}

TEST(GgufBlockMath, Dot4AndMinusBytesAreBytewise) {
  Rng rng(3);
  for (int trial = 0; trial < 2000; ++trial) {
    const auto a = static_cast<std::uint32_t>(rng.next_u64()), b = static_cast<std::uint32_t>(rng.next_u64());
    int want = 5;
    for (int k = 0; k < 4; ++k)
      want += static_cast<std::int8_t>(a >> (8 * k)) * static_cast<std::int8_t>(b >> (8 * k));
    EXPECT_EQ(g::dot4(static_cast<int>(a), static_cast<int>(b), 5), want);
    const std::uint32_t codes = a & 0x3F3F3F3Fu;  // 0..63, Q6_K's range
    for (int c : {8, 32}) {
      const auto got = static_cast<std::uint32_t>(g::minus_bytes(static_cast<int>(codes), c));
      for (int k = 0; k < 4; ++k)
        EXPECT_EQ(static_cast<std::int8_t>(got >> (8 * k)), static_cast<int>((codes >> (8 * k)) & 0xFF) - c);
    }
  }
  EXPECT_EQ(g::dot4(static_cast<int>(0x80808080u), static_cast<int>(0x80808080u), 0), 4 * 128 * 128);
}

// Rows of 512 (two K super-blocks) at odd offsets: row 1 of Q8_0 / Q4_0 / Q6_K starts on a
// 2-byte boundary only, which the loads must allow.
TEST(GgufBlockMath, SubBlocksDecodeToTheLoadersValues) {
  const int out = 3, in = 512;
  for (const TypeCase& tc : all_types()) {
    SCOPED_TRACE(ggml_type_name(static_cast<std::uint32_t>(tc.type)));
    const std::vector<std::uint8_t> blocks = testing::random_gguf_blocks(tc.type, out, in, 11);
    std::vector<float> w(static_cast<std::size_t>(out) * in);
    dequantize(tc.type, blocks.data(), w.size(), w.data());
    const std::size_t row_bytes = ggml_tensor_bytes(tc.type, in);
    int nonzero = 0;
    for (int o = 0; o < out; ++o)
      for (int s = 0; s < in / 32; ++s) {
        g::SubBlock sb;
        tc.decode(blocks.data() + o * row_bytes, s, sb);
        for (int i = 0; i < 32; ++i) {
          const float want = w[static_cast<std::size_t>(o) * in + 32 * s + i];
          ASSERT_FLOAT_EQ(g::weight_at(sb, i), want) << "row " << o << " sub-block " << s << " weight " << i;
          nonzero += want != 0.0f;
        }
      }
    EXPECT_GT(nonzero, out * in / 2);  // the blocks are not degenerate
  }
}

TEST(GgufBlockMath, SubBlockDotsEqualTheDoubleSumOverActivationBlocks) {
  const int out = 2, in = 768;  // Q4_K / Q6_K: three super-blocks
  for (const TypeCase& tc : all_types()) {
    if (in % static_cast<int>(ggml_block_elements(tc.type)) != 0) continue;
    SCOPED_TRACE(ggml_type_name(static_cast<std::uint32_t>(tc.type)));
    const std::vector<std::uint8_t> blocks = testing::random_gguf_blocks(tc.type, out, in, 5);
    std::vector<float> w(static_cast<std::size_t>(out) * in), x(static_cast<std::size_t>(in));
    dequantize(tc.type, blocks.data(), w.size(), w.data());
    Rng rng(9);
    for (float& v : x) v = static_cast<float>(rng.normal() * 3.0);
    std::vector<std::int8_t> xq(x.size());
    std::vector<float> xs(static_cast<std::size_t>(in / 32));
    ref::quantize_act_rows(x.data(), 1, in, xq.data(), xs.data());
    const std::size_t row_bytes = ggml_tensor_bytes(tc.type, in);
    for (int o = 0; o < out; ++o) {
      double row_got = 0, row_want = 0, row_mag = 0;
      for (int s = 0; s < in / 32; ++s) {
        g::SubBlock sb;
        tc.decode(blocks.data() + o * row_bytes, s, sb);
        const float got = tc.dot(sb, xq.data() + 32 * s, xs[static_cast<std::size_t>(s)]);
        double want = 0, mag = 0;
        for (int i = 0; i < 32; ++i) {
          const double term = static_cast<double>(w[static_cast<std::size_t>(o) * in + 32 * s + i]) *
                              xq[static_cast<std::size_t>(32 * s + i)] * xs[static_cast<std::size_t>(s)];
          want += term;
          mag += std::fabs(term);
        }
        ASSERT_NEAR(got, want, 1e-5 * mag + 1e-12) << "row " << o << " sub-block " << s;
        row_got += got;
        row_want += want;
        row_mag += mag;
      }
      EXPECT_NEAR(row_got, row_want, 1e-5 * row_mag);
    }
  }
}

// The GEMV's lanes as gguf_mmvq.cu runs them (32 lanes, each row_partial, summed), for 1..8
// activation rows, against the double sum over the same activation blocks: the kernel's indexing
// of rows, sub-blocks and activation blocks, on the CPU.
template <GgmlType T, int N>
void check_gemv_rows(int out, int in) {
  SCOPED_TRACE(ggml_type_name(static_cast<std::uint32_t>(T)) + " rows " + std::to_string(N));
  const std::vector<std::uint8_t> blocks = testing::random_gguf_blocks(T, out, in, 21);
  std::vector<float> w(static_cast<std::size_t>(out) * in), x(static_cast<std::size_t>(N) * in);
  dequantize(T, blocks.data(), w.size(), w.data());
  Rng rng(N);
  for (float& v : x) v = static_cast<float>(rng.normal());
  std::vector<std::int8_t> xq(x.size());
  std::vector<float> xs(x.size() / 32);
  ref::quantize_act_rows(x.data(), N, in, xq.data(), xs.data());
  const std::size_t row_bytes = ggml_tensor_bytes(T, in);
  for (int o = 0; o < out; ++o) {
    float sum[N] = {};
    for (int lane = 0; lane < 32; ++lane) {
      float acc[N] = {};
      g::row_partial<T, N>(blocks.data() + o * row_bytes, xq.data(), xs.data(), in, lane, 32, acc);
      for (int r = 0; r < N; ++r) sum[r] += acc[r];
    }
    for (int r = 0; r < N; ++r) {
      double want = 0, mag = 0;
      for (int i = 0; i < in; ++i) {
        const std::size_t at = static_cast<std::size_t>(r) * in + i;
        const double term = static_cast<double>(w[static_cast<std::size_t>(o) * in + i]) * xq[at] * xs[at / 32];
        want += term;
        mag += std::fabs(term);
      }
      ASSERT_NEAR(sum[r], want, 1e-5 * mag) << "output " << o << " activation row " << r;
    }
  }
}

template <GgmlType T>
void check_gemv_types(int out, int in) {
  check_gemv_rows<T, 1>(out, in);
  check_gemv_rows<T, 3>(out, in);
  check_gemv_rows<T, 8>(out, in);
}

TEST(GgufBlockMath, GemvLanesSumToTheDoubleDotOfEveryRow) {
  const int out = 5, in = 2304;  // 72 sub-blocks: lanes take 2 or 3 each; 9 K super-blocks
  check_gemv_types<GgmlType::kQ8_0>(out, in);
  check_gemv_types<GgmlType::kQ4_0>(out, in);
  check_gemv_types<GgmlType::kQ4_1>(out, in);
  check_gemv_types<GgmlType::kQ4_K>(out, in);
  check_gemv_types<GgmlType::kQ6_K>(out, in);
}

}  // namespace
}  // namespace inferlab
