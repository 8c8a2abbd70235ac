// The half-precision conversions (bit-exact, rounding to nearest even); the half-weight kernels
// are tested in test_gemm_panels_half.cpp and test_gemm_amx_bf16.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "kernels/ref/half.h"

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

}  // namespace
}  // namespace inferlab
