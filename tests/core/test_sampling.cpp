#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "inferlab/error.h"
#include "plugins/common/decoding/sampling.h"

namespace inferlab {
namespace {

TEST(Sampling, ArgmaxTakesTheLowestIndexOnTies) {
  const float logits[] = {0.5f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(argmax(logits, 4), 1);
  EXPECT_EQ(argmax(logits, 1), 0);
}

TEST(Sampling, TemperatureZeroOrTopKOneIsGreedy) {
  const float logits[] = {0.1f, 0.3f, 3.0f, 0.2f, 2.9f};
  std::vector<std::pair<float, int>> scratch;
  Rng rng(1);
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(sample_token(logits, 5, {0.0, 0, 1.0}, rng, scratch), 2);
    EXPECT_EQ(sample_token(logits, 5, {1.5, 1, 1.0}, rng, scratch), 2);
    EXPECT_EQ(sample_token(logits, 5, {1.0, 0, 1e-6}, rng, scratch), 2);  // nucleus of one token
  }
}

TEST(Sampling, FrequenciesFollowTheSoftmax) {
  const float logits[] = {0.0f, 1.0f, 2.0f, -1.0f};
  std::vector<std::pair<float, int>> scratch;
  Rng rng(42);
  const int n = 40000;
  std::vector<int> counts(4, 0);
  for (int i = 0; i < n; ++i) ++counts[static_cast<std::size_t>(sample_token(logits, 4, {2.0, 0, 1.0}, rng, scratch))];
  // softmax(logits / 2)
  double z = 0;
  for (float l : logits) z += std::exp(l / 2.0);
  for (int i = 0; i < 4; ++i) {
    const double p = std::exp(logits[i] / 2.0) / z;
    EXPECT_NEAR(counts[static_cast<std::size_t>(i)] / static_cast<double>(n), p, 4 * std::sqrt(p * (1 - p) / n)) << i;
  }
}

TEST(Sampling, TopKAndTopPRestrictTheSupport) {
  const float logits[] = {3.0f, 2.0f, 1.0f, 0.0f, -1.0f};  // softmax: .64 .23 .09 .03 .01
  std::vector<std::pair<float, int>> scratch;
  Rng rng(3);
  for (int i = 0; i < 2000; ++i) {
    EXPECT_LT(sample_token(logits, 5, {1.0, 2, 1.0}, rng, scratch), 2);
    EXPECT_LT(sample_token(logits, 5, {1.0, 0, 0.8}, rng, scratch), 2);  // .64 + .23 >= .8
  }
}

TEST(Sampling, SeededAndValidated) {
  const float logits[] = {0.0f, 0.1f, 0.2f, 0.3f, 0.4f, 0.5f};
  std::vector<std::pair<float, int>> scratch;
  Rng a(9), b(9);
  for (int i = 0; i < 100; ++i)
    EXPECT_EQ(sample_token(logits, 6, {1.0, 4, 0.9}, a, scratch), sample_token(logits, 6, {1.0, 4, 0.9}, b, scratch));
  EXPECT_THROW(sample_token(logits, 6, {-1.0, 0, 1.0}, a, scratch), Error);
  EXPECT_THROW(sample_token(logits, 6, {1.0, 0, 0.0}, a, scratch), Error);
}

}  // namespace
}  // namespace inferlab
