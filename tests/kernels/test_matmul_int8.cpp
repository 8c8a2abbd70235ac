// kernels/cpu/matmul_int8 against the reference over awkward shapes, and the quantizer's
// format guarantees.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "inferlab/rng.h"
#include "inferlab/thread_pool.h"
#include "kernels/cpu/matmul_int8.h"
#include "kernels/ref/matmul_int8.h"

namespace inferlab {
namespace {

std::vector<float> gaussian(std::size_t count, std::uint64_t seed, double sigma = 1.0) {
  Rng rng(seed);
  std::vector<float> v(count);
  for (float& f : v) f = static_cast<float>(sigma * rng.normal());
  return v;
}

TEST(QuantizeInt8Rows, ScalesRangeAndRoundingError) {
  const int out = 5, in = 37;
  std::vector<float> w = gaussian(static_cast<std::size_t>(out) * in, 11, 0.3);
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
  const int ns[] = {1, 2, 3, 4, 5, 7, 16, 17};
  const int outs[] = {1, 3, 8, 13, 129};
  const int ins[] = {1, 7, 8, 9, 33, 257};
  for (int n : ns)
    for (int out : outs)
      for (int in : ins) {
        std::uint64_t seed = static_cast<std::uint64_t>(n * 10007 + out * 101 + in);
        std::vector<float> x = gaussian(static_cast<std::size_t>(n) * in, seed);
        std::vector<float> w = gaussian(static_cast<std::size_t>(out) * in, seed + 1, 0.05);
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
  const int n = 3, out = 9, in = 20;
  std::vector<float> x = gaussian(n * in, 5);
  std::vector<float> w(out * in, 0.0f);
  std::vector<std::int8_t> q(w.size());
  std::vector<float> scale(out);
  ref::quantize_int8_rows(w.data(), out, in, q.data(), scale.data());
  std::vector<float> y(n * out, std::nanf(""));
  cpu::matmul_int8(x.data(), q.data(), scale.data(), y.data(), n, out, in, pool);
  for (float v : y) EXPECT_EQ(v, 0.0f);
}

}  // namespace
}  // namespace inferlab
