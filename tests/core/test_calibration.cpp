// Calibration: one float pass records every linear's input statistics; and on SmolLM2 the
// calibrated int4 methods (GPTQ, AWQ) stay closer to the fp32 model than round-to-nearest int4
// at the same group size.
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "inferlab/model/calibration.h"
#include "inferlab/formats/checkpoint.h"
#include "inferlab/formats/formats.h"
#include "inferlab/model/model_config.h"
#include "inferlab/results/quality.h"
#include "inferlab/plugin/registry.h"
#include "model_fixtures.h"
#include "test_support.h"

namespace inferlab {
namespace {

CalibrationNeeds all_needs(int samples) {
  CalibrationNeeds n;
  n.hessian = true;
  n.max_abs = true;
  n.samples = samples;
  return n;
}

TEST(Calibration, RecordsEveryLinearsInputOnce) {
  ModelConfig c = preset_config("stories260k");
  const ModelWeights w = random_weights(c, 3);
  testing::RefAttention attention;
  std::vector<int> tokens;
  for (int i = 0; i < 40; ++i) tokens.push_back(1 + (i * 7) % (c.vocab_size - 1));
  const CalibrationSet set = collect_calibration(w, attention, tokens, 16, all_needs(8), 5, 1);
  EXPECT_EQ(set.size(), static_cast<std::size_t>(7 * c.n_layers + 1));
  const LinearCalibration* wq = set.find("layers.0.wq");
  ASSERT_NE(wq, nullptr);
  EXPECT_EQ(set.find("layers.0.wk"), wq);  // same input, one record
  EXPECT_EQ(set.find("layers.0.wv"), wq);
  EXPECT_EQ(set.find("layers.1.w3"), set.find("layers.1.w1"));
  EXPECT_NE(set.find("layers.0.wo"), wq);
  EXPECT_EQ(set.find("layers.0.w2")->in, c.hidden_dim);
  EXPECT_EQ(wq->tokens, 40);  // windows 16 + 16 + 8: every token once
  EXPECT_EQ(wq->sample_rows, 8);
  const int in = wq->in;
  for (int i = 0; i < in; ++i) {
    const double hii = wq->hessian[static_cast<std::size_t>(i) * in + i];
    // Σ x² ≥ max x² and Σ x² ≥ (Σ|x|)² / N (Cauchy–Schwarz); H symmetric.
    EXPECT_GE(hii * (1 + 1e-9), static_cast<double>(wq->max_abs[static_cast<std::size_t>(i)]) * wq->max_abs[static_cast<std::size_t>(i)]);
    EXPECT_GE(hii * (1 + 1e-6), 40.0 * wq->mean_abs[static_cast<std::size_t>(i)] * wq->mean_abs[static_cast<std::size_t>(i)]);
    for (int j = 0; j < i; ++j)
      EXPECT_NEAR(wq->hessian[static_cast<std::size_t>(i) * in + j], wq->hessian[static_cast<std::size_t>(j) * in + i], 1e-9 * hii);
  }
  // Seeded: the same seed gives the same sample rows, another seed other rows.
  const CalibrationSet again = collect_calibration(w, attention, tokens, 16, all_needs(8), 5, 2);
  EXPECT_EQ(again.find("layers.0.wq")->samples, wq->samples);
  EXPECT_EQ(again.find("layers.0.wq")->hessian, wq->hessian);
  EXPECT_NE(collect_calibration(w, attention, tokens, 16, all_needs(8), 6, 1).find("layers.0.wq")->samples, wq->samples);
  // Nothing asked, nothing stored.
  const CalibrationSet none = collect_calibration(w, attention, tokens, 16, CalibrationNeeds{}, 5, 1);
  EXPECT_TRUE(none.find("layers.0.wq")->hessian.empty());
  EXPECT_TRUE(none.find("layers.0.wq")->samples.empty());
}

// SmoothQuant's smoothing transform alone (quantize = false) is a reparametrisation: the model's
// logits stay those of fp32 within float rounding, with smoothing scales far from 1.
TEST(Calibration, SmoothingTransformAloneLeavesLogitsUnchanged) {
  ModelConfig c = preset_config("stories260k");
  const ModelWeights w = random_weights(c, 4);
  testing::RefAttention attention;
  std::vector<int> tokens;
  for (int i = 0; i < 48; ++i) tokens.push_back(1 + (i * 11) % (c.vocab_size - 1));
  Registry reg({testing::plugin_dir()});
  CpuDevice device(1);
  auto none = reg.create_quantization("none", reg.resolve(PluginKind::kQuantization, "none", {}, "t"), device);
  auto smooth = reg.create_quantization(
      "smoothquant",
      reg.resolve(PluginKind::kQuantization, "smoothquant", {{"quantize", false}, {"alpha", 0.8}}, "t"), device);
  const CalibrationSet calib = collect_calibration(w, attention, tokens, 16, smooth->calibration_needs(), 1, 1);
  std::vector<std::vector<float>> a, b;
  Model m0(w, *none, device);
  evaluate_perplexity(m0, attention, tokens, 0, 0, &a);
  Model m1(w, *smooth, device, &calib);
  evaluate_perplexity(m1, attention, tokens, 0, 0, &b);
  ASSERT_EQ(a.size(), b.size());
  double worst = 0;
  for (std::size_t t = 0; t < a.size(); ++t)
    for (std::size_t i = 0; i < a[t].size(); ++i) worst = std::max(worst, static_cast<double>(std::fabs(a[t][i] - b[t][i])));
  EXPECT_LT(worst, 1e-4);
  EXPECT_GT(m1.weight_bytes(), m0.weight_bytes());  // the smoothing vectors are stored
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// SmolLM2-135M cut to its first 8 layers (to keep the test to seconds on 2 cores), classifier in
// fp32 for every method: calibrate on 256 tokens of experiments/data/calibration.txt, evaluate
// 128 tokens of experiments/data/eval.txt (another text) against the fp32 model.
TEST(Calibration, GptqAndAwqBeatRoundToNearestInt4OnSmolLM2) {
  const std::string path = testing::smollm2_path();
  INFERLAB_REQUIRE_FILE(path);
  LoadedModel m = load_gguf(path);
  m.weights.layers.resize(8);
  m.weights.config.n_layers = 8;
  const int vocab = m.weights.config.vocab_size;
  auto calib_tokens = quality_tokens(read_text(testing::source_dir() + "/experiments/data/calibration.txt"),
                                     m.tokenizer.get(), vocab, 256);
  auto eval_tokens = quality_tokens(read_text(testing::source_dir() + "/experiments/data/eval.txt"), m.tokenizer.get(),
                                    vocab, 128);
  ASSERT_EQ(calib_tokens.size(), 256u);
  ASSERT_EQ(eval_tokens.size(), 128u);
  testing::RefAttention attention;
  Registry reg({testing::plugin_dir()});
  CpuDevice device(2);
  auto make = [&](const std::string& name, std::map<std::string, ParamValue> params) {
    params["skip_classifier"] = true;
    return reg.create_quantization(name, reg.resolve(PluginKind::kQuantization, name, params, "test"), device);
  };
  CalibrationNeeds needs;
  for (const char* name : {"gptq", "awq"}) needs = merge_needs(needs, make(name, {})->calibration_needs());
  const CalibrationSet calib = collect_calibration(m.weights, attention, calib_tokens, 128, needs, 1, 2);

  std::vector<std::vector<float>> base;
  {
    auto q = reg.create_quantization("none", reg.resolve(PluginKind::kQuantization, "none", {}, "test"), device);
    Model model(m.weights, *q, device);
    evaluate_perplexity(model, attention, eval_tokens, 0, 0, &base);
  }
  auto kl_of = [&](const std::string& name, std::map<std::string, ParamValue> params) {
    auto q = make(name, std::move(params));
    Model model(m.weights, *q, device, &calib);
    std::vector<std::vector<float>> lp;
    const double ppl = evaluate_perplexity(model, attention, eval_tokens, 0, 0, &lp).perplexity;
    double kl = 0;
    for (std::size_t t = 0; t < lp.size(); ++t)
      for (std::size_t i = 0; i < lp[t].size(); ++i)
        kl += std::exp(static_cast<double>(base[t][i])) * (base[t][i] - lp[t][i]);
    kl /= static_cast<double>(lp.size());
    std::printf("%-5s g64: kl_vs_fp32 %.5f perplexity %.3f\n", name.c_str(), kl, ppl);
    return kl;
  };
  const double rtn = kl_of("int4", {{"group_size", std::int64_t{64}}});
  const double gptq = kl_of("gptq", {{"group_size", std::int64_t{64}}});
  const double awq = kl_of("awq", {{"group_size", std::int64_t{64}}});
  EXPECT_LT(gptq, 0.95 * rtn);  // fails with GPTQ's error feedback off (it is then RTN)
  EXPECT_LT(awq, 0.95 * rtn);   // fails with AWQ's scale search off (α = 0 is RTN)
}

}  // namespace
}  // namespace inferlab
