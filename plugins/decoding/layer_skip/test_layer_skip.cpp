// Static layer skipping: an empty list is the baseline token for token, a skipped layer changes
// the logits and shrinks the K/V the pool holds, the quality evaluation runs the skipping model,
// and a layer the model does not have is refused at validate time with the TOML location.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "inferlab/formats/checkpoint.h"
#include "plugins/common/scheduling/continuous_scheduler.h"
#include "inferlab/engine/engine.h"
#include "inferlab/error.h"
#include "inferlab/experiment/experiment.h"
#include "inferlab/results/quality.h"
#include "inferlab/plugin/registry.h"
#include "inferlab/run/runner.h"
#include "layer_skip.h"
#include "layer_plan_fixtures.h"
#include "model_fixtures.h"
#include "test_support.h"

namespace inferlab {
namespace {

std::string stories() { return testing::data_path("models/stories260K/stories260K.bin"); }

TEST(LayerSkip, EmptyListIsTheBaselineTokenForToken) {
  INFERLAB_REQUIRE_FILE(stories());
  const LoadedModel m = load_model(stories());
  const auto reqs = testing::story_requests(*m.tokenizer);
  const RunResult want = testing::run_decoder_plugin(m.weights, reqs, "sampling", {}).result;
  const RunResult got = testing::run_decoder_plugin(m.weights, reqs, "layer_skip", {{"layers", std::string("")}}).result;
  EXPECT_EQ(got.outputs, want.outputs);
  EXPECT_EQ(got.timeline.kv_bytes_per_token, want.timeline.kv_bytes_per_token);
}

TEST(LayerSkip, SkippingChangesTheTokensAndHoldsLessKv) {
  INFERLAB_REQUIRE_FILE(stories());
  const LoadedModel m = load_model(stories());
  const auto reqs = testing::story_requests(*m.tokenizer);
  const RunResult full = testing::run_decoder_plugin(m.weights, reqs, "sampling", {}).result;
  const RunResult skip = testing::run_decoder_plugin(m.weights, reqs, "layer_skip", {{"layers", std::string("2, 3")}}).result;
  EXPECT_NE(skip.outputs, full.outputs);
  // 3 of 5 layers hold K/V.
  EXPECT_EQ(skip.timeline.kv_bytes_per_token * 5, full.timeline.kv_bytes_per_token * 3);
}

// The same logits as a model truncated by hand: skipping layer k == removing it from the stack.
TEST(LayerSkip, SkippingALayerEqualsRemovingItFromTheWeights) {
  INFERLAB_REQUIRE_FILE(stories());
  const LoadedModel m = load_model(stories());
  CpuDevice device(2);
  testing::FloatQuantization quant;
  testing::RefAttention attention;
  Model model(m.weights, quant, device);
  LayerPlan plan = plugins::layer_skip_plan("1", 0, "last", m.weights.config.n_layers);
  model.set_layer_plan(&plan);
  ModelWeights removed = m.weights;
  removed.layers.erase(removed.layers.begin() + 1);
  removed.config.n_layers -= 1;
  Model reference(removed, quant, device);
  const std::vector<int> tokens = m.tokenizer->encode("Once upon a time there was a dog", true);
  testing::SequenceRunner a(model, attention), b(reference, attention);
  const std::vector<float> got = a.feed_all_logits(tokens);
  const std::vector<float> want = b.feed_all_logits(tokens);
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4f) << i;
  // ... and not the full model's logits.
  model.set_layer_plan(nullptr);
  testing::SequenceRunner c(model, attention);
  const std::vector<float> full = c.feed_all_logits(tokens);
  double diff = 0;
  for (std::size_t i = 0; i < got.size(); ++i) diff += std::fabs(got[i] - full[i]);
  EXPECT_GT(diff / static_cast<double>(got.size()), 1e-3);
}

TEST(LayerSkip, QualityEvaluatesTheSkippingModel) {
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
  const MetricRow base = q.evaluate("base", model, attention, true);
  LayerPlan plan = plugins::layer_skip_plan("", 2, "last", m.weights.config.n_layers);
  model.set_layer_plan(&plan);
  const MetricRow skip = q.evaluate("skip", model, attention, false);
  auto get = [](const MetricRow& r, const std::string& k) {
    for (const auto& [n, v] : r)
      if (n == k) return v;
    return -1.0;
  };
  EXPECT_GT(get(skip, "kl_vs_baseline"), 0.01);
  EXPECT_LT(get(skip, "top1_agree_frac"), 1.0);
  EXPECT_NE(get(skip, "perplexity"), get(base, "perplexity"));
}

TEST(LayerSkip, HeuristicLastKeepsTheTopLayer) {
  const LayerPlan p = plugins::layer_skip_plan("", 2, "last", 6);
  EXPECT_EQ(p.skip, (std::vector<bool>{false, false, false, true, true, false}));
  EXPECT_EQ(p.active_layers(6), 4);
}

TEST(LayerSkip, BadLayerListsAreErrorsAtValidateWithTheTomlLine) {
  INFERLAB_REQUIRE_FILE(stories());
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "inferlab_layer_skip_validate";
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "exp.toml").string();
  std::ofstream(path) << "[model]\npath = \"" << stories() << "\"\n\n[[variant]]\nname = \"bad\"\n"
                      << "decoding = { name = \"layer_skip\", layers = \"1, 7\" }\n";
  const ExperimentSpec spec = load_experiment(path, {});
  Registry reg({testing::plugin_dir()});
  try {
    plan_experiment(spec, reg, experiment_model_config(spec.model));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(path + ":6:"), std::string::npos) << what;
    EXPECT_NE(what.find("names layer 7, but the model has 5 layers"), std::string::npos) << what;
  }
  std::filesystem::remove_all(dir);
  for (const char* bad : {"x", "1,,2", "-1", "2,2"})
    EXPECT_THROW(plugins::layer_skip_plan(bad, 0, "last", 5), Error) << bad;
  EXPECT_THROW(plugins::layer_skip_plan("0,1,2,3,4", 0, "last", 5), Error);  // nothing left
  EXPECT_THROW(plugins::layer_skip_plan("1", 2, "last", 5), Error);          // list and count
  EXPECT_THROW(plugins::layer_skip_plan("", 5, "last", 5), Error);           // count too large
}

}  // namespace
}  // namespace inferlab
