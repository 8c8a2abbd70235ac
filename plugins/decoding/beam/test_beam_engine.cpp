// Beam search through the real Engine on the stories260K checkpoint: width 1 is greedy token for
// token, width 4 finds sequences at least as likely as greedy's (log-probabilities recomputed by
// a separate reference forward), beams share blocks (a saving > 0) and give every block back,
// with and without preemption, and bad parameters are refused at validate time.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "beam_search.h"
#include "inferlab/formats/checkpoint.h"
#include "inferlab/engine/engine.h"
#include "inferlab/error.h"
#include "inferlab/results/metrics.h"
#include "inferlab/plugin/registry.h"
#include "model_fixtures.h"
#include "plugins/common/decoding/sampling.h"
#include "plugins/common/scheduling/continuous_scheduler.h"
#include "test_support.h"

namespace inferlab {
namespace {

using plugins::BeamParams;
using plugins::BeamSearchDecoder;

std::string stories() { return testing::data_path("models/stories260K/stories260K.bin"); }

std::vector<Request> story_requests(const Tokenizer& tok, int max_output) {
  std::vector<Request> reqs;
  const char* prompts[] = {"Once upon a time", "The cat sat on the", "Lily and Tom went to the park and",
                           "One day, a little bird"};
  for (int i = 0; i < 4; ++i) {
    Request r;
    r.id = i;
    r.prompt = tok.encode(prompts[i], true);
    r.max_output = max_output;
    reqs.push_back(std::move(r));
  }
  return reqs;
}

// Checks, before every step, that each pool block is free or held by a request the scheduler
// sees (SeqView::blocks_held counts a request's shared blocks once): no block leaks mid-run.
class LeakCheckingScheduler final : public Scheduler {
 public:
  LeakCheckingScheduler(Scheduler& inner, int num_blocks) : inner_(inner), num_blocks_(num_blocks) {}
  ScheduleDecision schedule(const SchedulerInput& in) override {
    int held = 0;
    for (const SeqView& s : in.running) held += s.blocks_held;
    for (const SeqView& s : in.waiting) held += s.blocks_held;
    EXPECT_EQ(in.free_blocks + held, num_blocks_) << "at t = " << in.now_s;
    return inner_.schedule(in);
  }

 private:
  Scheduler& inner_;
  int num_blocks_;
};

struct Fixture {
  LoadedModel m = load_model(stories());
  CpuDevice device{2};
  testing::FloatQuantization quant;
  testing::RefAttention attention;
  Model model{m.weights, quant, device};

  RunResult run(Decoder& dec, const std::vector<Request>& reqs, int num_blocks = 0, std::vector<int> stop = {}) {
    ContinuousScheduler sched(64, 8, true);
    EngineOptions eo;
    eo.kv.block_size = 8;
    eo.kv.num_blocks = num_blocks;
    eo.seed = 3;
    eo.stop_tokens = std::move(stop);
    if (num_blocks > 0) {
      LeakCheckingScheduler checked(sched, num_blocks);
      return Engine(model, attention, checked, dec, eo).run(reqs);
    }
    return Engine(model, attention, sched, dec, eo).run(reqs);
  }
  RunResult greedy(const std::vector<Request>& reqs, std::vector<int> stop = {}) {
    SamplingDecoderHolder g;
    return run(*g.decoder, reqs, 0, std::move(stop));
  }
  // Sum of log p(token | prefix) of `generated` after `prompt`, from one reference forward.
  double logprob(const std::vector<int>& prompt, const std::vector<int>& generated) {
    testing::SequenceRunner runner(model, attention, 8);
    std::vector<int> all = prompt;
    all.insert(all.end(), generated.begin(), generated.end());
    all.pop_back();  // the last token's logits are not needed
    const std::vector<float>& logits = runner.feed_all_logits(all);  // [all.size(), vocab]
    const int vocab = m.weights.config.vocab_size;
    double sum = 0;
    for (std::size_t i = 0; i < generated.size(); ++i) {
      const float* row = logits.data() + (prompt.size() - 1 + i) * static_cast<std::size_t>(vocab);
      sum += static_cast<double>(row[generated[i]]) - log_sum_exp(row, vocab);
    }
    return sum;
  }
  struct SamplingDecoderHolder {
    Registry reg{{testing::plugin_dir()}};
    std::shared_ptr<Decoder> decoder;
    CpuDevice dev{1};
    SamplingDecoderHolder() {
      decoder = reg.create_decoder("sampling", reg.resolve(PluginKind::kDecoding, "sampling", {}, "t"), dev);
    }
  };
};

// Forwards to a beam search and counts, from the beams' tokens alone, the blocks they hold at
// every step that runs them (an independent check of the engine's branch_blocks_* counts).
// The step runs each beam's last token at position len - 1, so every beam holds blocks_for(len)
// blocks. The blocks ending before len - 1 were full when written and are never copied: two
// beams hold the same one exactly when their tokens agree up to its end (they forked from the
// one ancestor that wrote it; beam search never keeps two beams with the same tokens). The
// block holding position len - 1 and any after it are each beam's own (a shared one was copied
// on this step's write).
class BlockCountingBeam final : public Decoder {
 public:
  BlockCountingBeam(BeamSearchDecoder& inner, int block_size) : inner_(inner), block_size_(block_size) {}
  int branch_width() const override { return inner_.branch_width(); }
  void branch(const BranchRequest& req, std::span<const std::span<const int>> live, const float* logits, int vocab,
              std::span<Rng> rngs, std::vector<BranchStep>& next) override {
    const int len = static_cast<int>(live[0].size());
    if (len > req.prompt_len) {  // a step that ran the beams (not the prompt's last chunk)
      const int per = (len + block_size_ - 1) / block_size_, full = (len - 1) / block_size_;
      std::set<std::vector<int>> shared;  // a full block, named by the tokens up to its end
      for (std::span<const int> b : live) {
        unshared_ += per;
        for (int k = 1; k <= full; ++k) shared.emplace(b.begin(), b.begin() + k * block_size_);
      }
      held_ += static_cast<long long>(shared.size()) + static_cast<long long>(live.size()) * (per - full);
    }
    inner_.branch(req, live, logits, vocab, rngs, next);
  }
  void branch_result(int seq, std::vector<BranchOutput>& out) override { inner_.branch_result(seq, out); }
  void release(int seq) override { inner_.release(seq); }
  void accept(std::span<const int> tokens, std::span<const int> drafts, const float* logits, int vocab, Rng& rng,
              std::vector<int>& out) override {
    inner_.accept(tokens, drafts, logits, vocab, rng, out);
  }
  long long held() const { return held_; }
  long long unshared() const { return unshared_; }

 private:
  BeamSearchDecoder& inner_;
  int block_size_;
  long long held_ = 0, unshared_ = 0;
};

BeamSearchDecoder beam(int width, double length_penalty = 1.0, bool early_stopping = false) {
  BeamParams p;
  p.width = width;
  p.length_penalty = length_penalty;
  p.early_stopping = early_stopping;
  return BeamSearchDecoder(p);
}

double metric(const MetricRow& row, const std::string& name) {
  for (const auto& [n, v] : row)
    if (n == name) return v;
  ADD_FAILURE() << "no metric " << name;
  return NAN;
}

TEST(BeamEngine, WidthOneIsGreedyTokenForToken) {
  INFERLAB_REQUIRE_FILE(stories());
  Fixture f;
  const auto reqs = story_requests(*f.m.tokenizer, 30);
  const RunResult want = f.greedy(reqs);
  BeamSearchDecoder one = beam(1);
  const RunResult got = f.run(one, reqs);
  EXPECT_EQ(got.outputs, want.outputs);
  // With a stop token and early stopping, a width-1 beam stops where greedy stops, the stop
  // token included. The stop token is one greedy emits (request 0's 10th token), so at least
  // that request stops early.
  ASSERT_GE(want.outputs[0].size(), 10u);
  const std::vector<int> stop = {want.outputs[0][9]};
  auto long_reqs = story_requests(*f.m.tokenizer, 60);
  const RunResult want_stop = f.greedy(long_reqs, stop);
  BeamSearchDecoder one_early = beam(1, 1.0, true);
  const RunResult got_stop = f.run(one_early, long_reqs, 0, stop);
  EXPECT_EQ(got_stop.outputs, want_stop.outputs);
  bool stopped = false;
  for (const auto& o : want_stop.outputs) stopped |= o.size() < 60;
  EXPECT_TRUE(stopped) << "no greedy sequence reached the stop token: the case tests nothing";
}

TEST(BeamEngine, WidthFourIsAtLeastAsLikelyAsGreedyAndSharesBlocks) {
  INFERLAB_REQUIRE_FILE(stories());
  Fixture f;
  const auto reqs = story_requests(*f.m.tokenizer, 24);
  const RunResult greedy = f.greedy(reqs);
  BeamSearchDecoder four = beam(4);
  BlockCountingBeam counted(four, 8);
  const RunResult got = f.run(counted, reqs);
  ASSERT_EQ(got.sequences.size(), reqs.size());
  double gain = 0;
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    ASSERT_EQ(got.sequences[i].size(), 1u);
    EXPECT_EQ(got.outputs[i], got.sequences[i][0].tokens);
    const double lp_beam = f.logprob(reqs[i].prompt, got.outputs[i]);
    const double lp_greedy = f.logprob(reqs[i].prompt, greedy.outputs[i]);
    EXPECT_GE(lp_beam, lp_greedy - 1e-6);
    EXPECT_NEAR(got.sequences[i][0].logprob, lp_beam, 1e-3) << "the decoder's own score disagrees with the reference";
    gain += lp_beam - lp_greedy;
    // Tokens returned count once, emitted at the end.
    const RequestTimeline& rt = got.timeline.requests[i];
    EXPECT_EQ(rt.output_tokens, static_cast<int>(got.outputs[i].size()));
    EXPECT_EQ(rt.token_times.size(), got.outputs[i].size());
  }
  EXPECT_GT(gain, 0.0) << "beam search never beat greedy: it searched nothing";
  const RunTimeline& tl = got.timeline;
  EXPECT_GT(tl.branch_rows, 0);
  EXPECT_GT(tl.branch_blocks_unshared, tl.branch_blocks_held);
  EXPECT_EQ(tl.branch_blocks_unshared, counted.unshared());
  EXPECT_EQ(tl.branch_blocks_held, counted.held());
  const MetricRow row = compute_metrics(tl, SloSpec{});
  EXPECT_GT(metric(row, "beam_blocks_saved_frac"), 0.0);
  EXPECT_LT(metric(row, "beam_blocks_saved_frac"), 1.0);
  EXPECT_EQ(tl.kv_blocks_free_end, tl.kv_blocks_total) << "blocks leaked";
}

// A pool too small for every request's beams at once: the scheduler preempts, beams restart
// from their prompt, the result is the same, and every block comes back.
TEST(BeamEngine, PreemptionRestartsBeamsWithoutLeaking) {
  INFERLAB_REQUIRE_FILE(stories());
  Fixture f;
  const auto reqs = story_requests(*f.m.tokenizer, 24);
  BeamSearchDecoder roomy = beam(3);
  const RunResult want = f.run(roomy, reqs);
  BeamSearchDecoder tight = beam(3);
  BlockCountingBeam counted(tight, 8);
  const RunResult got = f.run(counted, reqs, 24);  // one request needs up to 2 + 3 * 4 blocks
  EXPECT_GT(got.timeline.preemptions, 0) << "the pool was large enough: nothing was preempted";
  EXPECT_EQ(got.outputs, want.outputs);
  EXPECT_EQ(got.timeline.branch_blocks_held, counted.held());  // the restarted beams counted alike
  EXPECT_EQ(got.timeline.kv_blocks_free_end, 24);
}

TEST(BeamEngine, BadParametersAreRefusedAtValidateTime) {
  Registry reg({testing::plugin_dir()});
  auto refused = [&](const std::string& plugin, const std::string& name, ParamValue v, const std::string& says) {
    try {
      reg.resolve(PluginKind::kDecoding, plugin, {{name, v}}, "exp.toml:7");
      ADD_FAILURE() << plugin << "." << name << " accepted";
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(name), std::string::npos) << what;
      EXPECT_NE(what.find(says), std::string::npos) << what;
      EXPECT_NE(what.find("exp.toml:7"), std::string::npos) << what;
    }
  };
  refused("beam", "width", std::int64_t{0}, "[1, 32]");
  refused("beam", "width", std::int64_t{33}, "[1, 32]");
  refused("beam", "length_penalty", 9.0, "[-4, 4]");
  refused("sampling", "n", std::int64_t{0}, "[1, 64]");
  // And the classes themselves.
  EXPECT_THROW(beam(0), Error);
}

TEST(BeamEngine, BranchingWithoutTheKvCacheIsAClearError) {
  INFERLAB_REQUIRE_FILE(stories());
  Fixture f;
  BeamSearchDecoder two = beam(2);
  ContinuousScheduler sched(64, 8, true);
  EngineOptions eo;
  eo.kv.enabled = false;
  try {
    Engine(f.model, f.attention, sched, two, eo).run(story_requests(*f.m.tokenizer, 4));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("need the KV cache"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace inferlab
