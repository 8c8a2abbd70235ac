// Token choice on the device (Decoder::device_choice) through the real Engine on the CPU device,
// whose choose_tokens is the reference itself: the steps a greedy or untruncated sampling
// decoder runs choose there (every one, each a counted call), with exactly the tokens of the
// host path (accept_for on host logits) for the same seed; steps that need host logits
// (branches, drafts, top-k / top-p, early exit) never do. The engine's draws are checked against
// each sequence's own stream with an executor that returns them.
#include <gtest/gtest.h>

#include <cmath>

#include "inferlab/engine/engine.h"
#include "inferlab/formats/checkpoint.h"
#include "inferlab/kv/kv_storage.h"
#include "model_fixtures.h"
#include "plugins/common/scheduling/continuous_scheduler.h"
#include "sampling.h"
#include "stub_executor.h"
#include "test_support.h"
#include "token_choice_checks.h"

namespace inferlab {
namespace {

using plugins::SamplingDecoder;

std::string stories() { return testing::data_path("models/stories260K/stories260K.bin"); }

struct Cpu {
  LoadedModel m = load_model(stories());
  CpuDevice device{2};
  testing::FloatQuantization quant;
  testing::RefAttention attention;
  Model model{m.weights, quant, device};
  std::vector<Request> requests = testing::token_choice_requests(m.weights.config.vocab_size, 4, 24);

  testing::ChoicePaths run(Decoder& decoder, std::uint64_t seed = 5) {
    return testing::run_both_choice_paths(
        model, attention, decoder, [] { return std::make_shared<ContinuousScheduler>(64, 8, true); }, requests,
        seed);
  }
};

TEST(DeviceChoice, GreedyAndSamplingChooseOnTheDeviceWithTheHostTokens) {
  INFERLAB_REQUIRE_FILE(stories());
  Cpu c;
  std::vector<std::vector<int>> greedy;
  for (double t : {0.0, 0.9, 1.5}) {
    SCOPED_TRACE("temperature " + std::to_string(t));
    SamplingDecoder dec({t, 0, 1.0});
    const long long calls0 = c.device.token_choice_calls();
    const testing::ChoicePaths p = c.run(dec);
    const RunTimeline& tl = p.device.timeline;
    // Prompts run whole: every step has logit rows, and every one chose on the device.
    EXPECT_GT(tl.device_choice_steps, 0);
    EXPECT_EQ(tl.device_choice_steps, static_cast<long long>(tl.steps.size()));
    EXPECT_EQ(c.device.token_choice_calls() - calls0, tl.device_choice_steps);
    EXPECT_EQ(p.host.timeline.device_choice_steps, 0);
    EXPECT_EQ(p.device.outputs, p.host.outputs);
    for (const auto& o : p.device.outputs) EXPECT_EQ(o.size(), 24u);
    if (t == 0.0)
      greedy = p.device.outputs;
    else
      EXPECT_NE(p.device.outputs, greedy);  // the draws are used
  }
  // Another seed draws other tokens, on both paths alike.
  SamplingDecoder hot({0.9, 0, 1.0});
  const testing::ChoicePaths a = c.run(hot, 5), b = c.run(hot, 6);
  EXPECT_NE(a.device.outputs, b.device.outputs);
  EXPECT_EQ(b.device.outputs, b.host.outputs);
}

TEST(DeviceChoice, StepsThatNeedHostLogitsReadThem) {
  INFERLAB_REQUIRE_FILE(stories());
  Cpu c;
  struct Case {
    const char* what;
    SamplingParams params;
    int n;
  };
  const Case cases[] = {{"top_k", {0.9, 5, 1.0}, 1},
                        {"top_p", {0.9, 0, 0.8}, 1},
                        {"greedy branches (n = 2: argmax declared, but branches read host logits)", {0.0, 0, 1.0}, 2}};
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    SamplingDecoder dec(k.params, k.n);
    const long long calls0 = c.device.token_choice_calls();
    EngineOptions eo;
    eo.seed = 5;
    ContinuousScheduler sched(64, 8, true);
    const RunResult r = Engine(c.model, c.attention, sched, dec, eo).run(c.requests);
    EXPECT_EQ(r.timeline.device_choice_steps, 0);
    EXPECT_EQ(c.device.token_choice_calls(), calls0);
  }
  // A layer plan that exits early reads its exit logits on the host: the model does not choose.
  EXPECT_TRUE(c.model.chooses_tokens());
  LayerPlan plan;
  plan.exit_after = {2};
  plan.threshold = 0.9;
  c.model.set_layer_plan(&plan);
  EXPECT_FALSE(c.model.chooses_tokens());
  c.model.set_layer_plan(nullptr);
}

// Model::forward_choosing on the CPU: the argmax of forward()'s own logits row by row (a prefill
// row and decode rows in one batch); a draw count that is not one per logit row, or no choice,
// is refused.
TEST(DeviceChoice, ModelChoosesFromItsOwnLogits) {
  INFERLAB_REQUIRE_FILE(stories());
  Cpu c;
  const int vocab = c.m.weights.config.vocab_size;
  auto run = [&](bool choosing, std::vector<int>& tokens, std::vector<float>& logits) {
    KvStorage kv(c.device, c.m.weights.config, 8, 16);
    StepBatch b;
    b.add_sequence(std::vector<int>{1, 40, 77, 9}, 0, std::vector<int>{0}, 16, 3, 4);
    b.add_sequence(std::vector<int>{5, 6}, 0, std::vector<int>{1}, 16, 0, 2);  // two logit rows
    if (choosing)
      c.model.forward_choosing(b, kv, c.attention, {TokenChoice::Kind::kArgmax, 0.0}, std::vector<double>(3, 0.0),
                               tokens);
    else
      c.model.forward(b, kv, c.attention, logits);
  };
  std::vector<int> tokens;
  std::vector<float> logits;
  run(true, tokens, logits);
  run(false, tokens, logits);
  ASSERT_EQ(tokens.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) EXPECT_EQ(tokens[i], argmax(logits.data() + i * vocab, vocab)) << "row " << i;

  KvStorage kv(c.device, c.m.weights.config, 8, 16);
  StepBatch b;
  b.add_sequence(std::vector<int>{1, 2}, 0, std::vector<int>{0}, 16, 1, 2);
  EXPECT_THROW(c.model.forward_choosing(b, kv, c.attention, {TokenChoice::Kind::kArgmax, 0.0}, {}, tokens), Error);
  EXPECT_THROW(c.model.forward_choosing(b, kv, c.attention, {}, std::vector<double>(1, 0.0), tokens), Error);
}

// An executor that chooses token floor(u * vocab) for a sampled row (the draw itself, visible in
// the output) and token 7 for an argmax row; host steps get flat logits.
class DrawEchoExecutor final : public StepExecutor {
 public:
  explicit DrawEchoExecutor(bool chooses) : chooses_(chooses) {}
  const ModelConfig& config() const override { return config_; }
  std::uint64_t weight_bytes() const override { return 0; }
  Device& device() override { return device_; }
  void prepare(const KvCacheConfig&) override {}
  double execute(const StepBatch& batch, std::span<const BlockCopy>, std::vector<float>& logits) override {
    logits.assign(batch.logit_rows.size() * static_cast<std::size_t>(config_.vocab_size), 0.0f);
    return 1e-3;
  }
  bool chooses_tokens() const override { return chooses_; }
  double execute_choosing(const StepBatch& batch, std::span<const BlockCopy>, const TokenChoice& choice,
                          std::span<const double> draws, std::vector<int>& tokens) override {
    EXPECT_EQ(draws.size(), batch.logit_rows.size());
    tokens.clear();
    for (double u : draws)
      tokens.push_back(choice.kind == TokenChoice::Kind::kSample ? static_cast<int>(u * config_.vocab_size) : 7);
    return 1e-3;
  }

 private:
  ModelConfig config_ = testing::stub_model_config(64);
  CpuDevice device_{1};
  bool chooses_;
};

// Declares `choice`; counts accept_for calls (which append token 1).
class DeclaringDecoder final : public Decoder {
 public:
  DeclaringDecoder(TokenChoice choice, int max_draft) : choice_(choice), max_draft_(max_draft) {}
  int max_draft_tokens() const override { return max_draft_; }
  void accept(std::span<const int>, std::span<const int>, const float*, int, Rng&, std::vector<int>& out) override {
    ++accepts;
    out.push_back(1);
  }
  TokenChoice device_choice() const override { return choice_; }
  int accepts = 0;

 private:
  TokenChoice choice_;
  int max_draft_;
};

RunResult run_echo(StepExecutor& exec, Decoder& dec) {
  ContinuousScheduler sched(256, 8, true);
  EngineOptions eo;
  eo.seed = 17;
  return Engine(exec, sched, dec, eo).run(testing::token_choice_requests(64, 3, 10));
}

TEST(DeviceChoice, TheEngineDrawsEachSequencesOwnUniformOncePerToken) {
  DrawEchoExecutor exec(true);
  DeclaringDecoder dec({TokenChoice::Kind::kSample, 1.0}, 0);
  const RunResult r = run_echo(exec, dec);
  EXPECT_EQ(dec.accepts, 0);
  const std::vector<Request> reqs = testing::token_choice_requests(64, 3, 10);
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    Rng rng(mix_seed(17, static_cast<std::uint64_t>(reqs[i].id)));
    std::vector<int> want;
    for (int k = 0; k < 10; ++k) want.push_back(static_cast<int>(rng.uniform() * 64));
    EXPECT_EQ(r.outputs[i], want) << "request " << reqs[i].id;
  }
  EXPECT_EQ(r.timeline.device_choice_steps, static_cast<long long>(r.timeline.steps.size()));

  DeclaringDecoder greedy({TokenChoice::Kind::kArgmax, 0.0}, 0);
  for (const auto& o : run_echo(exec, greedy).outputs) EXPECT_EQ(o, std::vector<int>(10, 7));
  EXPECT_EQ(greedy.accepts, 0);
}

TEST(DeviceChoice, TheHostPathRunsWhereTheExecutorOrTheDecoderCannotChoose) {
  struct Case {
    const char* what;
    bool executor_chooses;
    TokenChoice choice;
    int max_draft;
  };
  const Case cases[] = {{"executor without a device choice", false, {TokenChoice::Kind::kArgmax, 0.0}, 0},
                        {"decoder without one", true, {}, 0},
                        {"speculative decoder (drafts need verification)", true, {TokenChoice::Kind::kArgmax, 0.0}, 2}};
  for (const Case& k : cases) {
    SCOPED_TRACE(k.what);
    DrawEchoExecutor exec(k.executor_chooses);
    DeclaringDecoder dec(k.choice, k.max_draft);
    const RunResult r = run_echo(exec, dec);
    EXPECT_EQ(r.timeline.device_choice_steps, 0);
    EXPECT_EQ(dec.accepts, 3 * 10);
    for (const auto& o : r.outputs) EXPECT_EQ(o, std::vector<int>(10, 1));
  }
  // A sampled choice needs a temperature.
  DrawEchoExecutor exec(true);
  DeclaringDecoder cold({TokenChoice::Kind::kSample, 0.0}, 0);
  EXPECT_THROW(run_echo(exec, cold), Error);
}

}  // namespace
}  // namespace inferlab
