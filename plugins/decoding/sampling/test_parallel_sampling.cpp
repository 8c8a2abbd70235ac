// Parallel sampling (n > 1) through the real Engine on stories260K: n distinct samples per
// request, repeatable for a seed, each with its own stream; their blocks shared exactly as an
// independent count says, and all given back.
#include <gtest/gtest.h>

#include "inferlab/formats/checkpoint.h"
#include "inferlab/engine/engine.h"
#include "model_fixtures.h"
#include "plugins/common/decoding/sampling.h"
#include "plugins/common/scheduling/continuous_scheduler.h"
#include "sampling.h"
#include "test_support.h"

namespace inferlab {
namespace {

using plugins::SamplingDecoder;

constexpr int kBlock = 8;

std::string stories() { return testing::data_path("models/stories260K/stories260K.bin"); }

struct Runner {
  LoadedModel m = load_model(stories());
  CpuDevice device{2};
  testing::FloatQuantization quant;
  testing::RefAttention attention;
  Model model{m.weights, quant, device};

  std::vector<Request> requests(int max_output) const {
    std::vector<Request> reqs;
    const char* prompts[] = {"Once upon a time", "The dog ran to the big", "Sam had a red ball and"};
    for (int i = 0; i < 3; ++i) {
      Request r;
      r.id = 10 + i;
      r.prompt = m.tokenizer->encode(prompts[i], true);
      r.max_output = max_output;
      reqs.push_back(std::move(r));
    }
    return reqs;
  }
  // Sum of log p(token | prefix) of `generated` after `prompt` (temperature 1), one forward pass.
  double logprob(const std::vector<int>& prompt, const std::vector<int>& generated) {
    testing::SequenceRunner runner(model, attention, kBlock);
    std::vector<int> all = prompt;
    all.insert(all.end(), generated.begin(), generated.end() - 1);
    const std::vector<float>& logits = runner.feed_all_logits(all);  // [all.size(), vocab]
    const int vocab = m.weights.config.vocab_size;
    double sum = 0;
    for (std::size_t i = 0; i < generated.size(); ++i) {
      const float* row = logits.data() + (prompt.size() - 1 + i) * static_cast<std::size_t>(vocab);
      sum += static_cast<double>(row[generated[i]]) - log_sum_exp(row, vocab);
    }
    return sum;
  }
  RunResult run(double temperature, int n, std::uint64_t seed, const std::vector<Request>& reqs) {
    SamplingParams sp;
    sp.temperature = temperature;
    SamplingDecoder dec(sp, n);
    ContinuousScheduler sched(64, 8, true);
    EngineOptions eo;
    eo.kv.block_size = kBlock;
    eo.seed = seed;
    return Engine(model, attention, sched, dec, eo).run(reqs);
  }
};

TEST(ParallelSampling, SamplesAreDistinctAndRepeatPerSeed) {
  INFERLAB_REQUIRE_FILE(stories());
  Runner r;
  const auto reqs = r.requests(20);
  const RunResult a = r.run(1.0, 4, 3, reqs), again = r.run(1.0, 4, 3, reqs), other = r.run(1.0, 4, 4, reqs);
  ASSERT_EQ(a.sequences.size(), reqs.size());
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    const auto& s = a.sequences[i];
    ASSERT_EQ(s.size(), 4u);
    for (std::size_t x = 0; x < s.size(); ++x) {
      EXPECT_EQ(s[x].tokens.size(), 20u);
      EXPECT_LT(s[x].logprob, 0.0);
      for (std::size_t y = x + 1; y < s.size(); ++y) EXPECT_NE(s[x].tokens, s[y].tokens) << x << " vs " << y;
      EXPECT_EQ(s[x].tokens, again.sequences[i][x].tokens);
    }
    EXPECT_NE(s[0].tokens, other.sequences[i][0].tokens);
    // Each sample's log-probability, recomputed by a separate reference forward.
    for (const BranchOutput& o : s) EXPECT_NEAR(o.logprob, r.logprob(reqs[i].prompt, o.tokens), 1e-3);
    EXPECT_EQ(a.outputs[i], s[0].tokens);
    // Every returned token counts, emitted when the request ends.
    const RequestTimeline& rt = a.timeline.requests[i];
    EXPECT_EQ(rt.output_tokens, 80);
    EXPECT_EQ(rt.token_times.size(), 80u);
  }
  EXPECT_EQ(a.timeline.kv_blocks_free_end, a.timeline.kv_blocks_total);
  // Greedy samples are all the greedy sequence.
  const RunResult cold = r.run(0.0, 3, 3, reqs), one = r.run(0.0, 1, 3, reqs);
  for (std::size_t i = 0; i < reqs.size(); ++i)
    for (const BranchOutput& o : cold.sequences[i]) EXPECT_EQ(o.tokens, one.outputs[i]);
  EXPECT_TRUE(one.sequences.empty());  // n = 1 is plain sampling
}

// No stop tokens: all n samples live to max_output. At the step that runs generated token g
// each sample holds blocks_for(P + g) blocks; the prompt's full blocks are the only shared
// ones (the partially filled one is copied on the first write), so the pool holds
// floor(P / B) + n * (blocks_for(P + g) - floor(P / B)) distinct blocks.
TEST(ParallelSampling, SharedBlocksMatchAnIndependentCount) {
  INFERLAB_REQUIRE_FILE(stories());
  Runner r;
  const int n = 4, max_output = 21;
  const auto reqs = r.requests(max_output);
  const RunResult got = r.run(0.8, n, 9, reqs);
  long long unshared = 0, held = 0;
  for (const Request& q : reqs) {
    const int p = static_cast<int>(q.prompt.size()), full = p / kBlock;
    for (int g = 1; g < max_output; ++g) {
      const int per = (p + g + kBlock - 1) / kBlock;
      unshared += static_cast<long long>(n) * per;
      held += full + static_cast<long long>(n) * (per - full);
    }
  }
  const RunTimeline& tl = got.timeline;
  EXPECT_EQ(tl.branch_blocks_unshared, unshared);
  EXPECT_EQ(tl.branch_blocks_held, held);
  EXPECT_GT(unshared, held);
  EXPECT_EQ(tl.branch_rows, static_cast<long long>(reqs.size()) * (max_output - 1) * (n - 1));
  EXPECT_EQ(tl.kv_blocks_free_end, tl.kv_blocks_total);
}

}  // namespace
}  // namespace inferlab
