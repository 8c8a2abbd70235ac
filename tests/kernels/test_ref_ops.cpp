// The reference dense ops against hand-computed values and against each other.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "inferlab/support/rng.h"
#include "kernels/ref/ops.h"

namespace inferlab {
namespace {

TEST(RefOps, RmsnormMatchesHandComputedValues) {
  const float x[4] = {1.0f, -2.0f, 3.0f, -4.0f};  // mean square 7.5
  const float w[4] = {1.0f, 0.5f, 2.0f, 1.0f};
  float out[4];
  ref::rmsnorm(out, x, w, 4, 1e-5f);
  const double inv = 1.0 / std::sqrt(7.5 + 1e-5);
  EXPECT_NEAR(out[0], 1.0 * inv, 1e-6);
  EXPECT_NEAR(out[1], -1.0 * inv, 1e-6);
  EXPECT_NEAR(out[2], 6.0 * inv, 1e-6);
  EXPECT_NEAR(out[3], -4.0 * inv, 1e-6);
}

TEST(RefOps, RopeInterleavedRotatesPairsLikeLlama2c) {
  // head_dim 4, one head, theta 10000, pos 3: pair 0 turns by 3 rad, pair 1 by 3 / 100 rad.
  float v[4] = {1.0f, 0.0f, 0.0f, 2.0f};
  ref::rope(v, 1, 4, 3, 10000.0f, RopeStyle::kInterleaved);
  EXPECT_NEAR(v[0], std::cos(3.0), 1e-6);
  EXPECT_NEAR(v[1], std::sin(3.0), 1e-6);
  EXPECT_NEAR(v[2], -2.0 * std::sin(0.03), 1e-6);
  EXPECT_NEAR(v[3], 2.0 * std::cos(0.03), 1e-6);
}

TEST(RefOps, RopeHalfIsInterleavedUnderThePairPermutation) {
  // Hugging Face layout stores pair j at (j, j + half); interleaved at (2j, 2j + 1). Rotating
  // the permuted vector must give the permuted rotation, for every head and position.
  const int heads = 3, hd = 8, half = hd / 2;
  Rng rng(5);
  std::vector<float> inter(heads * hd), halfv(heads * hd);
  for (float& x : inter) x = static_cast<float>(rng.normal());
  for (int h = 0; h < heads; ++h)
    for (int j = 0; j < half; ++j) {
      halfv[h * hd + j] = inter[h * hd + 2 * j];
      halfv[h * hd + j + half] = inter[h * hd + 2 * j + 1];
    }
  ref::rope(inter.data(), heads, hd, 17, 500000.0f, RopeStyle::kInterleaved);
  ref::rope(halfv.data(), heads, hd, 17, 500000.0f, RopeStyle::kHalf);
  for (int h = 0; h < heads; ++h)
    for (int j = 0; j < half; ++j) {
      EXPECT_FLOAT_EQ(halfv[h * hd + j], inter[h * hd + 2 * j]);
      EXPECT_FLOAT_EQ(halfv[h * hd + j + half], inter[h * hd + 2 * j + 1]);
    }
}

TEST(RefOps, RopeAtPositionZeroIsIdentity) {
  std::vector<float> v = {0.3f, -1.0f, 2.0f, 4.0f, 5.0f, -6.0f};
  auto w = v;
  ref::rope(w.data(), 1, 6, 0, 10000.0f, RopeStyle::kInterleaved);
  EXPECT_EQ(v, w);
}

TEST(RefOps, SiluAndSwiglu) {
  EXPECT_FLOAT_EQ(ref::silu(0.0f), 0.0f);
  EXPECT_NEAR(ref::silu(1.0f), 1.0 / (1.0 + std::exp(-1.0)), 1e-7);
  EXPECT_NEAR(ref::silu(20.0f), 20.0f, 1e-6);
  float gate[2] = {1.0f, -1.0f};
  const float up[2] = {2.0f, 3.0f};
  ref::swiglu(gate, up, 2);
  EXPECT_NEAR(gate[0], 2.0 * (1.0 / (1.0 + std::exp(-1.0))), 1e-6);
  EXPECT_NEAR(gate[1], 3.0 * (-1.0 / (1.0 + std::exp(1.0))), 1e-6);
}

TEST(RefOps, SoftmaxIsNormalisedAndShiftInvariant) {
  float a[3] = {1.0f, 2.0f, 3.0f};
  float b[3] = {1001.0f, 1002.0f, 1003.0f};
  ref::softmax(a, 3);
  ref::softmax(b, 3);
  EXPECT_NEAR(a[0] + a[1] + a[2], 1.0, 1e-6);
  const double e = std::exp(1.0);
  EXPECT_NEAR(a[2], e * e / (1 + e + e * e), 1e-6);
  for (int i = 0; i < 3; ++i) EXPECT_NEAR(a[i], b[i], 1e-6);
}

TEST(RefOps, MatmulSmallExample) {
  const float x[2 * 3] = {1, 2, 3, -1, 0, 1};
  const float w[2 * 3] = {1, 0, 0, 1, 1, 1};
  float y[4];
  ref::matmul(x, w, y, 2, 2, 3);
  EXPECT_FLOAT_EQ(y[0], 1.0f);
  EXPECT_FLOAT_EQ(y[1], 6.0f);
  EXPECT_FLOAT_EQ(y[2], -1.0f);
  EXPECT_FLOAT_EQ(y[3], 0.0f);
}

}  // namespace
}  // namespace inferlab
