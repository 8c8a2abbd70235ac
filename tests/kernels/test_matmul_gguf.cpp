// kernels/cpu/matmul_gguf against dequantise-then-matmul (the loader's dequantize(), the truth
// of each block format) on random blocks of every native type, for decode (1 row), the 4-row
// prefill tile and its tails. fp32 activations must match to float rounding; with int8
// activation blocks the reference uses the same quantised activations, so again only rounding
// may differ.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "gguf_block_fixtures.h"
#include "inferlab/error.h"
#include "inferlab/formats/formats.h"
#include "inferlab/support/rng.h"
#include "inferlab/thread_pool.h"
#include "kernels/cpu/decode_prefetch.h"
#include "kernels/cpu/matmul_gguf.h"
#include "kernels/cpu/matmul_int8_act.h"
#include "matmul_checks.h"

namespace inferlab {
namespace {

constexpr GgmlType kNative[] = {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1,  GgmlType::kQ5_0,
                                GgmlType::kQ5_1, GgmlType::kIQ4_NL, GgmlType::kQ2_K, GgmlType::kQ3_K,
                                GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K,  GgmlType::kIQ4_XS};

// y[r, o] = sum_i x[r, i] * w[o, i] in double, and the scale sum_i |x w| for tolerances.
void reference(const std::vector<float>& x, const std::vector<float>& w, int n, int out, int in,
               std::vector<double>& y, std::vector<double>& mag) {
  y.assign(static_cast<std::size_t>(n) * out, 0.0);
  mag.assign(y.size(), 0.0);
  for (int r = 0; r < n; ++r)
    for (int o = 0; o < out; ++o)
      for (int i = 0; i < in; ++i) {
        const double p = static_cast<double>(x[static_cast<std::size_t>(r) * in + i]) * w[static_cast<std::size_t>(o) * in + i];
        y[static_cast<std::size_t>(r) * out + o] += p;
        mag[static_cast<std::size_t>(r) * out + o] += std::fabs(p);
      }
}

struct Case {
  int out, in;
};

class MatmulGguf : public ::testing::TestWithParam<GgmlType> {};

TEST_P(MatmulGguf, MatchesDequantizedMatmulForBothActivationPaths) {
  const GgmlType type = GetParam();
  const int block = static_cast<int>(ggml_block_elements(type));
  ThreadPool pool(2);
  std::uint64_t seed = 40;
  for (Case c : {Case{1, block}, Case{13, 2 * block}, Case{33, 3 * block}, Case{7, 9 * block}})
    for (int n : {1, 3, 4, 9}) {
      SCOPED_TRACE(ggml_type_name(static_cast<std::uint32_t>(type)) + " " + std::to_string(c.out) + "x" +
                   std::to_string(c.in) + ", " + std::to_string(n) + " rows");
      const std::vector<std::uint8_t> blocks = testing::random_gguf_blocks(type, c.out, c.in, ++seed);
      std::vector<float> w(static_cast<std::size_t>(c.out) * c.in);  // [out, in]
      dequantize(type, blocks.data(), w.size(), w.data());
      const std::vector<float> x = testing::random_normal(static_cast<std::size_t>(n) * c.in, ++seed);  // [n, in]
      std::vector<double> want, mag;

      reference(x, w, n, c.out, c.in, want, mag);
      std::vector<float> y(static_cast<std::size_t>(n) * c.out, NAN);  // [n, out]
      cpu::matmul_gguf(type, blocks.data(), x.data(), y.data(), n, c.out, c.in, pool);
      for (std::size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], want[i], 2e-6 * mag[i] + 1e-12) << "fp32 at " << i;

      // int8 activations (blocks of 32, or 256 for the K-quants): the reference sees the same
      // quantised x (xq * xs).
      const int ab = cpu::gguf_act_block(type), nab = c.in / ab;
      std::vector<std::int8_t> xq(x.size());
      std::vector<float> xs(static_cast<std::size_t>(n) * nab);
      cpu::quantize_act_rows(x.data(), n, c.in, xq.data(), xs.data(), pool, ab);
      std::vector<float> xd(x.size());
      for (int r = 0; r < n; ++r)
        for (int i = 0; i < c.in; ++i)
          xd[static_cast<std::size_t>(r) * c.in + i] = static_cast<float>(xq[static_cast<std::size_t>(r) * c.in + i]) *
                                                       xs[static_cast<std::size_t>(r) * nab + i / ab];
      reference(xd, w, n, c.out, c.in, want, mag);
      std::fill(y.begin(), y.end(), NAN);
      cpu::matmul_gguf_act(type, blocks.data(), xq.data(), xs.data(), y.data(), n, c.out, c.in, pool);
      for (std::size_t i = 0; i < y.size(); ++i) ASSERT_NEAR(y[i], want[i], 2e-6 * mag[i] + 1e-12) << "int8 at " << i;
    }
}

INSTANTIATE_TEST_SUITE_P(NativeTypes, MatmulGguf, ::testing::ValuesIn(kNative),
                         [](const ::testing::TestParamInfo<GgmlType>& p) {
                           return ggml_type_name(static_cast<std::uint32_t>(p.param));
                         });

// The decode prefetch (decode_prefetch.h) only moves lines early: the same bits with it off.
TEST(MatmulGguf, DecodeWithOrWithoutPrefetchGivesTheSameBits) {
  ThreadPool pool(2);
  const int out = 37, in = 512;
  for (GgmlType type : kNative) {
    SCOPED_TRACE(ggml_type_name(static_cast<std::uint32_t>(type)));
    const std::vector<std::uint8_t> blocks = testing::random_gguf_blocks(type, out, in, 77);
    const std::vector<float> x = testing::random_normal(static_cast<std::size_t>(in), 78);
    const int ab = cpu::gguf_act_block(type);
    std::vector<std::int8_t> xq(x.size());
    std::vector<float> xs(static_cast<std::size_t>(in / ab));
    cpu::quantize_act_rows(x.data(), 1, in, xq.data(), xs.data(), pool, ab);
    std::vector<float> y[2];
    const int was = cpu::set_decode_prefetch(cpu::kDecodePrefetch);
    for (int off = 0; off < 2; ++off) {
      cpu::set_decode_prefetch(off ? 0 : cpu::kDecodePrefetch);
      y[off].assign(static_cast<std::size_t>(out), NAN);
      cpu::matmul_gguf_act(type, blocks.data(), xq.data(), xs.data(), y[off].data(), 1, out, in, pool);
    }
    cpu::set_decode_prefetch(was);
    EXPECT_EQ(y[0], y[1]);
  }
}

TEST(MatmulGgufErrors, RefusesTypesWithoutKernelAndPartialBlocks) {
  ThreadPool pool(1);
  std::vector<std::uint8_t> w(1024);
  std::vector<float> x(512), y(4);
  const auto iq2 = static_cast<GgmlType>(16);  // IQ2_XXS: a type inferlab does not read
  EXPECT_FALSE(cpu::gguf_native_kernel(iq2));
  EXPECT_FALSE(cpu::gguf_native_kernel(GgmlType::kF32));
  EXPECT_FALSE(cpu::gguf_native_kernel(GgmlType::kF16));
  EXPECT_EQ(cpu::gguf_act_block(GgmlType::kQ4_K), 256);
  EXPECT_EQ(cpu::gguf_act_block(GgmlType::kQ5_K), 256);
  EXPECT_EQ(cpu::gguf_act_block(GgmlType::kQ6_K), 256);
  EXPECT_EQ(cpu::gguf_act_block(GgmlType::kQ2_K), 256);
  EXPECT_EQ(cpu::gguf_act_block(GgmlType::kQ3_K), 256);
  EXPECT_EQ(cpu::gguf_act_block(GgmlType::kIQ4_XS), 256);
  EXPECT_EQ(cpu::gguf_act_block(GgmlType::kQ4_1), 32);
  EXPECT_EQ(cpu::gguf_act_block(GgmlType::kQ5_0), 32);
  EXPECT_EQ(cpu::gguf_act_block(GgmlType::kIQ4_NL), 32);
  EXPECT_EQ(cpu::gguf_act_block(iq2), 32);
  EXPECT_THROW(cpu::matmul_gguf(iq2, w.data(), x.data(), y.data(), 1, 1, 256, pool), Error);
  EXPECT_THROW(cpu::matmul_gguf(GgmlType::kF16, w.data(), x.data(), y.data(), 1, 1, 256, pool), Error);
  EXPECT_THROW(cpu::matmul_gguf(GgmlType::kQ4_K, w.data(), x.data(), y.data(), 1, 1, 128, pool), Error);
  EXPECT_THROW(cpu::matmul_gguf(GgmlType::kQ4_0, w.data(), x.data(), y.data(), 1, 1, 48, pool), Error);
  EXPECT_THROW(cpu::matmul_gguf(GgmlType::kQ3_K, w.data(), x.data(), y.data(), 1, 1, 128, pool), Error);
}

}  // namespace
}  // namespace inferlab
