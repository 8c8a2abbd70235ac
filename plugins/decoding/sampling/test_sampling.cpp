#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "inferlab/error.h"
#include "sampling.h"

namespace inferlab {
using namespace plugins;
namespace {

const std::vector<float> kLogits = {0.5f, 2.0f, -1.0f, 1.2f, 0.0f, 1.9f};  // argmax = 1

int draw(SamplingDecoder& dec, Rng& rng, const std::vector<float>& logits = kLogits) {
  std::vector<int> out;
  dec.accept({}, {}, logits.data(), static_cast<int>(logits.size()), rng, out);
  EXPECT_EQ(out.size(), 1u);
  return out.at(0);
}

std::vector<double> softmax(const std::vector<float>& logits, double temperature) {
  std::vector<double> p(logits.size());
  double mx = logits[0], sum = 0;
  for (float l : logits) mx = std::max(mx, static_cast<double>(l));
  for (std::size_t i = 0; i < logits.size(); ++i) sum += p[i] = std::exp((logits[i] - mx) / temperature);
  for (double& v : p) v /= sum;
  return p;
}

std::vector<double> histogram(SamplingDecoder& dec, int draws, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<double> freq(kLogits.size(), 0.0);
  for (int i = 0; i < draws; ++i) freq[static_cast<std::size_t>(draw(dec, rng))] += 1.0 / draws;
  return freq;
}

TEST(SamplingDecoder, RejectsBadParams) {
  EXPECT_THROW(SamplingDecoder({-0.1, 0, 1.0}), Error);
  EXPECT_THROW(SamplingDecoder({1.0, -1, 1.0}), Error);
  EXPECT_THROW(SamplingDecoder({1.0, 0, 0.0}), Error);
  EXPECT_THROW(SamplingDecoder({1.0, 0, 1.5}), Error);
}

TEST(SamplingDecoder, NotSpeculative) {
  SamplingDecoder dec({1.0, 0, 1.0});
  EXPECT_EQ(dec.max_draft_tokens(), 0);
  std::vector<int> drafts = {3};
  dec.propose(std::vector<int>{1, 2, 3}, 4, drafts);
  EXPECT_TRUE(drafts.empty());
}

TEST(SamplingDecoder, TemperatureZeroIsArgmax) {
  SamplingDecoder dec({0.0, 0, 1.0});
  Rng rng(5);
  for (int i = 0; i < 50; ++i) EXPECT_EQ(draw(dec, rng), 1);
}

TEST(SamplingDecoder, TopKOneIsArgmax) {
  SamplingDecoder dec({1.5, 1, 1.0});
  Rng rng(6);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(draw(dec, rng), 1);
}

TEST(SamplingDecoder, TinyTopPIsArgmax) {
  SamplingDecoder dec({1.0, 0, 1e-6});
  Rng rng(7);
  for (int i = 0; i < 200; ++i) EXPECT_EQ(draw(dec, rng), 1);
}

TEST(SamplingDecoder, FixedSeedGivesSameTokens) {
  SamplingDecoder a({0.8, 0, 0.95}), b({0.8, 0, 0.95});
  Rng ra(42), rb(42), rc(43);
  std::vector<int> ta, tb, tc;
  for (int i = 0; i < 100; ++i) {
    ta.push_back(draw(a, ra));
    tb.push_back(draw(b, rb));
    tc.push_back(draw(a, rc));
  }
  EXPECT_EQ(ta, tb);
  EXPECT_NE(ta, tc);  // a different seed gives a different stream
}

TEST(SamplingDecoder, EmpiricalDistributionMatchesSoftmax) {
  // 20000 draws: a frequency's standard deviation is at most sqrt(0.25 / 20000) = 0.0035, so
  // 0.015 is over four sigma.
  SamplingDecoder dec({1.0, 0, 1.0});
  std::vector<double> freq = histogram(dec, 20000, 2024);
  std::vector<double> p = softmax(kLogits, 1.0);
  for (std::size_t i = 0; i < p.size(); ++i) EXPECT_NEAR(freq[i], p[i], 0.015) << "token " << i;
}

TEST(SamplingDecoder, TemperatureSharpens) {
  SamplingDecoder dec({0.5, 0, 1.0});
  std::vector<double> freq = histogram(dec, 20000, 99);
  std::vector<double> p = softmax(kLogits, 0.5);
  for (std::size_t i = 0; i < p.size(); ++i) EXPECT_NEAR(freq[i], p[i], 0.015) << "token " << i;
}

TEST(SamplingDecoder, TopKRenormalisesOverKept) {
  // top_k = 2 keeps tokens 1 (2.0) and 5 (1.9): p = e^2 / (e^2 + e^1.9) for token 1.
  SamplingDecoder dec({1.0, 2, 1.0});
  std::vector<double> freq = histogram(dec, 20000, 3);
  double p1 = std::exp(2.0) / (std::exp(2.0) + std::exp(1.9));
  EXPECT_NEAR(freq[1], p1, 0.015);
  EXPECT_NEAR(freq[5], 1 - p1, 0.015);
  EXPECT_EQ(freq[0] + freq[2] + freq[3] + freq[4], 0.0);
}

}  // namespace
}  // namespace inferlab
