// Predicted beside measured (issue 43): a real CPU run with a cached calibration of this machine
// gets pred_* columns computed by the calibrated simulator (equal to a simulated run of the same
// experiment with the same file, and proportional to the calibration's coefficients); without
// one, no columns and one notice; --no-predict removes them; the calibration cache itself.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>

#include <gtest/gtest.h>

#include "inferlab/error.h"
#include "inferlab/results/manifest.h"
#include "inferlab/model/model_config.h"
#include "inferlab/results/prediction.h"
#include "test_support.h"

namespace inferlab {
namespace {

namespace fs = std::filesystem;

struct TempDir {
  fs::path path;
  explicit TempDir(const std::string& name)
      : path(fs::temp_directory_path() / ("inferlab_predict_" + name + "_" + std::to_string(getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

// A small real run: stories260k shape, one thread, a burst (every arrival at 0, so every time
// of a replay scales with the cost model's coefficients).
void write_experiment(const fs::path& p) {
  std::ofstream(p) << "[experiment]\nname = \"predict\"\nseed = 5\nrepeats = 2\nisolate = false\n"
                      "[model]\npreset = \"stories260k\"\n[device]\nkind = \"cpu\"\nthreads = 1\n"
                      "[workload]\nnum_requests = 12\narrival = \"all_at_once\"\n"
                      "prompt_len = { dist = \"uniform\", min = 8, max = 40 }\n"
                      "output_len = { dist = \"uniform\", min = 4, max = 16 }\n"
                      "[baseline]\nattention = \"naive\"\nquantization = \"none\"\n"
                      "scheduler = { name = \"continuous\", max_batch = 8, max_tokens = 64 }\ndecoding = \"sampling\"\n"
                      "[[variant]]\nname = \"static\"\nscheduler = { name = \"static\", max_batch = 4 }\n"
                      "[[variant]]\nname = \"flash\"\nattention = \"flash\"\n";
}

// A made-up fit of naive + none for stories260k on this machine (one thread, wall clock): a
// fixed cost per step, per row and per logit row, every coefficient times `scale`.
CalibratedCostModel made_up_fit(double scale, const std::string& machine = cpu_model()) {
  const ModelConfig c = preset_config("stories260k");
  CalibratedCostModel m;
  m.model = c.name;
  m.dim = c.dim, m.hidden_dim = c.hidden_dim, m.n_layers = c.n_layers, m.n_heads = c.n_heads;
  m.n_kv_heads = c.n_kv_heads, m.vocab_size = c.vocab_size, m.threads = 1, m.machine = machine, m.clock = "wall";
  CalibratedStack s;
  s.attention = "naive", s.quantization = "none";
  s.kv_bytes_per_token = 2.0 * c.n_layers * c.kv_dim() * 4, s.weight_bytes = 1e6, s.points = 1;
  s.coef[static_cast<std::size_t>(TimeCategory::kFramework)] = {2e-3 * scale, 1e-5 * scale, 0, 0, 0};
  s.coef[static_cast<std::size_t>(TimeCategory::kLinear)] = {0, 0, 0, 1e-4 * scale, 0};
  m.stacks.push_back(s);
  return m;
}

fs::path only_run(const fs::path& root) {
  for (const auto& e : fs::directory_iterator(root / "predict")) return e.path();
  return {};
}

// variant -> column -> values over the rows of metrics.csv (empty cells left out).
std::map<std::string, std::map<std::string, std::vector<double>>> table(const fs::path& run) {
  const auto rows = testing::read_csv(run / "metrics.csv");
  std::map<std::string, std::map<std::string, std::vector<double>>> out;
  for (std::size_t r = 1; r < rows.size(); ++r)
    for (std::size_t c = 5; c + 1 < rows[0].size() && c < rows[r].size(); ++c)
      if (!rows[r][c].empty()) out[rows[r][0]][rows[0][c]].push_back(std::stod(rows[r][c]));
  return out;
}

bool has_pred_column(const fs::path& run) {
  const auto head = testing::read_csv(run / "metrics.csv").at(0);
  return std::any_of(head.begin(), head.end(), [](const std::string& c) { return c.rfind("pred_", 0) == 0; });
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

TEST(Prediction, ColumnsComeFromTheCalibratedSimulatorAndScaleWithTheCalibration) {
  TempDir dir("sim");
  const fs::path exp = dir.path / "exp.toml";
  write_experiment(exp);
  const fs::path cache1 = dir.path / "cache1", cache2 = dir.path / "cache2";
  const std::string file = store_calibration(cache1.string(), made_up_fit(1.0));
  store_calibration(cache2.string(), made_up_fit(2.0));

  auto real = testing::run_inferlab("run " + exp.string() + " --no-report --calibration-cache " + cache1.string() +
                                    " --out " + (dir.path / "r1").string());
  ASSERT_EQ(real.code, 0) << real.err;
  EXPECT_NE(real.err.find("variant 'flash' gets no pred_* columns"), std::string::npos) << real.err;
  EXPECT_NE(real.err.find("no fit for attention 'flash'"), std::string::npos) << real.err;
  const auto m = table(only_run(dir.path / "r1"));

  // The same file as a simulated run's profile: a real run's predictions are that run's metrics.
  auto sim = testing::run_inferlab("run " + exp.string() + " --no-report --set device.kind=sim --set variant.1.attention=naive"
                                   " --set device.profile=calibrated:" + file + " --out " + (dir.path / "s").string());
  ASSERT_EQ(sim.code, 0) << sim.err;
  const auto s = table(only_run(dir.path / "s"));
  for (const char* v : {"baseline", "static"})
    for (const char* metric : kPredictedMetrics) {
      const auto& pred = m.at(v).at(predicted_name(metric));
      ASSERT_EQ(pred.size(), 2u) << v << " " << metric;  // every repeat
      const double want = s.at(v).at(metric).at(0);
      EXPECT_NEAR(pred[0], want, 1e-6 * want) << v << " " << metric;
      // The error column is the prediction against this row's measurement. All three cells are
      // written to 8 significant digits, so the tolerance is relative to the error's size.
      const double error = pred[0] / m.at(v).at(metric)[0] - 1;
      EXPECT_NEAR(m.at(v).at(prediction_error_name(metric))[0], error, 1e-6 * (1 + std::abs(error))) << metric;
    }
  // The step cost is 2 ms + 10 us a row + 0.1 ms a logit row: a decode step of b sequences
  // costs 2.1 ms + 0.11 ms b, so TPOT lies between one alone and a full batch of 8.
  const double tpot = m.at("static").at(predicted_name("tpot_ms_p50"))[0];
  EXPECT_GE(tpot, 2.21 - 1e-9);
  EXPECT_LE(tpot, 2.1 + 0.11 * 8 + 1e-9);
  EXPECT_FALSE(m.at("flash").count(predicted_name("tpot_ms_p50")));

  // Every coefficient doubled: every time doubles, throughput halves (all arrivals at 0).
  auto twice = testing::run_inferlab("run " + exp.string() + " --no-report --log warn --calibration-cache " +
                                     cache2.string() + " --out " + (dir.path / "r2").string());
  ASSERT_EQ(twice.code, 0) << twice.err;
  const auto m2 = table(only_run(dir.path / "r2"));
  for (const char* v : {"baseline", "static"})
    for (const char* metric : kPredictedMetrics) {
      const double a = m.at(v).at(predicted_name(metric))[0], b = m2.at(v).at(predicted_name(metric))[0];
      const double ratio = std::string(metric) == "throughput_out_tok_s" ? 0.5 : 2.0;
      EXPECT_NEAR(b, a * ratio, 1e-6 * a) << v << " " << metric;
    }

  // summary.md and report.html show them per variant; a made-up 2 ms step is far from this
  // CPU's real steps, so TPOT p50 is flagged.
  const fs::path run = only_run(dir.path / "r1");
  const std::string summary = testing::slurp(run / "summary.md");
  EXPECT_NE(summary.find("## Predicted vs measured"), std::string::npos) << summary;
  EXPECT_NE(summary.find("| static |"), std::string::npos);
  EXPECT_NE(summary.find("off: TPOT p50"), std::string::npos) << summary;
  auto report = testing::run_inferlab("report " + run.string() + " --no-plot");
  ASSERT_EQ(report.code, 0) << report.err;
  const std::string html = testing::slurp(run / "report.html");
  EXPECT_NE(html.find("<table class=\"prediction sortable\">"), std::string::npos);
  EXPECT_NE(html.find("<tr class=\"pred-off\">"), std::string::npos);
}

TEST(Prediction, WithoutACalibrationNoColumnsAndOneNoticeAndNoPredictRemovesThem) {
  TempDir dir("none");
  const fs::path exp = dir.path / "exp.toml";
  write_experiment(exp);
  const fs::path empty = dir.path / "empty", cache = dir.path / "cache";
  auto none = testing::run_inferlab("run " + exp.string() + " --no-report --calibration-cache " + empty.string() +
                                    " --out " + (dir.path / "a").string());
  ASSERT_EQ(none.code, 0) << none.err;
  EXPECT_EQ(count(none.err, "prediction:"), 1u) << none.err;
  EXPECT_NE(none.err.find("no calibration of " + cpu_model() + ", 1 thread(s), wall clock"), std::string::npos) << none.err;
  EXPECT_NE(none.err.find("inferlab calibrate " + exp.string()), std::string::npos) << none.err;
  EXPECT_FALSE(has_pred_column(only_run(dir.path / "a")));
  EXPECT_EQ(testing::slurp(only_run(dir.path / "a") / "summary.md").find("Predicted vs measured"), std::string::npos);
  EXPECT_FALSE(fs::exists(empty));  // a lookup makes nothing

  // A fit of another machine, or of another thread count, is no calibration of this run.
  store_calibration(cache.string(), made_up_fit(1.0, "some other cpu"));
  CalibratedCostModel two = made_up_fit(1.0);
  two.threads = 2;
  store_calibration(cache.string(), two);
  auto other = testing::run_inferlab("run " + exp.string() + " --no-report --calibration-cache " + cache.string() +
                                     " --out " + (dir.path / "b").string());
  ASSERT_EQ(other.code, 0) << other.err;
  EXPECT_FALSE(has_pred_column(only_run(dir.path / "b")));

  store_calibration(cache.string(), made_up_fit(1.0));
  auto off = testing::run_inferlab("run " + exp.string() + " --no-report --no-predict --calibration-cache " +
                                   cache.string() + " --out " + (dir.path / "c").string());
  ASSERT_EQ(off.code, 0) << off.err;
  EXPECT_FALSE(has_pred_column(only_run(dir.path / "c")));
  EXPECT_EQ(off.err.find("prediction:"), std::string::npos) << off.err;
  auto on = testing::run_inferlab("run " + exp.string() + " --no-report --calibration-cache " + cache.string() +
                                  " --out " + (dir.path / "d").string());
  ASSERT_EQ(on.code, 0) << on.err;
  EXPECT_TRUE(has_pred_column(only_run(dir.path / "d")));

  auto bad = testing::run_inferlab("run " + exp.string() + " --calibration-cache '' --out " + (dir.path / "e").string());
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.err.find("--calibration-cache is empty"), std::string::npos) << bad.err;
}

TEST(Prediction, CalibrateCachesItsFitWhereRunFindsIt) {
  TempDir dir("calibrate");
  const fs::path exp = dir.path / "exp.toml";
  write_experiment(exp);
  const fs::path cache = dir.path / "cache";
  auto cal = testing::run_inferlab("calibrate " + exp.string() + " --log warn --prefill 8,32 --batch 1,4 --context 16,32"
                                   " --repeats 1 --out " + (dir.path / "cm.toml").string() +
                                   " --calibration-cache " + cache.string());
  ASSERT_EQ(cal.code, 0) << cal.err;
  const std::string file =
      calibration_cache_file(cache.string(), cpu_model(), 1, "wall", preset_config("stories260k"));
  EXPECT_NE(cal.out.find("cached " + file), std::string::npos) << cal.out;
  auto run = testing::run_inferlab("run " + exp.string() + " --no-report --log warn --calibration-cache " +
                                   cache.string() + " --out " + (dir.path / "r").string());
  ASSERT_EQ(run.code, 0) << run.err;
  const auto m = table(only_run(dir.path / "r"));
  for (const char* v : {"baseline", "static", "flash"})  // calibrate fitted both stacks
    EXPECT_GT(m.at(v).at(predicted_name("tpot_ms_p50")).at(0), 0.0) << v;
}

TEST(Prediction, CacheKeepsOneFilePerKeyAndMergesStacks) {
  TempDir dir("cache");
  const ModelConfig shape = preset_config("stories260k");
  CalibratedCostModel a = made_up_fit(1.0);
  const std::string file = store_calibration(dir.path.string(), a);
  EXPECT_EQ(file, calibration_cache_file(dir.path.string(), cpu_model(), 1, "wall", shape));
  CalibratedCostModel b = made_up_fit(3.0);
  b.stacks[0].attention = "flash";
  EXPECT_EQ(store_calibration(dir.path.string(), b), file);
  a.stacks[0].block_copy_s = 7e-6;  // the naive stack again: replaced, flash kept
  store_calibration(dir.path.string(), a);
  const auto found = find_calibration(dir.path.string(), cpu_model(), 1, "wall", shape);
  ASSERT_TRUE(found.has_value());
  ASSERT_EQ(found->stacks.size(), 2u);
  EXPECT_EQ(found->stack("naive", "none").block_copy_s, 7e-6);
  EXPECT_EQ(found->stack("flash", "none").coef[static_cast<std::size_t>(TimeCategory::kFramework)][0], 6e-3);
  EXPECT_FALSE(find_calibration(dir.path.string(), cpu_model(), 1, "thread-cpu", shape).has_value());
  EXPECT_FALSE(find_calibration(dir.path.string(), cpu_model(), 1, "wall", preset_config("stories15m")).has_value());
  // Other machines, threads and clocks are other files.
  EXPECT_NE(calibration_cache_file("d", "cpu a", 1, "wall", shape), calibration_cache_file("d", "cpu b", 1, "wall", shape));
  EXPECT_NE(calibration_cache_file("d", "cpu a", 1, "wall", shape), calibration_cache_file("d", "cpu a", 2, "wall", shape));
  // A malformed cached file is an error with its line (the run turns it into a warning).
  std::ofstream(file) << "[calibrated]\nmodel = 3\n";
  EXPECT_THROW(find_calibration(dir.path.string(), cpu_model(), 1, "wall", shape), Error);
}

}  // namespace
}  // namespace inferlab
