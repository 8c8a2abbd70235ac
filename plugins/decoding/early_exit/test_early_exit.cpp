// Early exit by confidence: threshold 1 is plain greedy token for token, a low threshold exits
// earlier (mean exit layer falls) and costs quality, the K/V propagated from the exit state is the
// same whether a sequence runs token by token (every layer above an exit fills K/V only) or in one
// teacher-forced pass (mixed rows), and bad thresholds or layers are refused at validate time.
#include <gtest/gtest.h>

#include <cmath>

#include "early_exit.h"
#include "inferlab/formats/checkpoint.h"
#include "inferlab/engine/engine.h"
#include "inferlab/error.h"
#include "inferlab/results/quality.h"
#include "inferlab/plugin/registry.h"
#include "layer_plan_fixtures.h"
#include "model_fixtures.h"
#include "plugins/common/scheduling/continuous_scheduler.h"
#include "test_support.h"

namespace inferlab {
namespace {

std::string stories() { return testing::data_path("models/stories260K/stories260K.bin"); }

TEST(EarlyExit, ThresholdOneIsPlainGreedy) {
  INFERLAB_REQUIRE_FILE(stories());
  const LoadedModel m = load_model(stories());
  const auto reqs = testing::story_requests(*m.tokenizer);
  const testing::DecoderRun want = testing::run_decoder_plugin(m.weights, reqs, "sampling", {});
  const testing::DecoderRun got = testing::run_decoder_plugin(m.weights, reqs, "early_exit", {{"threshold", 1.0}});
  EXPECT_EQ(got.result.outputs, want.result.outputs);
  EXPECT_DOUBLE_EQ(testing::metric_value(got.plan_metrics, "mean_exit_layer"), 5.0);  // nobody left early
  EXPECT_DOUBLE_EQ(testing::metric_value(got.plan_metrics, "exit_early_frac"), 0.0);
}

TEST(EarlyExit, LowerThresholdsExitEarlierAndChangeTokens) {
  INFERLAB_REQUIRE_FILE(stories());
  const LoadedModel m = load_model(stories());
  const auto reqs = testing::story_requests(*m.tokenizer);
  const testing::DecoderRun full = testing::run_decoder_plugin(m.weights, reqs, "sampling", {});
  const std::string layers = "1,2,3";  // after layer 0 a tied-embedding model mostly repeats its input
  const testing::DecoderRun mid = testing::run_decoder_plugin(m.weights, reqs, "early_exit", {{"threshold", 0.99}, {"exit_layers", layers}});
  const testing::DecoderRun low = testing::run_decoder_plugin(m.weights, reqs, "early_exit", {{"threshold", 0.6}, {"exit_layers", layers}});
  const double mid_layer = testing::metric_value(mid.plan_metrics, "mean_exit_layer"), low_layer = testing::metric_value(low.plan_metrics, "mean_exit_layer");
  EXPECT_LT(mid_layer, 5.0);
  EXPECT_LT(low_layer, mid_layer);
  EXPECT_GT(testing::metric_value(low.plan_metrics, "exit_early_frac"), 0.5);
  EXPECT_NE(low.result.outputs, full.result.outputs);
  // The margin criterion is stricter than the top probability at the same threshold.
  const testing::DecoderRun margin = testing::run_decoder_plugin(m.weights, reqs, "early_exit",
                                  {{"threshold", 0.6}, {"exit_layers", layers}, {"criterion", std::string("margin")}});
  EXPECT_GE(testing::metric_value(margin.plan_metrics, "mean_exit_layer"), low_layer);
}

// CALM's state propagation, two ways: token by token (a row that exits makes every layer above
// fill K/V only) and teacher-forced in one pass (exited rows ride along, their state restored)
// must give the same logits at every position.
TEST(EarlyExit, PropagatedKvIsTheSameTokenByTokenAndInOnePass) {
  INFERLAB_REQUIRE_FILE(stories());
  const LoadedModel m = load_model(stories());
  CpuDevice device(2);
  testing::FloatQuantization quant;
  testing::RefAttention attention;
  Model model(m.weights, quant, device);
  LayerPlan plan = plugins::early_exit_plan("1,2,3", 0.99, "max_prob", m.weights.config.n_layers);
  model.set_layer_plan(&plan);
  const std::vector<int> tokens =
      m.tokenizer->encode("Once upon a time there was a little girl named Lily. She liked to play.", true);
  testing::SequenceRunner all(model, attention);
  const std::vector<float> one_pass = all.feed_all_logits(tokens);
  const long long exited_one_pass = plan.exited_rows;
  ASSERT_GT(exited_one_pass, 0);
  ASSERT_LT(exited_one_pass, static_cast<long long>(tokens.size()));  // a mixed batch
  plan.reset_counters();
  testing::SequenceRunner step(model, attention);
  const std::size_t vocab = static_cast<std::size_t>(m.weights.config.vocab_size);
  for (std::size_t t = 0; t < tokens.size(); ++t) {
    const std::vector<float>& row = step.feed({tokens[t]});
    for (std::size_t i = 0; i < vocab; ++i) ASSERT_NEAR(row[i], one_pass[t * vocab + i], 2e-3f) << "position " << t;
  }
  EXPECT_EQ(plan.exited_rows, exited_one_pass);
}

// A row that exits after layer l takes exactly the logits of the model cut to its first l + 1
// layers (the same final norm and classifier): layers above an exit never feed back below it.
TEST(EarlyExit, ExitLogitsAreTheTruncatedModelsLogits) {
  INFERLAB_REQUIRE_FILE(stories());
  const LoadedModel m = load_model(stories());
  CpuDevice device(2);
  testing::FloatQuantization quant;
  testing::RefAttention attention;
  Model model(m.weights, quant, device);
  LayerPlan plan = plugins::early_exit_plan("2", 1e-9, "max_prob", m.weights.config.n_layers);  // everyone exits
  model.set_layer_plan(&plan);
  ModelWeights cut = m.weights;
  cut.layers.resize(3);
  cut.config.n_layers = 3;
  Model truncated(cut, quant, device);
  const std::vector<int> tokens = m.tokenizer->encode("The cat sat on the mat and looked at the bird.", true);
  testing::SequenceRunner a(model, attention), b(truncated, attention);
  const std::vector<float> got = a.feed_all_logits(tokens);
  const std::vector<float> want = b.feed_all_logits(tokens);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4f) << i;
  EXPECT_EQ(plan.exited_rows, static_cast<long long>(tokens.size()));
  EXPECT_DOUBLE_EQ(plan.layers_run_sum / static_cast<double>(plan.logit_rows), 3.0);
}

TEST(EarlyExit, QualityEvaluatesTheExitingModel) {
  INFERLAB_REQUIRE_FILE(stories());
  const LoadedModel m = load_model(stories());
  CpuDevice device(2);
  testing::FloatQuantization quant;
  testing::RefAttention attention;
  Model model(m.weights, quant, device);
  const std::vector<int> tokens =
      m.tokenizer->encode("Once upon a time there was a little girl named Lily. She liked to play in the park.", true);
  QualitySpec spec;
  QualityEvaluator q(spec, tokens);
  q.evaluate("base", model, attention, true);
  LayerPlan plan = plugins::early_exit_plan("", 0.2, "max_prob", m.weights.config.n_layers);
  model.set_layer_plan(&plan);
  const MetricRow exit = q.evaluate("exit", model, attention, false);
  EXPECT_GT(testing::metric_value(exit, "kl_vs_baseline"), 0.0);
  EXPECT_GT(plan.exited_rows, 0);
}

TEST(EarlyExit, BadThresholdsAndLayersAreRefusedAtValidate) {
  Registry reg({testing::plugin_dir()});
  ModelConfig c;
  c.n_layers = 5;
  c.vocab_size = 512;
  struct Case {
    std::map<std::string, ParamValue> params;
    const char* says;
  };
  const Case cases[] = {{{{"threshold", 0.0}}, "threshold = 0.000000; allowed: (0, 1]"},
                        {{{"threshold", 1.5}}, "allowed: (0, 1]"},
                        {{{"threshold", -0.2}}, "allowed: (0, 1]"},
                        {{{"exit_layers", std::string("1,9")}}, "names layer 9, but the model has 5 layers"},
                        {{{"exit_layers", std::string("4")}}, "the top one"}};
  for (const Case& k : cases) {
    const Params p = reg.resolve(PluginKind::kDecoding, "early_exit", k.params, "t");
    const auto reasons = reg.check_support(PluginKind::kDecoding, "early_exit", SupportQuery{c, DeviceKind::kCpu, KvDtype::kF32, p});
    ASSERT_EQ(reasons.size(), 1u) << k.says;
    EXPECT_NE(reasons[0].find(k.says), std::string::npos) << reasons[0];
  }
  EXPECT_THROW(reg.resolve(PluginKind::kDecoding, "early_exit", {{"criterion", std::string("entropy")}}, "t"), Error);
}

}  // namespace
}  // namespace inferlab
