// The half-precision conversions (bit-exact, rounding to nearest even) and the CPU
// half-weight matmul against the reference matmul over the widened weights.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "inferlab/support/rng.h"
#include "inferlab/thread_pool.h"
#include "kernels/cpu/matmul_half.h"
#include "kernels/ref/half.h"
#include "kernels/ref/ops.h"

namespace inferlab {
namespace {

TEST(HalfConversions, F16KnownValues) {
  EXPECT_EQ(ref::float_to_f16(1.0f), 0x3c00);
  EXPECT_EQ(ref::float_to_f16(-2.0f), 0xc000);
  EXPECT_EQ(ref::float_to_f16(65504.0f), 0x7bff);    // largest finite
  EXPECT_EQ(ref::float_to_f16(65519.0f), 0x7bff);    // rounds down to it
  EXPECT_EQ(ref::float_to_f16(65520.0f), 0x7c00);    // rounds up to inf
  EXPECT_EQ(ref::float_to_f16(0x1p-24f), 0x0001);    // smallest subnormal
  EXPECT_EQ(ref::float_to_f16(0x1p-25f), 0x0000);    // a tie: to even (zero)
  EXPECT_EQ(ref::float_to_f16(0x1.8p-25f), 0x0001);  // above the tie
  EXPECT_EQ(ref::float_to_f16(1.0f + 0x1p-11f), 0x3c00);  // tie between 1 and 1+2^-10: even
  EXPECT_EQ(ref::float_to_f16(1.0f + 0x1.8p-11f), 0x3c01);
  EXPECT_TRUE(std::isnan(ref::f16_to_float(ref::float_to_f16(std::nanf("")))));
  EXPECT_EQ(ref::f16_to_float(0x7c00), std::numeric_limits<float>::infinity());
  for (std::uint32_t h = 0; h < 0x7c00; ++h)  // every finite positive f16 round-trips exactly
    ASSERT_EQ(ref::float_to_f16(ref::f16_to_float(static_cast<std::uint16_t>(h))), h) << h;
}

TEST(HalfConversions, Bf16KnownValues) {
  EXPECT_EQ(ref::float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(ref::float_to_bf16(1.0f + 0x1p-8f), 0x3f80);    // tie: even
  EXPECT_EQ(ref::float_to_bf16(1.0f + 0x1.8p-8f), 0x3f81);  // above the tie
  EXPECT_EQ(ref::float_to_bf16(1.0f + 0x1p-7f + 0x1p-8f), 0x3f82);  // tie from odd: up to even
  EXPECT_EQ(ref::bf16_to_float(0x3f81), 1.0f + 0x1p-7f);
  EXPECT_TRUE(std::isnan(ref::bf16_to_float(ref::float_to_bf16(std::nanf("")))));
  EXPECT_EQ(ref::float_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // rounds to inf
}

TEST(MatmulHalf, MatchesReferenceOverWidenedWeights) {
  ThreadPool pool(2);
  for (auto format : {cpu::HalfFormat::kF16, cpu::HalfFormat::kBF16})
    for (auto [n, out, in] : {std::tuple{1, 1, 1}, std::tuple{3, 37, 129}, std::tuple{5, 64, 576}}) {
      Rng rng(static_cast<std::uint64_t>(n * 7 + in));
      std::vector<float> x(static_cast<std::size_t>(n) * in), wf(static_cast<std::size_t>(out) * in);
      std::vector<std::uint16_t> w(wf.size());
      for (float& v : x) v = static_cast<float>(rng.normal());
      for (std::size_t i = 0; i < w.size(); ++i) {
        const float f = static_cast<float>(0.1 * rng.normal());
        w[i] = format == cpu::HalfFormat::kF16 ? ref::float_to_f16(f) : ref::float_to_bf16(f);
        wf[i] = format == cpu::HalfFormat::kF16 ? ref::f16_to_float(w[i]) : ref::bf16_to_float(w[i]);
      }
      std::vector<float> want(static_cast<std::size_t>(n) * out), got(want.size(), std::nanf(""));
      ref::matmul(x.data(), wf.data(), want.data(), n, out, in);
      cpu::matmul_half(x.data(), w.data(), got.data(), n, out, in, format, pool);
      for (std::size_t i = 0; i < want.size(); ++i)
        ASSERT_NEAR(got[i], want[i], 1e-5f * (1.0f + std::fabs(want[i]) + std::sqrt(static_cast<float>(in)))) << i;
    }
}

}  // namespace
}  // namespace inferlab
