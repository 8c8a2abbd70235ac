// Beam search on hand-made distributions, driven as the engine drives it (branch() step by
// step, the caller extending the live branches): a wider beam finds the likelier sequence greedy
// misses, stop tokens make hypotheses, the length penalty and early stopping do what they say.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "beam_search.h"
#include "inferlab/error.h"

namespace inferlab {
namespace {

using plugins::BeamParams;
using plugins::BeamSearchDecoder;

// The next-token distribution given the generated tokens so far (probabilities, [vocab]).
using Oracle = std::function<std::vector<double>(const std::vector<int>&)>;

struct Outcome {
  BranchOutput best;
  int steps = 0;
};

// Runs the decoder like the engine: a one-token prompt, then the branches it asks for.
Outcome search(BeamSearchDecoder& dec, const Oracle& oracle, int vocab, int max_output, std::vector<int> stop = {}) {
  const std::vector<int> prompt = {0};
  std::vector<std::vector<int>> live = {prompt};
  std::vector<Rng> rngs(static_cast<std::size_t>(dec.branch_width()), Rng(1));
  BranchRequest req;
  req.seq = 7;
  req.prompt_len = 1;
  req.max_output = max_output;
  req.stop_tokens = stop;
  Outcome out;
  std::vector<BranchStep> next;
  while (true) {
    std::vector<float> logits;  // [live, vocab]
    for (const auto& b : live) {
      const auto p = oracle(std::vector<int>(b.begin() + 1, b.end()));
      for (double x : p) logits.push_back(static_cast<float>(std::log(x)));
    }
    std::vector<std::span<const int>> spans(live.begin(), live.end());
    dec.branch(req, spans, logits.data(), vocab, rngs, next);
    ++out.steps;
    if (next.empty()) break;
    std::vector<std::vector<int>> grown;
    for (const BranchStep& s : next) {
      grown.push_back(live[static_cast<std::size_t>(s.parent)]);
      grown.back().push_back(s.token);
    }
    live = std::move(grown);
  }
  std::vector<BranchOutput> result;
  dec.branch_result(7, result);
  EXPECT_EQ(result.size(), 1u);
  out.best = result.at(0);
  dec.release(7);
  return out;
}

BeamSearchDecoder make(int width, double alpha = 1.0, bool early = false) {
  BeamParams p;
  p.width = width;
  p.length_penalty = alpha;
  p.early_stopping = early;
  return BeamSearchDecoder(p);
}

// Token 1 first looks best (0.5 vs 0.4) but leads to a flat distribution; token 2 leads to a
// confident one: greedy gets 0.5 * 0.4 = 0.2, the best sequence is 2,1 with 0.4 * 0.9 = 0.36.
std::vector<double> trap(const std::vector<int>& gen) {
  if (gen.empty()) return {0.05, 0.5, 0.4, 0.05};
  if (gen[0] == 2) return {0.02, 0.9, 0.04, 0.04};
  return {0.2, 0.4, 0.2, 0.2};
}

TEST(BeamSearch, WiderBeamFindsTheLikelierSequenceGreedyMisses) {
  BeamSearchDecoder one = make(1), two = make(2);
  const Outcome g = search(one, trap, 4, 2), b = search(two, trap, 4, 2);
  EXPECT_EQ(g.best.tokens, (std::vector<int>{1, 1}));
  EXPECT_NEAR(g.best.logprob, std::log(0.2), 1e-6);
  EXPECT_EQ(b.best.tokens, (std::vector<int>{2, 1}));
  EXPECT_NEAR(b.best.logprob, std::log(0.36), 1e-6);
}

// Token 3 stops. After token 1 the stop is likely (0.6); elsewhere the chain goes on with 0.7.
std::vector<double> stopper(const std::vector<int>& gen) {
  if (gen.empty()) return {0.0001, 0.5, 0.4999, 0.0};
  if (gen.back() == 1) return {0.2, 0.1, 0.1, 0.6};
  return {0.1, 0.1, 0.7, 0.1};
}

TEST(BeamSearch, StopTokensMakeHypothesesAndTheLengthPenaltyWeighsThem) {
  // No penalty (α = 0): the short hypothesis 1,3 (0.3) beats every longer chain
  // (0.4999 * 0.7^k for k >= 2 is below 0.3). Exhaustive search must find it.
  BeamSearchDecoder raw = make(2, 0.0);
  const Outcome r = search(raw, stopper, 4, 6, {3});
  EXPECT_EQ(r.best.tokens, (std::vector<int>{1, 3}));
  EXPECT_NEAR(r.best.logprob, std::log(0.3), 1e-6);
  // α = 2 divides by L²: the 6-token chain 2,2,2,2,2,2 scores log(0.4999*0.7^5)/36 = -0.069,
  // above log(0.3)/4 = -0.30.
  BeamSearchDecoder longer = make(2, 2.0);
  const Outcome l = search(longer, stopper, 4, 6, {3});
  EXPECT_EQ(l.best.tokens.size(), 6u);
  EXPECT_NEAR(longer.normalised(l.best.logprob, 6), std::log(0.4999 * std::pow(0.7, 5)) / 36, 1e-6);
}

// The stop (0.6 * 0.55 = 0.33) is the best second token; the chain of 1s goes on with 0.9 a step.
std::vector<double> tempting_stop(const std::vector<int>& gen) {
  if (gen.empty()) return {0.0, 0.6, 0.4, 0.0};
  if (gen.size() == 1) return {0.0, 0.45, 0.0, 0.55};
  return {0.0, 0.9, 0.0, 0.1};
}

TEST(BeamSearch, EarlyStoppingEndsOnceWidthHypothesesFinished) {
  // Width 1, α = 1, 10 tokens at most. Early stopping ends at step 2 with 1,3. Without it, the
  // live chain's bound log(0.27 * ...) / 10 stays above log(0.33) / 2 = -0.55, so it runs to 10
  // tokens, and the 10-token chain, log(0.27 * 0.9^8) / 10 = -0.22, wins.
  BeamSearchDecoder early = make(1, 1.0, true), patient = make(1, 1.0, false);
  const Outcome e = search(early, tempting_stop, 4, 10, {3});
  const Outcome p = search(patient, tempting_stop, 4, 10, {3});
  EXPECT_EQ(e.best.tokens, (std::vector<int>{1, 3}));
  EXPECT_EQ(e.steps, 2);
  EXPECT_EQ(p.best.tokens, std::vector<int>(10, 1));
  EXPECT_EQ(p.steps, 10);
  EXPECT_NEAR(p.best.logprob, std::log(0.27 * std::pow(0.9, 8)), 1e-5);
}

TEST(BeamSearch, RefusesBadParametersAndMisuse) {
  EXPECT_THROW(make(0), Error);
  BeamParams nan;
  nan.length_penalty = NAN;
  EXPECT_THROW(BeamSearchDecoder{nan}, Error);
  BeamSearchDecoder b = make(2);
  std::vector<int> out;
  Rng rng(1);
  const float logits[2] = {0, 0};
  EXPECT_THROW(b.accept(std::vector<int>{1}, {}, logits, 2, rng, out), Error);
}

}  // namespace
}  // namespace inferlab
