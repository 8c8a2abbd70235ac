// The AMX bf16 prefill GEMM (kernels/cpu/gemm_amx_bf16.h) against a float64 product of the
// operands it is meant to multiply (bf16-rounded, or split into two bf16 terms), over shapes that
// are not multiples of the tiles (rows 1, 15, 16, 17, 129; in not a multiple of 32); NaN
// handling; and HalfLinear's fallback to the fp32 panels (bit for bit the path it had before).
// Skipped where the tiles do not run (no AMX-BF16, the kernel refusing the state, INFERLAB_AMX=0).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <tuple>
#include <vector>

#include "inferlab/device/device.h"
#include "inferlab/error.h"
#include "inferlab/thread_pool.h"
#include "kernels/cpu/amx.h"
#include "kernels/cpu/gemm_amx_bf16.h"
#include "kernels/ref/half.h"
#include "matmul_checks.h"
#include "plugins/common/quantization/half_linear.h"

namespace inferlab {
namespace {

using testing::random_normal;

#define REQUIRE_AMX_BF16()                                                                      \
  if (!cpu::amx_bf16_enabled()) GTEST_SKIP() << "AMX bf16 tiles not running here (built: " \
                                              << cpu::amx_bf16_built() << ")"

float bf16_round(float v) { return ref::bf16_to_float(ref::float_to_bf16(v)); }

std::uint16_t to_half(float v, cpu::HalfFormat f) {
  return f == cpu::HalfFormat::kF16 ? ref::float_to_f16(v) : ref::float_to_bf16(v);
}
float from_half(std::uint16_t h, cpu::HalfFormat f) {
  return f == cpu::HalfFormat::kF16 ? ref::f16_to_float(h) : ref::bf16_to_float(h);
}

// Each output within tol · Σ|x·w| (+1e-6) of the float64 product of xr and wr, and not NaN.
void expect_near_product(const std::vector<float>& y, const std::vector<float>& xr, const std::vector<float>& wr, int n,
                         int out, int in, double tol) {
  for (int r = 0; r < n; ++r)
    for (int c = 0; c < out; ++c) {
      double exact = 0, mag = 0;
      for (int k = 0; k < in; ++k) {
        const double p = static_cast<double>(xr[static_cast<std::size_t>(r) * in + k]) * wr[static_cast<std::size_t>(c) * in + k];
        exact += p;
        mag += std::fabs(p);
      }
      const float g = y[static_cast<std::size_t>(r) * out + c];
      ASSERT_FALSE(std::isnan(g)) << "n=" << n << " r=" << r << " c=" << c;
      ASSERT_LE(std::fabs(g - exact), tol * mag + 1e-6) << "n=" << n << " out=" << out << " in=" << in << " r=" << r
                                                        << " c=" << c;
    }
}

const std::vector<std::tuple<int, int, int>> kShapes = {
    {1, 37, 67}, {15, 16, 32}, {16, 48, 96}, {17, 37, 67}, {129, 70, 300}, {40, 33, 1}};

// x_terms = 1, weights one term: the float64 product of bf16(x) and bf16(w); only the fp32
// summation differs (1e-5 of Σ|x·w| covers in <= 300 fp32 additions).
TEST(GemmAmxBf16, RoundedOperandsMatchFloat64Product) {
  REQUIRE_AMX_BF16();
  ThreadPool pool(2);
  for (cpu::HalfFormat f : {cpu::HalfFormat::kBF16, cpu::HalfFormat::kF16})
    for (auto [n, out, in] : kShapes) {
      const auto x = random_normal(static_cast<std::size_t>(n) * in, 1000 + n);
      const auto w = random_normal(static_cast<std::size_t>(out) * in, 2000 + out);
      std::vector<std::uint16_t> bits;
      std::vector<float> xr, wr;
      for (float v : w) {
        bits.push_back(to_half(v, f));
        wr.push_back(bf16_round(from_half(bits.back(), f)));  // f16 weights rounded again to bf16
      }
      for (float v : x) xr.push_back(bf16_round(v));
      const auto packed = cpu::pack_amx_bf16(bits.data(), out, in, f, 1);
      std::vector<float> y(static_cast<std::size_t>(n) * out, std::nanf(""));
      cpu::gemm_amx_bf16(x.data(), packed, 1, y.data(), n, pool);
      expect_near_product(y, xr, wr, n, out, in, 1e-5);
    }
}

// Split: exact stored weights (f16 as two terms), x to about 2^-16: within 2^-14 of Σ|x·w| of
// the float64 product of the fp32 x and the stored weights, far inside f16's 2^-11.
TEST(GemmAmxBf16, SplitTermsMatchTheUnroundedActivations) {
  REQUIRE_AMX_BF16();
  ThreadPool pool(2);
  for (cpu::HalfFormat f : {cpu::HalfFormat::kBF16, cpu::HalfFormat::kF16})
    for (auto [n, out, in] : kShapes) {
      const auto x = random_normal(static_cast<std::size_t>(n) * in, 3000 + n);
      const auto w = random_normal(static_cast<std::size_t>(out) * in, 4000 + out);
      std::vector<std::uint16_t> bits;
      std::vector<float> wr;
      for (float v : w) {
        bits.push_back(to_half(v, f));
        wr.push_back(from_half(bits.back(), f));
      }
      const auto packed = cpu::pack_amx_bf16(bits.data(), out, in, f, f == cpu::HalfFormat::kF16 ? 2 : 1);
      std::vector<float> y(static_cast<std::size_t>(n) * out, std::nanf(""));
      cpu::gemm_amx_bf16(x.data(), packed, 2, y.data(), n, pool);
      expect_near_product(y, x, wr, n, out, in, 0x1p-14);
    }
}

// A NaN in one row of x reaches only that row's outputs; an infinite x gives ±inf, not NaN
// (the split's lo term of inf is 0, not inf - inf).
TEST(GemmAmxBf16, NanStaysInItsRowAndInfStaysInfinite) {
  REQUIRE_AMX_BF16();
  ThreadPool pool(2);
  const int n = 20, out = 19, in = 45;
  auto x = random_normal(static_cast<std::size_t>(n) * in, 5);
  std::vector<std::uint16_t> bits(static_cast<std::size_t>(out) * in, ref::float_to_bf16(0.5f));
  x[3 * in + 7] = std::numeric_limits<float>::quiet_NaN();
  for (int k = 0; k < in; ++k) x[5 * in + k] = 1.0f;
  x[5 * in + 2] = std::numeric_limits<float>::infinity();
  for (int terms : {1, 2}) {
    const auto packed = cpu::pack_amx_bf16(bits.data(), out, in, cpu::HalfFormat::kBF16, 1);
    std::vector<float> y(static_cast<std::size_t>(n) * out, std::nanf(""));
    cpu::gemm_amx_bf16(x.data(), packed, terms, y.data(), n, pool);
    for (int r = 0; r < n; ++r)
      for (int c = 0; c < out; ++c) {
        const float v = y[static_cast<std::size_t>(r) * out + c];
        if (r == 3) EXPECT_TRUE(std::isnan(v)) << terms << " " << c;
        else if (r == 5) EXPECT_TRUE(std::isinf(v) && v > 0) << terms << " " << c << " " << v;
        else EXPECT_TRUE(std::isfinite(v)) << terms << " r=" << r << " c=" << c;
      }
  }
}

TEST(GemmAmxBf16, RefusesBadArgumentsAndRunsOnlyWhereEnabled) {
  const std::uint16_t one = ref::float_to_bf16(1.0f);
  EXPECT_THROW(cpu::pack_amx_bf16(&one, 0, 1, cpu::HalfFormat::kBF16, 1), Error);
  EXPECT_THROW(cpu::pack_amx_bf16(&one, 1, 1, cpu::HalfFormat::kBF16, 3), Error);
  const auto packed = cpu::pack_amx_bf16(&one, 1, 1, cpu::HalfFormat::kBF16, 1);
  ThreadPool pool(1);
  float x = 1.0f, y = 0.0f;
  EXPECT_THROW(cpu::gemm_amx_bf16(&x, packed, 0, &y, 1, pool), Error);
  const bool before = cpu::set_amx_bf16(false);
  EXPECT_THROW(cpu::gemm_amx_bf16(&x, packed, 1, &y, 1, pool), Error);
  cpu::set_amx_bf16(before);
}

// HalfLinear: below 16 rows (24 with f16's two weight terms), with amx = off, or with the tiles
// switched off (INFERLAB_AMX=0's switch), forward is the fp32 panels' result bit for bit; from
// there on it is the tiles'.
TEST(GemmAmxBf16, HalfLinearFallsBackToThePanelsBitForBit) {
  REQUIRE_AMX_BF16();
  CpuDevice device(2);
  const int out = 70, in = 100;
  const auto w = random_normal(static_cast<std::size_t>(out) * in, 9);
  for (cpu::HalfFormat f : {cpu::HalfFormat::kBF16, cpu::HalfFormat::kF16}) {
    const HalfLinear panels(w, out, in, f, device, HalfAmx::kOff);
    const HalfLinear tiles(w, out, in, f, device, HalfAmx::kSplit);
    const int from = cpu::amx_bf16_min_rows(f == cpu::HalfFormat::kF16 ? 2 : 1);
    for (int n : {1, 6, 7, 15, 16, 23, 24, 33}) {
      const auto x = random_normal(static_cast<std::size_t>(n) * in, 100 + n);
      std::vector<float> want(static_cast<std::size_t>(n) * out), got(want.size());
      panels.forward(x.data(), want.data(), n, device);
      tiles.forward(x.data(), got.data(), n, device);
      EXPECT_FALSE(panels.uses_amx(n));
      EXPECT_EQ(tiles.uses_amx(n), n >= from) << n;
      if (n < from) EXPECT_EQ(got, want) << n;
      else EXPECT_NE(got, want) << n;  // a different summation: the tiles really ran
      const bool before = cpu::set_amx_bf16(false);
      EXPECT_FALSE(tiles.uses_amx(n));
      tiles.forward(x.data(), got.data(), n, device);
      cpu::set_amx_bf16(before);
      EXPECT_EQ(got, want) << n;
    }
  }
}

TEST(GemmAmxBf16, ModeNamesRoundTripAndUnknownIsRefused) {
  for (HalfAmx m : {HalfAmx::kOff, HalfAmx::kBf16, HalfAmx::kSplit}) EXPECT_EQ(half_amx_from_name(half_amx_name(m)), m);
  EXPECT_THROW(half_amx_from_name("on"), Error);
}

}  // namespace
}  // namespace inferlab
