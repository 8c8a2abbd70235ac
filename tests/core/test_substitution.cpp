// Model as a variant key, and the layer plans through the runner: a [[variant]] may run another
// model (here stories260K cut to 2 layers) with quality against the baseline model on the same
// text; layer_skip and early_exit rows are evaluated as they run (KL > 0) and carry their own
// metrics; a model with another vocabulary or tokenizer is refused.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include "inferlab/formats/checkpoint.h"
#include "inferlab/error.h"
#include "inferlab/experiment/experiment.h"
#include "inferlab/plugin/registry.h"
#include "inferlab/run/runner.h"
#include "inferlab/tokenizer/tokenizer.h"
#include "test_support.h"

namespace inferlab {
namespace {

namespace fs = std::filesystem;

std::string stories() { return testing::data_path("models/stories260K/stories260K.bin"); }

struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name) : path(fs::temp_directory_path() / (name + std::to_string(getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

// variant -> metric -> value, from metrics.csv (repeat 0 rows).
std::map<std::string, std::map<std::string, std::string>> rows_of(const std::string& dir) {
  const auto csv = testing::read_csv(fs::path(dir) / "metrics.csv");
  std::map<std::string, std::map<std::string, std::string>> out;
  for (std::size_t r = 1; r < csv.size(); ++r)
    for (std::size_t c = 0; c < csv[0].size() && c < csv[r].size(); ++c) out[csv[r][0]][csv[0][c]] = csv[r][c];
  return out;
}

TEST(Substitution, VariantModelAndLayerPlansCarryHonestQuality) {
  INFERLAB_REQUIRE_FILE(stories());
  TempDir dir("inferlab_substitution_");
  const std::string toml = (dir.path / "s.toml").string();
  std::ofstream(toml) << "[experiment]\nname = \"s\"\nisolate = false\n[model]\npath = \"" << stories() << "\"\n"
                      << "[workload]\nnum_requests = 2\nprompt_len = 8\noutput_len = 8\n"
                      << "[quality]\ntext = \"" << testing::source_dir() << "/experiments/data/eval.txt\"\n"
                      << "max_tokens = 200\n"
                      << "[[variant]]\nname = \"two_layers\"\nmodel = { path = \"" << stories() << "\", n_layers = 2 }\n"
                      << "[[variant]]\nname = \"skip\"\ndecoding = { name = \"layer_skip\", layers = \"3\" }\n"
                      << "[[variant]]\nname = \"exit\"\ndecoding = { name = \"early_exit\", threshold = 0.3 }\n";
  const ExperimentSpec spec = load_experiment(toml, {});
  ASSERT_TRUE(spec.variants[1].model.has_value());
  EXPECT_EQ(spec.variants[1].model->n_layers, 2);
  Registry reg({testing::plugin_dir()});
  RunOptions ro;
  ro.out_root = dir.path.string();
  const RunOutcome outcome = run_plan(plan_experiment(spec, reg, experiment_model_config(spec.model)), reg, ro);
  ASSERT_EQ(outcome.failed, 0u);
  auto rows = rows_of(outcome.dir);
  auto num = [&](const std::string& v, const std::string& m) { return std::stod(rows.at(v).at(m)); };
  for (const char* v : {"two_layers", "skip", "exit"}) {
    SCOPED_TRACE(v);
    EXPECT_GT(num(v, "kl_vs_baseline"), 0.0);
    EXPECT_LT(num(v, "top1_agree_frac"), 1.0);
    EXPECT_TRUE(std::isfinite(num(v, "perplexity")));
    EXPECT_GT(num(v, "throughput_out_tok_s"), 0.0);
    EXPECT_NE(num(v, "perplexity"), num("baseline", "perplexity"));
  }
  EXPECT_EQ(num("baseline", "kl_vs_baseline"), 0.0);
  EXPECT_LT(num("two_layers", "weights_bytes"), num("baseline", "weights_bytes"));
  EXPECT_EQ(num("skip", "layers_active"), 4.0);
  EXPECT_EQ(num("skip", "kv_bytes_per_token") * 5, num("baseline", "kv_bytes_per_token") * 4);
  EXPECT_LT(num("exit", "mean_exit_layer"), 5.0);
  EXPECT_GT(num("exit", "exit_early_frac"), 0.0);
  // The resolved config names the substituted model, so rerunning it runs the same experiment.
  const std::string resolved = testing::slurp(fs::path(outcome.dir) / "config.toml");
  EXPECT_NE(resolved.find("model = { path = "), std::string::npos) << resolved;
  const ExperimentSpec again = load_experiment((fs::path(outcome.dir) / "config.toml").string(), {});
  ASSERT_TRUE(again.variants[1].model.has_value());
  EXPECT_EQ(again.variants[1].model->n_layers, 2);
}

TEST(Substitution, AnotherVocabularyIsRefusedAtValidate) {
  INFERLAB_REQUIRE_FILE(stories());
  TempDir dir("inferlab_substitution_vocab_");
  const std::string toml = (dir.path / "v.toml").string();
  std::ofstream(toml) << "[model]\npath = \"" << stories() << "\"\n\n[[variant]]\nname = \"big\"\n"
                      << "model = { preset = \"stories15m\" }\n";
  const ExperimentSpec spec = load_experiment(toml, {});
  Registry reg({testing::plugin_dir()});
  try {
    plan_experiment(spec, reg, experiment_model_config(spec.model));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(toml + ":6:"), std::string::npos) << what;
    EXPECT_NE(what.find("has a vocabulary of 32000 tokens, the baseline"), std::string::npos) << what;
    EXPECT_NE(what.find("512"), std::string::npos) << what;
  }
  std::ofstream(toml) << "[model]\npath = \"" << stories() << "\"\n\n[[variant]]\nname = \"both\"\n"
                      << "model = { preset = \"stories260k\", path = \"" << stories() << "\" }\n";
  EXPECT_THROW(load_experiment(toml, {}), Error);
}

TEST(Substitution, AnotherTokenizerWithTheSameSizeIsRefused) {
  INFERLAB_REQUIRE_FILE(stories());
  const LoadedModel a = load_model(stories());
  LoadedModel b = load_model(stories());
  check_same_tokenizer(a, b, "here");  // the same file: accepted
  const auto* sp = dynamic_cast<const SentencePieceTokenizer*>(a.tokenizer.get());
  ASSERT_NE(sp, nullptr);
  std::vector<std::string> pieces;
  std::vector<float> scores;
  for (int i = 0; i < sp->vocab_size(); ++i) {
    pieces.push_back(sp->piece(i));
    scores.push_back(0.0f);
  }
  std::swap(pieces[300], pieces[301]);
  b.tokenizer = std::make_unique<SentencePieceTokenizer>(pieces, scores, sp->bos_id(), sp->eos_id());
  try {
    check_same_tokenizer(a, b, "here");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("has another tokenizer (token 300"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace inferlab
