// Speculative decoding: the verification step reproduces the target distribution (a seeded
// chi-square test that fails for plain acceptance), greedy speculation emits exactly the greedy
// tokens on the real stories260K checkpoint for every draft kind and γ and on SmolLM2-135M for
// its int4 and 8-layer self-drafts, the draft's KV blocks all
// come back, and impossible drafts are clear errors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <numeric>

#include "inferlab/formats/checkpoint.h"
#include "inferlab/engine/engine.h"
#include "inferlab/error.h"
#include "inferlab/plugin/registry.h"
#include "layer_plan_fixtures.h"
#include "model_fixtures.h"
#include "plugins/common/scheduling/continuous_scheduler.h"
#include "speculative.h"
#include "test_support.h"

namespace inferlab {
namespace {

using plugins::SpeculativeDecoder;
using plugins::SpeculativeParams;

double chi_square(const std::vector<long long>& counts, const std::vector<float>& p) {
  const double n = static_cast<double>(std::accumulate(counts.begin(), counts.end(), 0LL));
  double chi = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const double e = n * p[i];
    chi += (static_cast<double>(counts[i]) - e) * (static_cast<double>(counts[i]) - e) / e;
  }
  return chi;
}

// The first emitted token of a step with γ = 2 drafts drawn from q must follow the target p,
// whatever q is (Leviathan et al., Theorem 3.5). 40,000 seeded draws over 5 tokens; the
// chi-square bound 18.47 is the 0.999 quantile at 4 degrees of freedom.
TEST(Speculative, VerificationReproducesTheTargetDistribution) {
  const std::vector<float> p = {0.40f, 0.25f, 0.15f, 0.12f, 0.08f};
  const std::vector<float> q = {0.05f, 0.10f, 0.15f, 0.30f, 0.40f};  // a poor draft
  const std::vector<std::vector<float>> target = {p, p, p};
  const std::vector<std::vector<float>> draft = {q, q};
  Rng rng(2024);
  std::vector<long long> lossless(5, 0), naive(5, 0);
  std::vector<int> out;
  for (int trial = 0; trial < 40000; ++trial) {
    const std::vector<int> drafts = {sample_from(q, rng), sample_from(q, rng)};
    out.clear();
    plugins::verify_drafts(target, drafts, draft, false, rng, out);
    ASSERT_GE(out.size(), 1u);
    ++lossless[static_cast<std::size_t>(out[0])];
    ++naive[static_cast<std::size_t>(drafts[0])];  // plain acceptance would emit the draft
  }
  EXPECT_LT(chi_square(lossless, p), 18.47);
  EXPECT_GT(chi_square(naive, p), 1000.0);  // the test tells the two apart
}

TEST(Speculative, GreedyVerificationKeepsTheMatchingPrefix) {
  auto one_hot = [](int k) {
    std::vector<float> v(6, 0.0f);
    v[static_cast<std::size_t>(k)] = 1.0f;
    return v;
  };
  const std::vector<std::vector<float>> target = {one_hot(2), one_hot(4), one_hot(1), one_hot(5)};
  Rng rng(1);
  std::vector<int> out;
  plugins::verify_drafts(target, std::vector<int>{2, 4, 0}, {}, true, rng, out);
  EXPECT_EQ(out, (std::vector<int>{2, 4, 1}));  // the third draft is wrong: the target's token
  out.clear();
  plugins::verify_drafts(target, std::vector<int>{2, 4, 1}, {}, true, rng, out);
  EXPECT_EQ(out, (std::vector<int>{2, 4, 1, 5}));  // all accepted, plus one from the last row
}

std::string stories() { return testing::data_path("models/stories260K/stories260K.bin"); }

struct SpecRun {
  RunResult result;
  int draft_free = 0, draft_total = 0;
  long long draft_forwards = 0;
};

SpecRun run_speculative(const ModelWeights& w, const std::vector<Request>& reqs, const SpeculativeParams& p) {
  CpuDevice device(2);
  testing::FloatQuantization quant;
  testing::RefAttention attention;
  Model model(w, quant, device);
  ContinuousScheduler sched(64, 8, true);
  SpeculativeDecoder dec(p, w, attention, device);
  EngineOptions eo;
  eo.kv.block_size = 8;
  eo.seed = 5;
  SpecRun run;
  run.result = Engine(model, attention, sched, dec, eo).run(reqs);
  run.draft_free = dec.draft_free_blocks();
  run.draft_total = dec.draft_total_blocks();
  run.draft_forwards = dec.draft_forwards();
  return run;
}

// Temperature 0: every draft kind and γ emits exactly the plain greedy tokens, and the draft's
// KV cache gives every block back.
TEST(Speculative, GreedyIsLosslessOnStories260kForEveryDraftAndGamma) {
  INFERLAB_REQUIRE_FILE(stories());
  const LoadedModel m = load_model(stories());
  const auto reqs = testing::story_requests(*m.tokenizer, 40);
  SpeculativeParams plain;
  plain.num_draft = 1;
  plain.draft_layers = 0;
  // Plain greedy: the sampling plugin's argmax path, through the same engine.
  CpuDevice device(2);
  testing::FloatQuantization quant;
  testing::RefAttention attention;
  Model model(m.weights, quant, device);
  ContinuousScheduler sched(64, 8, true);
  Registry reg({testing::plugin_dir()});
  auto greedy = reg.create_decoder("sampling", reg.resolve(PluginKind::kDecoding, "sampling", {}, "t"), device);
  EngineOptions eo;
  eo.kv.block_size = 8;
  const RunResult want = Engine(model, attention, sched, *greedy, eo).run(reqs);

  struct Case {
    int layers;
    std::string model;
    int gamma;
  };
  const Case cases[] = {{1, "", 1}, {1, "", 4}, {2, "", 3}, {2, "", 8}, {0, "", 4}, {0, stories(), 2}};
  for (const Case& c : cases) {
    SCOPED_TRACE("draft_layers " + std::to_string(c.layers) + " model '" + c.model + "' gamma " + std::to_string(c.gamma));
    SpeculativeParams p;
    p.num_draft = c.gamma;
    p.draft_layers = c.layers;
    p.draft_model = c.model;
    const SpecRun got = run_speculative(m.weights, reqs, p);
    EXPECT_EQ(got.result.outputs, want.outputs);
    EXPECT_GT(got.result.timeline.spec_proposed, 0);
    EXPECT_EQ(got.draft_free, got.draft_total);  // no block leak in the draft cache
    if (c.layers == 0) {  // the draft is the target: every draft accepted
      EXPECT_EQ(got.result.timeline.spec_accepted, got.result.timeline.spec_proposed);
    }
  }
}

// The two SmolLM2 drafts — the target itself with int4 weights (RTN g64) and its first 8
// of 30 layers — at temperature 0 emit exactly the plain greedy tokens, and give every draft
// block back. (scripts/fetch_smollm2.sh installs the model; without it the test skips.)
TEST(Speculative, GreedyIsLosslessOnSmolLM2ForInt4AndTruncatedDrafts) {
  INFERLAB_REQUIRE_FILE(testing::smollm2_path());
  const LoadedModel m = load_model(testing::smollm2_path());
  std::vector<Request> reqs;
  const char* prompts[] = {"The capital of France is", "Write a short poem about the sea:"};
  for (int i = 0; i < 2; ++i) {
    Request r;
    r.id = i;
    r.prompt = m.tokenizer->encode(prompts[i], true);
    r.max_output = 12;
    reqs.push_back(std::move(r));
  }
  CpuDevice device(2);
  testing::FloatQuantization quant;
  testing::RefAttention attention;
  Model model(m.weights, quant, device);
  ContinuousScheduler sched(64, 8, true);
  Registry reg({testing::plugin_dir()});
  auto greedy = reg.create_decoder("sampling", reg.resolve(PluginKind::kDecoding, "sampling", {}, "t"), device);
  EngineOptions eo;
  eo.kv.block_size = 8;
  const RunResult want = Engine(model, attention, sched, *greedy, eo).run(reqs);

  std::shared_ptr<Quantization> int4 =
      reg.create_quantization("int4", reg.resolve(PluginKind::kQuantization, "int4", {{"group_size", ParamValue(std::int64_t{64})}}, "t"), device);
  struct Case {
    int layers;
    bool int4_draft;
    int gamma;
  };
  for (const Case& c : {Case{0, true, 2}, Case{0, true, 4}, Case{8, false, 2}, Case{8, false, 4}}) {
    SCOPED_TRACE("draft_layers " + std::to_string(c.layers) + (c.int4_draft ? " int4" : " fp32") + " gamma " +
                 std::to_string(c.gamma));
    SpeculativeParams p;
    p.num_draft = c.gamma;
    p.draft_layers = c.layers;
    Model target(m.weights, quant, device);
    ContinuousScheduler s(64, 8, true);
    SpeculativeDecoder dec(p, m.weights, attention, device, c.int4_draft ? int4 : nullptr);
    const RunResult got = Engine(target, attention, s, dec, eo).run(reqs);
    EXPECT_EQ(got.outputs, want.outputs);
    EXPECT_GT(got.timeline.spec_proposed, 0);
    EXPECT_EQ(dec.draft_free_blocks(), dec.draft_total_blocks());
  }
}

// The three stories decode side by side (max_batch 8): each step's draft passes run all of them
// as one batch, so a step makes at most γ draft forwards whatever the batch — one sequence at a
// time it made one per proposed draft, about three times as many — and the output is still
// exactly the plain greedy one.
TEST(Speculative, DraftPassesOfAStepRunAsOneBatch) {
  INFERLAB_REQUIRE_FILE(stories());
  const LoadedModel m = load_model(stories());
  const auto reqs = testing::story_requests(*m.tokenizer, 40);
  SpeculativeParams one;
  one.num_draft = 1;
  one.draft_layers = 0;  // γ 1 with the target itself as the draft: always accepted, the greedy tokens
  const SpecRun want = run_speculative(m.weights, reqs, one);
  SpeculativeParams p;
  p.num_draft = 4;
  p.draft_layers = 1;
  const SpecRun got = run_speculative(m.weights, reqs, p);
  EXPECT_EQ(got.result.outputs, want.result.outputs);
  const long long steps = static_cast<long long>(got.result.timeline.steps.size());
  EXPECT_GT(got.draft_forwards, 0);
  EXPECT_LE(got.draft_forwards, p.num_draft * steps);
  // One sequence at a time, every proposed draft costs its own pass.
  EXPECT_LT(2 * got.draft_forwards, got.result.timeline.spec_proposed);
  EXPECT_EQ(got.draft_free, got.draft_total);
}

double metric_of(const MetricRow& row, const std::string& name) {
  for (const auto& [n, v] : row)
    if (n == name) return v;
  ADD_FAILURE() << "no metric " << name;
  return 0;
}

// The row's Theorem 3.8 prediction from the timeline's counts: γ̄ = 40 drafts / 10 drafting
// steps = 4, α = 32 / 40 = 0.8, a draft pass 0.2 s / 10 / 4 = 5 ms against a verify step of
// 1.0 s / 10 = 100 ms (c = 0.05): E = (1 − 0.8^5) / 0.2 = 3.3616 and E / (4 · 0.05 + 1).
TEST(Speculative, RowsReportTheoremThreeEightFromTheMeasuredCosts) {
  RunTimeline tl;
  tl.spec_proposed = 40;
  tl.spec_accepted = 32;
  tl.spec_seq_steps = 10;
  tl.spec_steps = 10;
  tl.spec_verify_s = 1.0;
  tl.draft_s = 0.2;
  const MetricRow row = compute_metrics(tl, {});
  EXPECT_DOUBLE_EQ(metric_of(row, "spec_gamma_mean"), 4.0);
  EXPECT_NEAR(metric_of(row, "spec_draft_ms"), 5.0, 1e-9);
  EXPECT_NEAR(metric_of(row, "spec_verify_ms"), 100.0, 1e-9);
  EXPECT_NEAR(metric_of(row, "spec_cost_ratio"), 0.05, 1e-12);
  EXPECT_NEAR(metric_of(row, "spec_predicted_speedup"), 3.3616 / 1.2, 1e-9);
  // A real run fills them in: the draft's time is charged in the row.
  INFERLAB_REQUIRE_FILE(stories());
  const LoadedModel m = load_model(stories());
  SpeculativeParams p;
  p.num_draft = 3;
  p.draft_layers = 1;
  const SpecRun run = run_speculative(m.weights, testing::story_requests(*m.tokenizer, 20), p);
  const MetricRow real = compute_metrics(run.result.timeline, {});
  EXPECT_GT(metric_of(real, "spec_draft_ms"), 0.0);
  EXPECT_GT(metric_of(real, "spec_verify_ms"), 0.0);
  EXPECT_GT(metric_of(real, "spec_predicted_speedup"), 0.0);
  EXPECT_GT(metric_of(real, "spec_gamma_mean"), 1.0);
  EXPECT_LE(metric_of(real, "spec_gamma_mean"), 3.0);
}

// Sampling: seeded runs repeat, drafts are accepted sometimes, and the draft's time shows.
TEST(Speculative, SampledRunsRepeatPerSeedAndAcceptSome) {
  INFERLAB_REQUIRE_FILE(stories());
  const LoadedModel m = load_model(stories());
  const auto reqs = testing::story_requests(*m.tokenizer, 40);
  SpeculativeParams p;
  p.num_draft = 3;
  p.draft_layers = 2;
  p.sampling.temperature = 0.8;
  const SpecRun a = run_speculative(m.weights, reqs, p), b = run_speculative(m.weights, reqs, p);
  EXPECT_EQ(a.result.outputs, b.result.outputs);
  const auto& tl = a.result.timeline;
  EXPECT_GT(tl.spec_accepted, 0);
  EXPECT_LT(tl.spec_accepted, tl.spec_proposed);
  EXPECT_GT(tl.draft_s, 0.0);
  EXPECT_EQ(a.draft_free, a.draft_total);
}

// The adaptive rule moves γ up while drafts are accepted and down while they are rejected.
TEST(Speculative, AdaptiveGammaFollowsTheAcceptanceRate) {
  plugins::AdaptiveGamma g(8);
  EXPECT_EQ(g.gamma(), 3);  // prior α̂ = 0.75
  for (int i = 0; i < 20; ++i) g.observe(g.gamma(), g.gamma());  // everything accepted
  EXPECT_EQ(g.gamma(), 8);
  EXPECT_GT(g.alpha(), 0.95);
  for (int i = 0; i < 20; ++i) g.observe(0, g.gamma());  // first draft always rejected
  EXPECT_EQ(g.gamma(), 1);
  EXPECT_LT(g.alpha(), 0.1);
  plugins::AdaptiveGamma steady(8);  // 4 kept then a rejection, every time: α̂ → 0.8, γ → 4
  for (int i = 0; i < 40; ++i) steady.observe(4, 8);
  EXPECT_NEAR(steady.alpha(), 0.8, 0.01);
  EXPECT_EQ(steady.gamma(), 4);
}

// Adaptive γ on the real model: still exactly greedy; a draft that is the target raises γ to
// its cap, a 1-layer draft keeps it low.
TEST(Speculative, AdaptiveGammaIsLosslessAndMovesWithTheDraft) {
  INFERLAB_REQUIRE_FILE(stories());
  const LoadedModel m = load_model(stories());
  const auto reqs = testing::story_requests(*m.tokenizer, 40);
  SpeculativeParams plain;
  plain.num_draft = 1;
  plain.draft_layers = 0;  // the target itself at γ 1: greedy output
  const SpecRun want = run_speculative(m.weights, reqs, plain);
  double mean_gamma[2] = {0, 0};
  for (int layers : {0, 1}) {
    SCOPED_TRACE("draft_layers " + std::to_string(layers));
    SpeculativeParams p;
    p.num_draft = 8;
    p.adaptive = true;
    p.draft_layers = layers;
    CpuDevice device(2);
    testing::FloatQuantization quant;
    testing::RefAttention attention;
    Model model(m.weights, quant, device);
    ContinuousScheduler sched(64, 8, true);
    SpeculativeDecoder dec(p, m.weights, attention, device);
    EngineOptions eo;
    eo.kv.block_size = 8;
    const RunResult got = Engine(model, attention, sched, dec, eo).run(reqs);
    EXPECT_EQ(got.outputs, want.result.outputs);
    EXPECT_EQ(dec.draft_free_blocks(), dec.draft_total_blocks());
    mean_gamma[layers] = dec.mean_gamma();
  }
  EXPECT_GT(mean_gamma[0], 5.0);  // α = 1: γ climbs from 3 to 8
  EXPECT_LT(mean_gamma[1], 3.0);  // a poor draft: γ falls below its start
}

TEST(Speculative, ImpossibleDraftsAreClearErrors) {
  INFERLAB_REQUIRE_FILE(stories());
  const LoadedModel m = load_model(stories());
  CpuDevice device(1);
  testing::RefAttention attention;
  SpeculativeParams deep;
  deep.draft_layers = 6;  // stories260K has 5
  try {
    SpeculativeDecoder dec(deep, m.weights, attention, device);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("draft_layers = 6, but the model has 5 layers"), std::string::npos) << e.what();
  }
  SpeculativeParams other;
  other.draft_model = "stories15m";  // vocabulary 32000, not 512
  try {
    SpeculativeDecoder dec(other, m.weights, attention, device);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("vocabulary of 32000 tokens, the target 512"), std::string::npos) << e.what();
  }
  // The same refusals at validate time, through the plugin's supports().
  Registry reg({testing::plugin_dir()});
  const Params bad = reg.resolve(PluginKind::kDecoding, "speculative", {{"draft_model", std::string("stories15m")}}, "t");
  const auto reasons = reg.check_support(PluginKind::kDecoding, "speculative",
                                         SupportQuery{m.weights.config, DeviceKind::kCpu, KvDtype::kF32, bad});
  ASSERT_EQ(reasons.size(), 1u);
  EXPECT_NE(reasons[0].find("vocabulary of 32000"), std::string::npos) << reasons[0];
  // The draft's quantization parameters without a draft quantization would be ignored: refused.
  for (const auto& [key, value] : {std::pair<std::string, ParamValue>{"draft_group_size", std::int64_t{32}},
                                   std::pair<std::string, ParamValue>{"draft_activations", std::string("int8")}}) {
    const Params loose = reg.resolve(PluginKind::kDecoding, "speculative", {{key, value}}, "t");
    const auto why = reg.check_support(PluginKind::kDecoding, "speculative",
                                       SupportQuery{m.weights.config, DeviceKind::kCpu, KvDtype::kF32, loose});
    ASSERT_EQ(why.size(), 1u) << key;
    EXPECT_NE(why[0].find("set draft_quantization"), std::string::npos) << why[0];
  }
  // With one, they reach the plugin, which refuses what it does not declare.
  const Params wrong = reg.resolve(PluginKind::kDecoding, "speculative",
                                   {{"draft_quantization", std::string("f16")}, {"draft_group_size", std::int64_t{32}}}, "t");
  try {
    reg.create_decoder("speculative", wrong, device, &m.weights, &attention);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("group_size"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace inferlab
