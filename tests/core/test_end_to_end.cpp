// The CLI as a user runs it: the quickstart end to end with every output file and column
// checked; a failing variant isolated; bad input a one-line error with no results written.
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include "inferlab/experiment/tomlpp.h"

#include "inferlab/formats/checkpoint.h"
#include "inferlab/results/metrics.h"
#include "cli_runs.h"
#include "test_support.h"

namespace inferlab::testing {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) { return testing::fresh_dir("e2e", name); }

TEST(EndToEnd, QuickstartWritesEveryFileAndColumn) {
  fs::path out = fresh_dir("quickstart");
  Cli c = run_cli("run " + testing::source_dir() + "/experiments/quickstart.toml --out " + out.string() + " --log warn");
  ASSERT_EQ(c.code, 0) << c.err;
  fs::path dir = only_run_dir(out, "quickstart");
  EXPECT_NE(c.out.find("results: " + dir.string() + "/summary.md"), std::string::npos) << c.out;

  for (const char* f : {"config.toml", "manifest.json", "metrics.csv", "metrics.json", "requests.csv", "steps.csv",
                        "summary.md", "report.html"})
    EXPECT_TRUE(fs::exists(dir / f)) << f;
  EXPECT_NE(c.out.find("report: " + dir.string() + "/report.html"), std::string::npos) << c.out;
  const std::string html = slurp(dir / "report.html");
  for (const char* s : {"<table class=\"summary sortable\"", "continuous+flash+int8", "Figures unavailable: not drawn here",
                        "class=\"manifest\""})
    EXPECT_NE(html.find(s), std::string::npos) << s;

  // config.toml is valid TOML and fully resolved (plugin defaults written out).
  toml::table cfg = toml::parse_file((dir / "config.toml").string());
  EXPECT_EQ(cfg["experiment"]["name"].value_or(std::string()), "quickstart");
  EXPECT_EQ(cfg["baseline"]["scheduler"]["max_batch"].value_or(0), 8);
  EXPECT_TRUE(cfg["variant"][1]["attention"]["tile"].is_integer());  // flash's default, resolved

  const std::string manifest = slurp(dir / "manifest.json");
  for (const char* key : {"\"git_commit\"", "\"git_dirty\"", "\"compiler\"", "\"cpu\"", "\"cpu_isa\"", "\"config_hash\"", "\"plugins\"",
                          "\"stacks\"", "\"repeat_seeds\"", "\"weights_seed\"", "flash 1.0.0", "\"tokenization\""})
    EXPECT_NE(manifest.find(key), std::string::npos) << key;

  auto csv = read_csv(dir / "metrics.csv");
  ASSERT_EQ(csv.size(), 1u + 3 * 3);  // header + 3 variants × 3 repeats
  std::vector<std::string> expect = {"variant", "repeat", "status", "error", "wall_s"};
  for (const auto& m : metric_names()) expect.push_back(m);
  ASSERT_GE(csv[0].size(), expect.size());
  for (std::size_t i = 0; i < expect.size(); ++i) EXPECT_EQ(csv[0][i], expect[i]);
  for (std::size_t r = 1; r < csv.size(); ++r) {
    EXPECT_EQ(csv[r][2], "ok") << csv[r][3];
    ASSERT_EQ(csv[r].size(), csv[0].size());
    for (std::size_t i = 4; i < csv[r].size(); ++i)
      EXPECT_FALSE(csv[r][i].empty()) << "row " << r << " column " << csv[0][i];
  }
  // Every variant finished all 48 requests, and int8 stores fewer weight bytes.
  std::map<std::string, std::size_t> col;
  for (std::size_t i = 0; i < csv[0].size(); ++i) col[csv[0][i]] = i;
  EXPECT_EQ(csv[1][col["requests"]], "48");
  EXPECT_LT(std::stod(csv[3][col["weights_bytes"]]), 0.6 * std::stod(csv[1][col["weights_bytes"]]));

  auto req = read_csv(dir / "requests.csv");
  EXPECT_EQ(req.size(), 1u + 48 * 3 * 3);
  EXPECT_EQ(req[0][0], "variant");
  EXPECT_EQ(req[0].back(), "first_scheduled_s");
  EXPECT_EQ(req[0][req[0].size() - 2], "status");
  EXPECT_EQ(req[1][req[1].size() - 2], "finished");
  EXPECT_EQ(req[1].back(), "0");  // the first request arrives at 0 and runs in the first step
  // steps.csv: every cell's steps (fewer than 4000 here: none sampled away), component times.
  auto steps = read_csv(dir / "steps.csv");
  ASSERT_GT(steps.size(), 9u * 48);
  EXPECT_EQ(steps[0][0], "variant");
  EXPECT_EQ(steps[0].back(), "time_framework_s");
  EXPECT_EQ(steps[1][2], "0");

  const std::string md = slurp(dir / "summary.md");
  for (const char* s : {"baseline", "continuous+flash+int8", "±", "(×", "ttft_ms_p50"}) EXPECT_NE(md.find(s), std::string::npos) << s;
  EXPECT_NE(slurp(dir / "metrics.json").find("\"throughput_out_tok_s\""), std::string::npos);
}

TEST(EndToEnd, FailingVariantIsRecordedAndOthersStillRun) {
  fs::path out = fresh_dir("failing");
  fs::path toml = out / "failing.toml";
  std::ofstream(toml) << "[experiment]\nname = \"failing\"\n[model]\npreset = \"stories260k\"\n"
                      << "[workload]\nnum_requests = 3\nprompt_len = 6\noutput_len = 8\n"
                      << "[plugins]\npaths = [\"" << testing::binary_dir() << "/test_plugins/throwing\"]\n"
                      << "[[variant]]\nname = \"broken\"\ndecoding = { name = \"throwing\", after = 2 }\n"
                      << "[[variant]]\nname = \"flash\"\nattention = \"flash\"\n";
  Cli c = run_cli("run " + toml.string() + " --out " + out.string() + " --log quiet");
  EXPECT_EQ(c.code, 3) << c.err;
  auto csv = read_csv(only_run_dir(out, "failing") / "metrics.csv");
  ASSERT_EQ(csv.size(), 4u);
  EXPECT_EQ(csv[1][2], "ok");
  EXPECT_EQ(csv[2][0], "broken");
  EXPECT_EQ(csv[2][2], "failed");
  EXPECT_NE(csv[2][3].find("deliberate failure"), std::string::npos) << csv[2][3];
  EXPECT_EQ(csv[3][0], "flash");
  EXPECT_EQ(csv[3][2], "ok");
}

TEST(EndToEnd, BadInputIsOneLineErrorAndWritesNothing) {
  fs::path out = fresh_dir("bad");
  fs::path toml = out / "bad.toml";
  std::ofstream(toml) << "[model]\npreset = \"stories260k\"\n[baseline]\nattention = \"flsh\"\n";
  Cli c = run_cli("run " + toml.string() + " --out " + out.string());
  EXPECT_EQ(c.code, 1);
  EXPECT_NE(c.err.find(toml.string() + ":4:13"), std::string::npos) << c.err;
  EXPECT_NE(c.err.find("did you mean 'flash'"), std::string::npos) << c.err;
  EXPECT_EQ(std::count(c.err.begin(), c.err.end(), '\n'), 1) << c.err;
  EXPECT_FALSE(fs::exists(out / "bad"));

  c = run_cli("run " + toml.string() + " --set baseline.attention=naive --set baseline.scheduler.max_batchh=2");
  EXPECT_EQ(c.code, 1);
  EXPECT_NE(c.err.find("unknown parameter 'max_batchh'"), std::string::npos) << c.err;

  c = run_cli("run --no-such-flag x.toml");
  EXPECT_EQ(c.code, 2);
  c = run_cli("validate /nonexistent.toml");
  EXPECT_EQ(c.code, 1);
  EXPECT_NE(c.err.find("/nonexistent.toml: cannot open"), std::string::npos) << c.err;
}

TEST(EndToEnd, RunsNeverOverwriteEachOther) {
  fs::path out = fresh_dir("twice");
  fs::path toml = out / "tiny.toml";
  std::ofstream(toml) << "[experiment]\nname = \"tiny\"\n[model]\npreset = \"stories260k\"\n"
                      << "[workload]\nnum_requests = 2\nprompt_len = 4\noutput_len = 3\n";
  ASSERT_EQ(run_cli("run " + toml.string() + " --out " + out.string() + " --log quiet").code, 0);
  ASSERT_EQ(run_cli("run " + toml.string() + " --out " + out.string() + " --log quiet").code, 0);
  std::size_t n = 0;
  for (const auto& d : fs::directory_iterator(out / "tiny")) n += fs::exists(d.path() / "metrics.csv");
  EXPECT_EQ(n, 2u);
}

TEST(EndToEnd, PluginsAndValidateCommands) {
  Cli c = run_cli("plugins --kind attention");
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_NE(c.out.find("attention/flash"), std::string::npos);
  EXPECT_NE(c.out.find("tile (int, default 64"), std::string::npos) << c.out;
  EXPECT_EQ(c.out.find("decoding/"), std::string::npos);
  c = run_cli("validate " + testing::source_dir() + "/experiments/quickstart.toml --set baseline.attention=flash");
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_NE(c.out.find("baseline: attention=flash"), std::string::npos) << c.out;
}

TEST(EndToEnd, GenerateStreamsTheGoldenStoryFromEveryFormat) {
  const std::string dir = testing::data_path("models/stories260K");
  INFERLAB_REQUIRE_FILE(dir + "/stories260K.bin");
  const std::string golden =
      "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. "
      "One day, she saw a big, red ball. She wanted to play with it, but it was too high.";
  for (const std::string& args : std::vector<std::string>{"--model " + dir + "/stories260K.bin", "--model " + dir + "/stories260K.gguf",
                                 "--model " + dir + "/stories260K.bin --attention naive --decoding prompt_lookup"}) {
    Cli c = run_cli("generate " + args + " --max-tokens 80 --log warn");
    ASSERT_EQ(c.code, 0) << args << ": " << c.err;
    EXPECT_EQ(c.out.rfind(golden, 0), 0u) << args << ": " << c.out;
  }
  Cli c = run_cli("generate --model " + dir + "/stories260K.bin --temperature 1 --seed 5 --max-tokens 30 --log warn");
  Cli again = run_cli("generate --model " + dir + "/stories260K.bin --temperature 1 --seed 5 --max-tokens 30 --log warn");
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_EQ(c.out, again.out);  // seeded
  EXPECT_NE(c.out.rfind(golden, 0), 0u);
}

TEST(EndToEnd, BenchComparesStacksInOneRun) {
  Cli c = run_cli("bench --preset stories260k --context 16 --batch 2 --repeats 2 --attention naive,flash --quantization none");
  ASSERT_EQ(c.code, 0) << c.err;
  EXPECT_NE(c.out.find("| naive + none |"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("| flash + none |"), std::string::npos) << c.out;
  EXPECT_NE(c.out.find("| 1.00 |"), std::string::npos) << c.out;  // the first stack is the reference
  c = run_cli("bench --preset stories260k --attention flsh");
  EXPECT_EQ(c.code, 1);
  EXPECT_NE(c.err.find("did you mean 'flash'"), std::string::npos) << c.err;
}

TEST(EndToEnd, ValidateReadsTheTrace) {
  fs::path dir = fresh_dir("validate_trace");
  std::ofstream(dir / "bad.csv") << "arrival_s,prompt_tokens,output_tokens\n0,10,5\n0.5,abc,5\n";
  std::ofstream(dir / "good.csv") << "arrival_s,prompt_tokens,output_tokens\n0,10,5\n";
  fs::path toml = dir / "trace.toml";
  std::ofstream(toml) << "[model]\npreset = \"stories260k\"\n[workload]\ntrace = \"bad.csv\"\n";
  Cli c = run_cli("validate " + toml.string());
  EXPECT_EQ(c.code, 1);
  EXPECT_NE(c.err.find((dir / "bad.csv").string() + ":3: prompt_tokens 'abc' is not an integer"), std::string::npos) << c.err;
  EXPECT_EQ(std::count(c.err.begin(), c.err.end(), '\n'), 1) << c.err;
  EXPECT_EQ(run_cli("validate " + toml.string() + " --set workload.trace=good.csv").code, 0);
}

// run checks the trace at plan time too: the located error, nothing written.
TEST(EndToEnd, RunRefusesAMalformedTraceBeforeWritingResults) {
  fs::path dir = fresh_dir("run_trace");
  std::ofstream(dir / "bad.csv") << "arrival_s,prompt_tokens,output_tokens\n0,10,5\n0.5,abc,5\n";
  fs::path toml = dir / "trace.toml";
  std::ofstream(toml) << "[experiment]\nname = \"badtrace\"\n[model]\npreset = \"stories260k\"\n[workload]\ntrace = \"bad.csv\"\n";
  Cli c = run_cli("run " + toml.string() + " --out " + (dir / "results").string());
  EXPECT_EQ(c.code, 1);
  EXPECT_NE(c.err.find((dir / "bad.csv").string() + ":3: prompt_tokens 'abc' is not an integer"), std::string::npos) << c.err;
  EXPECT_EQ(std::count(c.err.begin(), c.err.end(), '\n'), 1) << c.err;
  EXPECT_FALSE(fs::exists(dir / "results"));
}

// inferlab tokenize: ids, pieces and count as the library encodes them (BOS as the file says
// unless --no-bos), the round trip with --check, and one-line errors for bad options.
TEST(EndToEnd, TokenizePrintsIdsPiecesAndChecksTheRoundTrip) {
  const std::string model = testing::data_path("models/stories260K/stories260K.bin");
  INFERLAB_REQUIRE_FILE(model);
  const std::string text = "Once upon a time";
  const auto tok = load_model_tokenizer(model);
  std::string want;
  for (int id : tok->encode(text, false)) want += (want.empty() ? "" : " ") + std::to_string(id);

  Cli ids = run_cli("tokenize --model " + model + " --prompt '" + text + "' --ids --no-bos --check");
  EXPECT_EQ(ids.code, 0) << ids.err;
  EXPECT_EQ(ids.out, want + "\n");
  EXPECT_NE(ids.err.find("round trip ok"), std::string::npos) << ids.err;

  Cli full = run_cli("tokenize --model " + model + " --prompt '" + text + "'");
  EXPECT_EQ(full.code, 0) << full.err;
  EXPECT_EQ(full.out.rfind("1 -> ''\n", 0), 0u) << full.out;  // SentencePiece: BOS by default
  EXPECT_NE(full.out.find("tokens: " + std::to_string(tok->encode(text, true).size()) + "\n"), std::string::npos)
      << full.out;

  for (const std::string& bad : {std::string("tokenize --model ") + model,
                                 "tokenize --model " + model + " --prompt x --ids --pieces"}) {
    Cli c = run_cli(bad);
    EXPECT_EQ(c.code, 1) << bad;
    EXPECT_EQ(std::count(c.err.begin(), c.err.end(), '\n'), 1) << c.err;
  }
}

TEST(EndToEnd, GenerateAndPerplexityRefuseOutOfRangeOptions) {
  const std::string model = testing::data_path("models/stories260K/stories260K.bin");
  INFERLAB_REQUIRE_FILE(model);
  fs::path dir = fresh_dir("ppl_opts");
  std::ofstream(dir / "t.txt") << "Once upon a time there was a little girl.";
  std::ofstream(dir / "empty.txt") << "";
  const std::string ppl = "perplexity --model " + model + " --text " + (dir / "t.txt").string();
  struct Case {
    std::string args, expect;
  };
  const std::vector<Case> cases = {
      {ppl + " --context 1", "--context = 1 is out of range; allowed: 0 (the model's context) or 2 .."},
      {ppl + " --context -5", "--context = -5 is out of range"},
      {ppl + " --stride -1", "--stride = -1 is out of range; allowed: 0 (= context)"},
      {ppl + " --max-tokens -1", "--max-tokens = -1 is out of range"},
      {ppl + " --threads -1", "--threads = -1 is out of range; allowed: 0 (all cores) .. 4096"},
      {"perplexity --model " + model + " --text " + (dir / "empty.txt").string(),
       (dir / "empty.txt").string() + ": 1 token(s) to evaluate, BOS included if any; allowed: a non-empty text"},
      {"generate --model " + model + " --max-tokens 2 --threads 100000", "--threads = 100000 is out of range"},
  };
  for (const auto& k : cases) {
    Cli c = run_cli(k.args);
    EXPECT_EQ(c.code, 1) << k.args;
    EXPECT_NE(c.err.find(k.expect), std::string::npos) << k.args << "\n" << c.err;
    EXPECT_EQ(std::count(c.err.begin(), c.err.end(), '\n'), 1) << c.err;
  }
  Cli ok = run_cli(ppl + " --context 8 --stride 4 --threads 1");
  EXPECT_EQ(ok.code, 0) << ok.err;
  EXPECT_NE(ok.out.find("perplexity: "), std::string::npos) << ok.out;
}

TEST(EndToEnd, BenchRefusesOutOfRangeOptions) {
  Cli c = run_cli("bench --preset stories260k --context 4 --repeats 1 --n-layers -1");
  EXPECT_EQ(c.code, 1);
  EXPECT_NE(c.err.find("--n-layers = -1 is out of range; allowed: 0 (all) .. 1024"), std::string::npos) << c.err;
  c = run_cli("bench --preset stories260k --context 4 --repeats 1 --threads -1");
  EXPECT_EQ(c.code, 1);
  EXPECT_NE(c.err.find("--threads = -1 is out of range; allowed: 0 (all cores) .. 4096"), std::string::npos) << c.err;
  const std::string model = testing::data_path("models/stories260K/stories260K.bin");
  if (std::filesystem::exists(model)) {  // a checkpoint cannot grow layers, as in an experiment
    c = run_cli("bench --model " + model + " --context 4 --repeats 1 --n-layers 9");
    EXPECT_EQ(c.code, 1);
    EXPECT_NE(c.err.find("has 5 layers; allowed: 1..5"), std::string::npos) << c.err;
  }
}

TEST(EndToEnd, CheckpointCannotGrowLayers) {
  const std::string model = testing::data_path("models/stories260K/stories260K.bin");
  INFERLAB_REQUIRE_FILE(model);
  fs::path out = fresh_dir("layers");
  fs::path toml = out / "layers.toml";
  std::ofstream(toml) << "[model]\npath = \"" << model << "\"\nn_layers = 100\n";
  Cli c = run_cli("validate " + toml.string());
  EXPECT_EQ(c.code, 1);
  EXPECT_NE(c.err.find("n_layers = 100, but " + model + " has 5 layers; allowed: 1..5"), std::string::npos) << c.err;
  EXPECT_EQ(std::count(c.err.begin(), c.err.end(), '\n'), 1) << c.err;
  EXPECT_EQ(run_cli("validate " + toml.string() + " --set model.n_layers=2").code, 0);
}

// validate reads only a checkpoint's header: a llama2.c file cut after its header validates,
// and run, which loads the weights, refuses it with nothing written.
TEST(EndToEnd, ValidateReadsOnlyTheCheckpointHeader) {
  const std::string model = testing::data_path("models/stories260K/stories260K.bin");
  INFERLAB_REQUIRE_FILE(model);
  fs::path dir = fresh_dir("header_only");
  const fs::path cut = dir / "cut.bin";
  fs::copy_file(model, cut);
  fs::resize_file(cut, 28 + 4096);
  fs::path toml = dir / "cut.toml";
  std::ofstream(toml) << "[experiment]\nname = \"cut\"\n[model]\npath = \"cut.bin\"\n"
                      << "[workload]\nnum_requests = 2\nprompt_len = 4\noutput_len = 2\n";
  Cli c = run_cli("validate " + toml.string());
  EXPECT_EQ(c.code, 0) << c.err;
  EXPECT_NE(c.out.find("ok — 1 stack(s)"), std::string::npos) << c.out;
  c = run_cli("run " + toml.string() + " --out " + (dir / "results").string());
  EXPECT_EQ(c.code, 1);
  EXPECT_NE(c.err.find(cut.string() + ": 4124 bytes, but the header"), std::string::npos) << c.err;
  EXPECT_NE(c.err.find("(truncated file?)"), std::string::npos) << c.err;
  EXPECT_FALSE(fs::exists(dir / "results"));
}

}  // namespace
}  // namespace inferlab::testing
