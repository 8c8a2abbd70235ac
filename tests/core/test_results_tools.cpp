// Results tools through the CLI as a user runs them: `run --shard i/n` + `merge` give the local
// run's folder (same cells, requests and greedy token hashes) and refuse shards of different
// runs or missing cells; `compare` flags a changed metric and nothing on a run against itself;
// `plot` writes PNG figures. Experiments are tiny (stories260k, 3 requests, 2 variants × 2 repeats).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <boost/property_tree/json_parser.hpp>
#include <boost/property_tree/ptree.hpp>
#include <gtest/gtest.h>
#include "inferlab/experiment/tomlpp.h"

#include "inferlab/results/compare.h"
#include "inferlab/error.h"
#include "inferlab/run/shard.h"
#include "cli_runs.h"
#include "test_support.h"

namespace inferlab::testing {
namespace {

namespace fs = std::filesystem;

namespace pt = boost::property_tree;

fs::path fresh_dir(const std::string& name) { return testing::fresh_dir("res", name); }

// Two variants (baseline, smaller KV blocks) × 2 repeats, greedy decoding.
fs::path write_tiny(const fs::path& out) {
  const fs::path cfg = out / "tiny.toml";
  std::ofstream(cfg) << "[experiment]\nname = \"tiny\"\nrepeats = 2\n[model]\npreset = \"stories260k\"\n"
                     << "[device]\nthreads = 1\n[workload]\nnum_requests = 3\nprompt_len = 6\noutput_len = 8\n"
                     << "[[variant]]\nname = \"blocks8\"\nkv = { block_size = 8 }\n";
  return cfg;
}

TEST(ResultsTools, ShardsCoverEveryCellExactlyOnce) {
  for (int n = 1; n <= 5; ++n) {
    std::map<std::pair<std::size_t, int>, int> owners;
    for (int i = 0; i < n; ++i)
      for (int rep = 0; rep < 3; ++rep)
        for (std::size_t vi = 0; vi < 4; ++vi) owners[{vi, rep}] += Shard{i, n}.owns(vi, rep, 4);
    for (const auto& [cell, k] : owners) EXPECT_EQ(k, 1) << n << " shards, cell v" << cell.first << " r" << cell.second;
  }
  EXPECT_EQ(parse_shard("1/3").index, 1);
  EXPECT_EQ(parse_shard("1/3").count, 3);
  for (const char* bad : {"3/3", "-1/2", "1", "a/b", "1/0", "1/2x"}) EXPECT_THROW(parse_shard(bad), Error) << bad;
}

TEST(ResultsTools, WelchTestOnKnownValues) {
  // t = 1 / sqrt(2 * (5/3) / 4) = 1.0954, df = 6: two-sided p = 0.3153 (R: t.test(a, b)).
  EXPECT_NEAR(welch_p_value({1, 2, 3, 4}, {2, 3, 4, 5}), 0.3153, 5e-4);
  EXPECT_TRUE(std::isnan(welch_p_value({1}, {1, 2})));
  EXPECT_EQ(welch_p_value({2, 2}, {2, 2}), 1.0);
  EXPECT_EQ(welch_p_value({2, 2}, {4, 4}), 0.0);
}

// Local run, three shards merged, then merge's refusals, then compare and plot on the results.
TEST(ResultsTools, ShardedRunMergesIntoTheLocalRun) {
  const fs::path out = fresh_dir("shards");
  const fs::path cfg = write_tiny(out);
  const Cli local = run_cli("run " + cfg.string() + " --out " + (out / "local").string() + " --log warn");
  ASSERT_EQ(local.code, 0) << local.err;
  const fs::path ldir = only_run_dir(out / "local", "tiny");

  std::vector<fs::path> shard_dirs;
  for (int i = 0; i < 3; ++i) {
    const Cli s = run_cli("run " + cfg.string() + " --out " + (out / "shards").string() + " --shard " + std::to_string(i) +
                          "/3 --log warn");
    ASSERT_EQ(s.code, 0) << s.err;
    shard_dirs.push_back(only_run_dir(out / "shards", "tiny", "-shard" + std::to_string(i) + "of3"));
  }
  // Shard 0 holds cells k = 0 and 3 (baseline r0, blocks8 r1); its manifest says which shard it is.
  EXPECT_EQ(cells(shard_dirs[0]).size(), 2u);
  EXPECT_EQ(cells(shard_dirs[1]).size(), 1u);
  pt::ptree sm;
  pt::read_json((shard_dirs[1] / "manifest.json").string(), sm);
  EXPECT_EQ(sm.get<int>("run.shard.index"), 1);
  EXPECT_EQ(sm.get<int>("run.shard.count"), 3);
  EXPECT_EQ(sm.get<std::string>("run.status"), "complete");
  // A shard resumes as a shard: only its own missing cell runs.
  fs::remove(shard_dirs[0] / "cells" / cell_file_name(1, 1));
  const Cli resumed = run_cli("run --resume " + shard_dirs[0].string() + " --log info");
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("run blocks8 repeat 1"), std::string::npos) << resumed.err;
  EXPECT_EQ(resumed.err.find("run baseline"), std::string::npos) << resumed.err;
  EXPECT_EQ(resumed.err.find("run blocks8 repeat 0"), std::string::npos) << resumed.err;

  std::string dirs;
  for (const auto& d : shard_dirs) dirs += " " + d.string();
  const fs::path merged = out / "merged";
  const Cli m = run_cli("merge" + dirs + " --out " + merged.string() + " --log warn");
  ASSERT_EQ(m.code, 0) << m.err;
  EXPECT_EQ(cells(merged), cells(ldir));
  EXPECT_EQ(cells(merged).size(), 4u);
  EXPECT_EQ(request_keys(merged), request_keys(ldir));
  EXPECT_EQ(request_keys(merged).size(), 12u);
  // steps.csv: every cell's kept steps, merged row for row from the shards' cells.
  std::multiset<std::vector<std::string>> shard_steps;
  for (const auto& d : shard_dirs) {
    const auto csv = read_csv(d / "steps.csv");
    ASSERT_GT(csv.size(), 1u) << d;
    EXPECT_EQ(csv[0], read_csv(merged / "steps.csv")[0]);
    shard_steps.insert(csv.begin() + 1, csv.end());
  }
  const auto merged_steps = read_csv(merged / "steps.csv");
  EXPECT_EQ(std::multiset<std::vector<std::string>>(merged_steps.begin() + 1, merged_steps.end()), shard_steps);
  EXPECT_EQ(slurp(merged / "config.toml"), slurp(ldir / "config.toml"));
  EXPECT_EQ(read_csv(merged / "metrics.csv")[0], read_csv(ldir / "metrics.csv")[0]);
  for (int rep = 0; rep < 2; ++rep)
    for (int vi = 0; vi < 2; ++vi) EXPECT_TRUE(fs::exists(merged / "cells" / cell_file_name(vi, rep)));
  EXPECT_NO_THROW((void)toml::parse_file((merged / "config.toml").string()));
  pt::ptree mm;
  pt::read_json((merged / "manifest.json").string(), mm);
  EXPECT_EQ(mm.get<std::string>("run.status"), "complete");
  EXPECT_EQ(mm.get<int>("run.cells_done"), 4);
  EXPECT_EQ(mm.get_child("run.merged_from").size(), 3u);
  EXPECT_FALSE(mm.get_child_optional("run.shard"));
  const std::string md = slurp(merged / "summary.md");
  EXPECT_NE(md.find("(×"), std::string::npos) << md;  // ratios to the baseline are back
  EXPECT_NE(md.find("merged from 3 of 3 shard(s)"), std::string::npos) << md;

  // Missing cells: refused, unless --allow-partial.
  const Cli partial = run_cli("merge " + shard_dirs[0].string() + " " + shard_dirs[1].string() + " --out " +
                              (out / "partial").string());
  EXPECT_EQ(partial.code, 1);
  EXPECT_NE(partial.err.find("1 cell(s) missing (baseline repeat 1)"), std::string::npos) << partial.err;
  EXPECT_NE(partial.err.find("--allow-partial"), std::string::npos) << partial.err;
  const Cli allowed = run_cli("merge " + shard_dirs[0].string() + " " + shard_dirs[1].string() + " --out " +
                              (out / "partial").string() + " --allow-partial --log warn");
  ASSERT_EQ(allowed.code, 0) << allowed.err;
  pt::read_json((out / "partial" / "manifest.json").string(), mm);
  EXPECT_EQ(mm.get<std::string>("run.status"), "partial");
  EXPECT_EQ(mm.get_child("run.missing").size(), 1u);
  EXPECT_NE(slurp(out / "partial" / "summary.md").find("Partial merge: 3 of 4 cells"), std::string::npos);

  // Shards of a different config, or a different shard count: refused with the reason.
  const Cli other = run_cli("run " + cfg.string() + " --out " + (out / "other").string() +
                            " --shard 2/3 --set workload.num_requests=2 --log warn");
  ASSERT_EQ(other.code, 0) << other.err;
  const Cli mixed = run_cli("merge " + shard_dirs[0].string() + " " + shard_dirs[1].string() + " " +
                            only_run_dir(out / "other", "tiny").string() + " --out " + (out / "mixed").string());
  EXPECT_EQ(mixed.code, 1);
  EXPECT_NE(mixed.err.find("differ in resolved config.toml"), std::string::npos) << mixed.err;
  const Cli two = run_cli("run " + cfg.string() + " --out " + (out / "two").string() + " --shard 1/2 --log warn");
  ASSERT_EQ(two.code, 0) << two.err;
  const Cli counts = run_cli("merge " + shard_dirs[0].string() + " " + only_run_dir(out / "two", "tiny").string() + " --out " +
                             (out / "counts").string());
  EXPECT_EQ(counts.code, 1);
  EXPECT_NE(counts.err.find("differ in shard count"), std::string::npos) << counts.err;
  const Cli twice = run_cli("merge " + shard_dirs[0].string() + " " + shard_dirs[0].string() + " --out " +
                            (out / "twice").string());
  EXPECT_EQ(twice.code, 1);
  EXPECT_NE(twice.err.find("are both shard 0/3"), std::string::npos) << twice.err;
}

TEST(ResultsTools, CompareFlagsAScaledMetricAndNothingAgainstItself) {
  const fs::path out = fresh_dir("compare");
  const Cli local = run_cli("run " + write_tiny(out).string() + " --out " + (out / "runs").string() + " --log warn");
  ASSERT_EQ(local.code, 0) << local.err;
  const fs::path a = only_run_dir(out / "runs", "tiny");

  const Cli self = run_cli("compare " + a.string() + " " + a.string());
  ASSERT_EQ(self.code, 0) << self.err;
  EXPECT_NE(self.out.find("| 1.000 |"), std::string::npos) << self.out;
  EXPECT_EQ(self.out.find("| **changed** |"), std::string::npos) << self.out;
  EXPECT_NE(self.out.find("0 change(s) flagged"), std::string::npos) << self.out;

  // B: a copy with kv_blocks_peak doubled (deterministic under greedy decoding: equal over repeats).
  const fs::path b = out / "scaled";
  fs::copy(a, b, fs::copy_options::recursive);
  auto csv = read_csv(a / "metrics.csv");
  const auto col = std::find(csv[0].begin(), csv[0].end(), "kv_blocks_peak") - csv[0].begin();
  ASSERT_LT(static_cast<std::size_t>(col), csv[0].size());
  {
    std::ofstream f(b / "metrics.csv");
    for (std::size_t r = 0; r < csv.size(); ++r) {
      for (std::size_t c = 0; c < csv[r].size(); ++c) {
        std::string v = csv[r][c];
        if (r > 0 && static_cast<long>(c) == col) v = std::to_string(2 * std::stod(v));
        if (v.find(',') != std::string::npos) v = "\"" + v + "\"";
        f << (c ? "," : "") << v;
      }
      f << "\n";
    }
  }
  const Cli changed = run_cli("compare " + a.string() + " " + b.string() + " --metric kv_blocks_peak --metric ttft_ms_p50");
  ASSERT_EQ(changed.code, 0) << changed.err;
  EXPECT_NE(changed.out.find("| baseline | kv_blocks_peak |"), std::string::npos) << changed.out;
  EXPECT_NE(changed.out.find("| 2.000 | 0 | **changed** |"), std::string::npos) << changed.out;
  EXPECT_NE(changed.out.find("2 change(s) flagged of 4"), std::string::npos) << changed.out;  // both variants
  const Cli bad = run_cli("compare " + a.string() + " " + b.string() + " --metric no_such_metric");
  EXPECT_EQ(bad.code, 1);
  EXPECT_NE(bad.err.find("no_such_metric"), std::string::npos) << bad.err;
}

// Width and height from a PNG's IHDR chunk (bytes 16..23, big-endian); {0, 0} if not a PNG.
std::pair<std::uint32_t, std::uint32_t> png_size(const fs::path& p) {
  const std::string b = slurp(p);
  if (b.size() < 24 || b.compare(0, 8, "\x89PNG\r\n\x1a\n") != 0 || b.compare(12, 4, "IHDR") != 0) return {0, 0};
  auto be32 = [&](std::size_t at) {
    std::uint32_t v = 0;
    for (std::size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(b[at + i]);
    return v;
  };
  return {be32(16), be32(20)};
}

TEST(ResultsTools, PlotWritesFiguresAndLinksThem) {
  if (std::system("/usr/bin/python3 -c 'import matplotlib' >/dev/null 2>&1") != 0 &&
      std::system("python3 -c 'import matplotlib' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "python3 with matplotlib is missing (apt-get install python3-matplotlib; scripts/setup.sh --test)";
  const fs::path out = fresh_dir("plot");
  const Cli local = run_cli("run " + write_tiny(out).string() + " --out " + (out / "runs").string() + " --log warn");
  ASSERT_EQ(local.code, 0) << local.err;
  const fs::path dir = only_run_dir(out / "runs", "tiny");
  const Cli plot = run_cli("plot " + dir.string());
  ASSERT_EQ(plot.code, 0) << plot.err;
  for (const char* f : {"latency_cdf.png", "headline.png"}) {
    ASSERT_TRUE(fs::exists(dir / "figures" / f)) << f;
    EXPECT_GT(fs::file_size(dir / "figures" / f), 10000u) << f;
  }
  EXPECT_EQ(png_size(dir / "figures" / "latency_cdf.png"), std::make_pair(1500u, 450u));  // 15 x 4.5 in at 100 dpi
  const std::string md = slurp(dir / "summary.md");
  EXPECT_NE(md.find("## Figures"), std::string::npos) << md;
  EXPECT_NE(md.find("(figures/latency_cdf.png)"), std::string::npos) << md;
  // Plotting again replaces the section rather than adding a second one.
  ASSERT_EQ(run_cli("plot " + dir.string()).code, 0);
  const std::string again = slurp(dir / "summary.md");
  EXPECT_EQ(again.find("## Figures"), again.rfind("## Figures"));
}

}  // namespace
}  // namespace inferlab::testing
