// Teacher-forced quality: NLL against a hand computation from the model's logits, windowing,
// KL/top-1 against the baseline, and [quality] rows in an experiment run.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "inferlab/formats/checkpoint.h"
#include "inferlab/error.h"
#include "inferlab/experiment/experiment.h"
#include "inferlab/results/quality.h"
#include "inferlab/plugin/registry.h"
#include "inferlab/run/runner.h"
#include "model_fixtures.h"
#include "test_support.h"

namespace inferlab {
namespace {

std::vector<int> some_tokens(int n, int vocab, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<int> t(static_cast<std::size_t>(n));
  for (auto& x : t) x = static_cast<int>(rng.uniform_int(3, vocab));
  return t;
}

TEST(Quality, MeanNllMatchesAHandComputationFromLogits) {
  ModelWeights w = random_weights(preset_config("stories260k"), 5);
  testing::FloatQuantization q;
  testing::RefAttention att;
  CpuDevice device(2);
  Model model(w, q, device);
  auto tokens = some_tokens(40, 512, 1);

  testing::SequenceRunner runner(model, att);
  const auto& logits = runner.feed_all_logits(tokens);  // [40, vocab]
  double nll = 0;
  for (int i = 0; i + 1 < 40; ++i) {
    const float* row = logits.data() + static_cast<std::size_t>(i) * 512;
    double mx = *std::max_element(row, row + 512), sum = 0;
    for (int v = 0; v < 512; ++v) sum += std::exp(row[v] - mx);
    nll -= row[tokens[static_cast<std::size_t>(i) + 1]] - mx - std::log(sum);
  }
  nll /= 39;

  auto r = evaluate_perplexity(model, att, tokens, 0, 0);
  EXPECT_EQ(r.tokens, 39);
  EXPECT_NEAR(r.mean_nll, nll, 1e-4);
  EXPECT_NEAR(r.perplexity, std::exp(nll), 1e-3 * std::exp(nll));
}

TEST(Quality, SlidingWindowsPredictEveryTokenOnce) {
  ModelWeights w = random_weights(preset_config("stories260k"), 6);
  testing::FloatQuantization q;
  testing::RefAttention att;
  CpuDevice device(2);
  Model model(w, q, device);
  auto tokens = some_tokens(100, 512, 2);
  EXPECT_EQ(evaluate_perplexity(model, att, tokens, 32, 16).tokens, 99);  // sliding: all targets
  EXPECT_EQ(evaluate_perplexity(model, att, tokens, 32, 32).tokens, 96);  // disjoint: 31+31+31+3
  std::vector<std::vector<float>> lp;
  evaluate_perplexity(model, att, tokens, 0, 0, &lp);
  ASSERT_EQ(lp.size(), 99u);
  double mass = 0;
  for (float x : lp[0]) mass += std::exp(x);
  EXPECT_NEAR(mass, 1.0, 1e-4);
}

TEST(Quality, ContextOfOneTokenIsAnErrorNotPerplexityOne) {
  ModelWeights w = random_weights(preset_config("stories260k"), 6);
  testing::FloatQuantization q;
  testing::RefAttention att;
  CpuDevice device(1);
  Model model(w, q, device);
  auto tokens = some_tokens(20, 512, 3);
  try {
    evaluate_perplexity(model, att, tokens, 1, 0);  // predicted nothing and reported perplexity 1
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("context of at least 2 tokens, got 1"), std::string::npos) << e.what();
  }
  EXPECT_EQ(evaluate_perplexity(model, att, tokens, 2, 0).tokens, 10);  // 10 windows of 2: one target each
}

// fp32 vs int8 on a real checkpoint over the first `max_tokens` tokens of the committed text:
// KL small but non-zero, top-1 mostly agreeing, perplexity nearly unchanged.
void expect_int8_close_to_fp32(const std::string& path, int max_tokens, double max_kl, double min_top1,
                               double max_ppl) {
  LoadedModel m = load_model(path);
  ASSERT_TRUE(m.tokenizer);
  Registry reg({testing::plugin_dir()});
  CpuDevice device(2);
  auto att = reg.create_attention("flash", reg.resolve(PluginKind::kAttention, "flash", {}, "t"), device);
  auto none = reg.create_quantization("none", reg.resolve(PluginKind::kQuantization, "none", {}, "t"), device);
  auto int8 = reg.create_quantization("int8", reg.resolve(PluginKind::kQuantization, "int8", {}, "t"), device);
  Model fp32(m.weights, *none, device), q8(m.weights, *int8, device);
  std::ifstream in(testing::source_dir() + "/experiments/data/eval.txt");
  std::stringstream text;
  text << in.rdbuf();
  QualitySpec spec;
  spec.enabled = true;
  spec.max_tokens = max_tokens;
  auto tokens = quality_tokens(text.str(), m.tokenizer.get(), m.weights.config.vocab_size, spec.max_tokens);
  ASSERT_EQ(tokens.size(), static_cast<std::size_t>(max_tokens));
  QualityEvaluator eval(spec, tokens);
  auto base = eval.evaluate("baseline", fp32, *att, true);
  auto var = eval.evaluate("int8", q8, *att, false);
  std::map<std::string, double> b(base.begin(), base.end()), v(var.begin(), var.end());
  EXPECT_EQ(b["kl_vs_baseline"], 0.0);
  EXPECT_EQ(b["top1_agree_frac"], 1.0);
  EXPECT_GT(b["perplexity"], 2.0);
  EXPECT_LT(b["perplexity"], max_ppl);  // a trained model reads plain English far below vocab size
  EXPECT_GT(v["kl_vs_baseline"], 1e-6);
  EXPECT_LT(v["kl_vs_baseline"], max_kl);
  EXPECT_GT(v["top1_agree_frac"], min_top1);
  EXPECT_NEAR(v["perplexity"], b["perplexity"], 0.05 * b["perplexity"]);
  // Cached: asking again returns the same row without recomputation.
  EXPECT_EQ(eval.evaluate("int8", q8, *att, false), var);
}

TEST(Quality, Int8ShowsSmallNonZeroKlOnStories260K) {
  const std::string bin = testing::data_path("models/stories260K/stories260K.bin");
  INFERLAB_REQUIRE_FILE(bin);
  expect_int8_close_to_fp32(bin, 300, 0.02, 0.9, 60.0);
}

TEST(Quality, Int8ShowsSmallNonZeroKlOnSmolLM2) {
  const std::string path = testing::smollm2_path();
  INFERLAB_REQUIRE_FILE(path);
  expect_int8_close_to_fp32(path, 160, 0.05, 0.85, 80.0);
}

TEST(Quality, ExperimentRowsCarrySpeedAndQuality) {
  const std::string bin = testing::data_path("models/stories260K/stories260K.bin");
  INFERLAB_REQUIRE_FILE(bin);
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("inferlab_quality_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  std::ofstream(dir / "q.toml") << "[experiment]\nname = \"q\"\nrepeats = 2\n[model]\npath = \"" << bin << "\"\n"
                                << "[workload]\nnum_requests = 2\nprompt_len = 8\noutput_len = 4\n"
                                << "[quality]\ntext = \"" << testing::source_dir() << "/experiments/data/eval.txt\"\n"
                                << "max_tokens = 200\n[[variant]]\nname = \"int8\"\nquantization = \"int8\"\n";
  ExperimentSpec spec = load_experiment((dir / "q.toml").string(), {});
  Registry reg({testing::plugin_dir()});
  Plan plan = plan_experiment(spec, reg, experiment_model_config(spec.model));
  RunOptions ro;
  ro.out_root = dir.string();
  const RunOutcome outcome = run_plan(plan, reg, ro);
  EXPECT_EQ(outcome.rows, 4u);
  EXPECT_EQ(outcome.failed, 0u);
  std::ifstream csv(outcome.dir + "/metrics.csv");
  std::string header, row;
  std::getline(csv, header);
  for (const char* col : {"perplexity", "kl_vs_baseline", "top1_agree_frac", "ttft_ms_p50"})
    EXPECT_NE(header.find(col), std::string::npos) << col;
  int rows = 0;
  while (std::getline(csv, row)) {
    ++rows;
    EXPECT_NE(row.find(",ok,"), std::string::npos) << row;
  }
  EXPECT_EQ(rows, 4);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace inferlab
