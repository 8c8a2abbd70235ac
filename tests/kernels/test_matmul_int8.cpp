// kernels/cpu/matmul_int8 against the reference over awkward shapes, and the quantizer's
// format guarantees.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "inferlab/support/rng.h"
#include "inferlab/thread_pool.h"
#include "kernels/cpu/matmul_int8.h"
#include "kernels/cpu/matmul_int8_act.h"
#include "kernels/ref/matmul_int8.h"
#include "matmul_checks.h"

namespace inferlab {
namespace {

TEST(QuantizeInt8Rows, ScalesRangeAndRoundingError) {
  const int out = 5, in = 37;
  std::vector<float> w = testing::random_normal(static_cast<std::size_t>(out) * in, 11, 0.3);
  for (int i = 0; i < in; ++i) w[2 * in + i] = 0.0f;  // an all-zero row
  w[4 * in + 3] = -2.54f;                             // row 4's extreme is negative
  std::vector<std::int8_t> q(w.size());
  std::vector<float> scale(out);
  ref::quantize_int8_rows(w.data(), out, in, q.data(), scale.data());
  EXPECT_EQ(scale[2], 0.0f);
  EXPECT_FLOAT_EQ(scale[4], 2.54f / 127.0f);
  EXPECT_EQ(q[4 * in + 3], -127);
  for (int o = 0; o < out; ++o) {
    float amax = 0;
    for (int i = 0; i < in; ++i) amax = std::max(amax, std::fabs(w[o * in + i]));
    EXPECT_FLOAT_EQ(scale[o], amax / 127.0f);
    for (int i = 0; i < in; ++i) {
      int v = q[o * in + i];
      EXPECT_GE(v, -127);
      EXPECT_LE(v, 127);
      if (o == 2) {
        EXPECT_EQ(v, 0);
      }
      EXPECT_LE(std::fabs(w[o * in + i] - scale[o] * v), scale[o] * 0.5f * (1 + 1e-5f));
    }
  }
}

TEST(MatmulInt8, RefMatchesDequantizedDot) {
  const int n = 2, out = 3, in = 4;
  const std::vector<float> x = {1, -2, 0.5f, 3, 0, 1, 1, -1};
  const std::vector<std::int8_t> q = {1, 2, 3, 4, -127, 0, 127, 5, 10, -10, 20, -20};
  const std::vector<float> scale = {0.5f, 0.01f, 2.0f};
  std::vector<float> y(n * out);
  ref::matmul_int8(x.data(), q.data(), scale.data(), y.data(), n, out, in);
  EXPECT_FLOAT_EQ(y[0], 0.5f * (1 - 4 + 1.5f + 12));
  EXPECT_FLOAT_EQ(y[1], 0.01f * (-127 + 63.5f + 15));
  EXPECT_FLOAT_EQ(y[2], 2.0f * (10 + 20 + 10 - 60));
  EXPECT_FLOAT_EQ(y[3], 0.5f * (0 + 2 + 3 - 4));
  EXPECT_FLOAT_EQ(y[4], 0.01f * (0 + 0 + 127 - 5));
  EXPECT_FLOAT_EQ(y[5], 2.0f * (0 - 10 + 20 + 20));
}

TEST(MatmulInt8, FastMatchesRefOverAwkwardShapes) {
  ThreadPool pool1(1), pool2(2);
  const int ns[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 16, 17, 129};  // 5..16: the AMX path where it runs
  const int outs[] = {1, 3, 8, 13, 129};
  const int ins[] = {1, 7, 8, 9, 33, 48, 200, 257};  // 200, 257: 64-byte steps, then 16s, then a tail
  for (int n : ns)
    for (int out : outs)
      for (int in : ins) {
        std::uint64_t seed = static_cast<std::uint64_t>(n * 10007 + out * 101 + in);
        std::vector<float> x = testing::random_normal(static_cast<std::size_t>(n) * in, seed);
        std::vector<float> w = testing::random_normal(static_cast<std::size_t>(out) * in, seed + 1, 0.05);
        std::vector<std::int8_t> q(w.size());
        std::vector<float> scale(out);
        ref::quantize_int8_rows(w.data(), out, in, q.data(), scale.data());
        std::vector<float> want(static_cast<std::size_t>(n) * out);
        ref::matmul_int8(x.data(), q.data(), scale.data(), want.data(), n, out, in);
        for (ThreadPool* pool : {&pool1, &pool2}) {
          std::vector<float> got(want.size(), std::nanf(""));
          cpu::matmul_int8(x.data(), q.data(), scale.data(), got.data(), n, out, in, *pool);
          for (int r = 0; r < n; ++r)
            for (int o = 0; o < out; ++o) {
              // fp32 accumulation error scales with the sum of |terms|.
              double mag = 0;
              for (int i = 0; i < in; ++i)
                mag += std::fabs(x[r * in + i] * q[o * in + i]) * scale[o];
              float g = got[r * out + o], e = want[r * out + o];
              ASSERT_FALSE(std::isnan(g)) << "n=" << n << " out=" << out << " in=" << in;
              ASSERT_NEAR(g, e, 1e-5 * mag + 1e-7)
                  << "n=" << n << " out=" << out << " in=" << in << " r=" << r << " o=" << o;
            }
        }
      }
}

TEST(MatmulInt8, ZeroRowsGiveZeroNotNaN) {
  ThreadPool pool(2);
  for (int n : {3, 6}) {  // 6: the AMX path where it runs
    const int out = 9, in = 20;
    std::vector<float> x = testing::random_normal(static_cast<std::size_t>(n) * in, 5);
    std::vector<float> w(out * in, 0.0f);
    std::vector<std::int8_t> q(w.size());
    std::vector<float> scale(out);
    ref::quantize_int8_rows(w.data(), out, in, q.data(), scale.data());
    std::vector<float> y(static_cast<std::size_t>(n) * out, std::nanf(""));
    cpu::matmul_int8(x.data(), q.data(), scale.data(), y.data(), n, out, in, pool);
    for (float v : y) EXPECT_EQ(v, 0.0f);
  }
}

// Up to 5 token rows every product is exact, whichever path runs (the row stream's FMAs, or
// matmul_int8_amx with x as three bf16 parts): one nonzero code per weight row makes each output
// a single product, so it must be fp32's correctly rounded q * x, then * scale (a few ulp). x
// has all 24 mantissa bits; as hi + lo bf16 (~16 bits) it misses by ~1e-5.
TEST(MatmulInt8, UpToFiveRowsTheProductsAreExact) {
  ThreadPool pool(2);
  const int out = 37;
  for (int in : {100, 3001})  // 3001: 3 rows and more on the AMX tiles where they run
  for (int n = 1; n <= 5; ++n) {
    std::vector<float> x = testing::random_normal(static_cast<std::size_t>(n) * in, 40 + n);
    for (float& v : x) v *= 1.0f + 0x1.555554p-9f;  // spread the mantissa bits
    std::vector<std::int8_t> q(static_cast<std::size_t>(out) * in, 0);
    std::vector<float> scale(out);
    for (int o = 0; o < out; ++o) {
      q[static_cast<std::size_t>(o) * in + (o * 7) % in] = static_cast<std::int8_t>(o % 2 ? 127 : -93);
      scale[o] = 0.001f * static_cast<float>(o + 1);
    }
    std::vector<float> y(static_cast<std::size_t>(n) * out, std::nanf(""));
    cpu::matmul_int8(x.data(), q.data(), scale.data(), y.data(), n, out, in, pool);
    for (int r = 0; r < n; ++r)
      for (int o = 0; o < out; ++o) {
        const std::size_t i = static_cast<std::size_t>(o) * in + (o * 7) % in;
        const double want = static_cast<double>(scale[o]) * q[i] * x[static_cast<std::size_t>(r) * in + (o * 7) % in];
        ASSERT_NEAR(y[static_cast<std::size_t>(r) * out + o], want, 4e-7 * std::fabs(want))
            << "n=" << n << " in=" << in << " r=" << r << " o=" << o;
      }
  }
}

// Rows whose activations outgrow the row stream's L1 budget take the AMX tiles from 3 rows on
// (kInt8AmxWideMinRows): the same parity with the reference as every other shape.
TEST(MatmulInt8, WideRowsMatchRef) {
  ThreadPool pool(2);
  const int out = 21, in = 3001;  // 64-byte steps, then a partial one
  for (int n = 2; n <= 5; ++n) {
    std::vector<float> x = testing::random_normal(static_cast<std::size_t>(n) * in, 60 + n);
    std::vector<float> w = testing::random_normal(static_cast<std::size_t>(out) * in, 70 + n, 0.05);
    std::vector<std::int8_t> q(w.size());
    std::vector<float> scale(out);
    ref::quantize_int8_rows(w.data(), out, in, q.data(), scale.data());
    std::vector<float> want(static_cast<std::size_t>(n) * out), got(want.size(), std::nanf(""));
    ref::matmul_int8(x.data(), q.data(), scale.data(), want.data(), n, out, in);
    cpu::matmul_int8(x.data(), q.data(), scale.data(), got.data(), n, out, in, pool);
    for (int r = 0; r < n; ++r)
      for (int o = 0; o < out; ++o) {
        double mag = 0;
        for (int i = 0; i < in; ++i) mag += std::fabs(x[r * in + i] * q[o * in + i]) * scale[o];
        ASSERT_NEAR(got[r * out + o], want[r * out + o], 1e-5 * mag + 1e-7) << "n=" << n << " r=" << r << " o=" << o;
      }
  }
}

}  // namespace
}  // namespace inferlab

namespace inferlab {
namespace {

// W8A8 with dynamic per-32-block activation scales: the AVX2 integer kernel against the
// reference over awkward shapes (in not a multiple of 32, odd channel counts, 1..9 rows) and
// thread counts; the quantiser is bit-identical to the reference's.
TEST(MatmulInt8Act, FastMatchesRefOverAwkwardShapes) {
  struct Shape {
    int n, out, in;
  };
  const Shape shapes[] = {{1, 1, 1}, {1, 7, 31}, {1, 64, 32}, {1, 5, 200}, {1, 13, 2048}, {2, 33, 65}, {3, 17, 100}, {5, 9, 288}, {9, 40, 1000},
                          // the AVX2 few-row stream (2 to 4 rows): odd and even block counts, a tail block
                          {4, 11, 96}, {4, 6, 160}, {2, 5, 64}, {3, 7, 2080}, {4, 3, 33}};
  for (int threads : {1, 3})
    for (const Shape& s : shapes) {
      SCOPED_TRACE("n " + std::to_string(s.n) + " out " + std::to_string(s.out) + " in " + std::to_string(s.in));
      ThreadPool pool(threads);
      Rng rng(static_cast<std::uint64_t>(s.n * 1000 + s.in));
      std::vector<float> x(static_cast<std::size_t>(s.n) * s.in), w(static_cast<std::size_t>(s.out) * s.in);
      for (float& v : x) v = static_cast<float>(3.0 * rng.normal());
      for (float& v : w) v = static_cast<float>(0.1 * rng.normal());
      std::vector<std::int8_t> q(w.size());
      std::vector<float> scale(static_cast<std::size_t>(s.out));
      ref::quantize_int8_rows(w.data(), s.out, s.in, q.data(), scale.data());
      const std::size_t xs_n = static_cast<std::size_t>(s.n) * ref::act_blocks(s.in);
      std::vector<std::int8_t> xq_ref(x.size()), xq(x.size());
      std::vector<float> xs_ref(xs_n), xs(xs_n);
      ref::quantize_act_rows(x.data(), s.n, s.in, xq_ref.data(), xs_ref.data());
      cpu::quantize_act_rows(x.data(), s.n, s.in, xq.data(), xs.data(), pool);
      ASSERT_EQ(xq, xq_ref);
      ASSERT_EQ(xs, xs_ref);
      std::vector<float> want(static_cast<std::size_t>(s.n) * s.out), got(want.size(), std::nanf(""));
      ref::matmul_int8_act(xq.data(), xs.data(), q.data(), scale.data(), want.data(), s.n, s.out, s.in);
      cpu::matmul_int8_act(xq.data(), xs.data(), q.data(), scale.data(), got.data(), s.n, s.out, s.in, pool);
      for (std::size_t i = 0; i < want.size(); ++i) {
        ASSERT_TRUE(std::isfinite(got[i])) << i;
        ASSERT_NEAR(got[i], want[i], 1e-5f * std::max(1.0f, std::fabs(want[i]))) << i;
      }
    }
}

// The vectorised rounding (16 lanes at a time) against the scalar reference, bit for bit, on
// values that sit exactly on a tie (k + 0.5 steps, both signs), just either side of one, the
// block maximum itself, zeros of both signs, and blocks holding inf or NaN.
TEST(MatmulInt8Act, ActivationRoundingMatchesRefOnTiesAndSpecials) {
  ThreadPool pool(1);
  const int in = 96;  // three blocks
  std::vector<float> x(static_cast<std::size_t>(in));
  for (int i = 0; i < 32; ++i) {  // block 0: max 127 so one step is 1.0: ties at +-(k + 0.5)
    const float tie = static_cast<float>(i % 16) + 0.5f;
    x[static_cast<std::size_t>(i)] = i % 3 == 0 ? -tie : i % 3 == 1 ? tie : std::nextafter(tie, 0.0f);
  }
  x[5] = 127.0f;
  x[6] = -0.0f;
  x[7] = 0.0f;
  x[8] = std::nextafter(0.5f, 1.0f);
  x[9] = -std::nextafter(0.5f, 0.0f);
  Rng rng(3);
  for (int i = 32; i < 64; ++i) x[static_cast<std::size_t>(i)] = static_cast<float>(rng.normal());
  x[40] = std::numeric_limits<float>::infinity();  // block 1: scale inf, every code from NaN
  for (int i = 64; i < 96; ++i) x[static_cast<std::size_t>(i)] = static_cast<float>(rng.normal());
  x[70] = std::nanf("");  // block 2: a NaN among finite values
  std::vector<std::int8_t> want(x.size()), got(x.size());
  std::vector<float> ws(3), gs(3);
  ref::quantize_act_rows(x.data(), 1, in, want.data(), ws.data());
  cpu::quantize_act_rows(x.data(), 1, in, got.data(), gs.data(), pool);
  for (int i = 0; i < in; ++i) ASSERT_EQ(got[static_cast<std::size_t>(i)], want[static_cast<std::size_t>(i)]) << i;
  EXPECT_EQ(got[0], -1);   // -0.5 -> -1: ties away from zero
  EXPECT_EQ(got[1], 2);    // 1.5 -> 2
  EXPECT_EQ(got[2], 2);    // just below 2.5 -> 2
  EXPECT_EQ(got[8], 1);    // just above 0.5 -> 1
  EXPECT_EQ(got[9], 0);    // just below 0.5 -> 0
}

// The activation rounding is the only difference from W8A16: the error against fp32 activations
// stays within what a 1/254 relative step per block allows, and is not zero.
TEST(MatmulInt8Act, ActivationQuantisationErrorIsSmallAndNonZero) {
  ThreadPool pool(2);
  const int n = 4, out = 64, in = 576;
  Rng rng(9);
  std::vector<float> x(static_cast<std::size_t>(n) * in), w(static_cast<std::size_t>(out) * in);
  for (float& v : x) v = static_cast<float>(rng.normal());
  for (float& v : w) v = static_cast<float>(0.05 * rng.normal());
  std::vector<std::int8_t> q(w.size());
  std::vector<float> scale(static_cast<std::size_t>(out));
  ref::quantize_int8_rows(w.data(), out, in, q.data(), scale.data());
  std::vector<float> w16(static_cast<std::size_t>(n) * out), w8(w16.size());
  cpu::matmul_int8(x.data(), q.data(), scale.data(), w16.data(), n, out, in, pool);
  std::vector<std::int8_t> xq(x.size());
  std::vector<float> xs(static_cast<std::size_t>(n) * ref::act_blocks(in));
  cpu::quantize_act_rows(x.data(), n, in, xq.data(), xs.data(), pool);
  cpu::matmul_int8_act(xq.data(), xs.data(), q.data(), scale.data(), w8.data(), n, out, in, pool);
  double err = 0, mag = 0;
  for (std::size_t i = 0; i < w16.size(); ++i) {
    err = std::max(err, std::fabs(static_cast<double>(w8[i]) - w16[i]));
    mag = std::max(mag, std::fabs(static_cast<double>(w16[i])));
  }
  EXPECT_GT(err, 0.0);
  EXPECT_LT(err / mag, 0.02);
}

}  // namespace
}  // namespace inferlab
