// Reliability of runs, through the CLI as a user runs it: a plugin that segfaults, aborts or
// hangs fails only its own cells; SIGINT leaves a marked, parseable, resumable folder; resume
// gives the uninterrupted run's cells and tokens; --check-determinism holds across thread
// counts and catches an unseeded plugin. Every experiment here is tiny (stories260k, a few
// requests): the slow part is the one deliberate cell time limit.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <thread>

#include <boost/property_tree/json_parser.hpp>
#include <boost/property_tree/ptree.hpp>
#include <gtest/gtest.h>
#include "inferlab/experiment/tomlpp.h"

#include "inferlab/run/cell.h"
#include "cli_runs.h"
#include "sanitizers.h"
#include "test_support.h"

namespace inferlab::testing {
namespace {

namespace fs = std::filesystem;

namespace pt = boost::property_tree;

fs::path fresh_dir(const std::string& name) { return testing::fresh_dir("rel", name); }

std::string tiny(const std::string& name, int repeats, const std::string& plugin_dirs) {
  std::ostringstream t;
  t << "[experiment]\nname = \"" << name << "\"\nrepeats = " << repeats << "\n[model]\npreset = \"stories260k\"\n"
    << "[device]\nthreads = 1\n[workload]\nnum_requests = 3\nprompt_len = 6\noutput_len = 8\n[plugins]\npaths = ["
    << plugin_dirs << "]\n";
  return t.str();
}

std::string test_plugins(std::initializer_list<const char*> names) {
  std::string s;
  for (const char* n : names) s += (s.empty() ? "\"" : ", \"") + testing::binary_dir() + "/test_plugins/" + n + "\"";
  return s;
}

// Every result file of a folder parses: TOML, JSON, CSV with one width.
void expect_files_parse(const fs::path& dir) {
  EXPECT_NO_THROW((void)toml::parse_file((dir / "config.toml").string()));
  for (const char* f : {"manifest.json", "metrics.json"}) {
    pt::ptree tree;
    EXPECT_NO_THROW(pt::read_json((dir / f).string(), tree)) << f;
  }
  for (const char* f : {"metrics.csv", "requests.csv"}) {
    auto csv = read_csv(dir / f);
    ASSERT_FALSE(csv.empty()) << f;
    for (const auto& row : csv) EXPECT_EQ(row.size(), csv[0].size()) << f;
  }
  EXPECT_TRUE(fs::exists(dir / "summary.md"));
}

TEST(Reliability, CellFileRoundTripsAndRefusesATruncatedOne) {
  CellResult c;
  c.row.variant = "a,b\nc\\d";
  c.row.repeat = 2;
  c.row.wall_s = 0.1;
  c.row.tokens_hash = 0xdeadbeefcafef00dull;
  c.row.metrics = {{"ttft_ms_p50", 1.0 / 3.0}, {"kl_vs_baseline", std::nan("")}};
  RequestTimeline r;
  r.id = 7;
  r.arrival_s = 0.25;
  r.first_token_s = 1e-7;
  r.finish_s = 3;
  r.prompt_tokens = 5;
  r.output_tokens = 9;
  r.output_hash = tokens_hash(std::vector<int>{1, 2, 3});
  c.requests = {r};
  StepTimeline st;
  st.start_s = 0.5;
  st.duration_s = 1.0 / 7.0;
  st.seqs = 3;
  st.kv_blocks_free = 11;
  st.kv_blocks_cached = 4;
  st.preemptions = 2;
  st.time_s[1] = 1e-5;
  c.steps = {st, st};
  const std::string text = serialize_cell(c);
  auto back = parse_cell(text);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->row.variant, c.row.variant);
  EXPECT_EQ(back->row.repeat, 2);
  EXPECT_EQ(back->row.tokens_hash, c.row.tokens_hash);
  EXPECT_EQ(back->row.metrics[0].second, 1.0 / 3.0);  // exact round trip
  EXPECT_TRUE(std::isnan(back->row.metrics[1].second));
  ASSERT_EQ(back->requests.size(), 1u);
  EXPECT_EQ(back->requests[0].first_token_s, 1e-7);
  EXPECT_EQ(back->requests[0].output_hash, r.output_hash);
  ASSERT_EQ(back->steps.size(), 2u);
  EXPECT_EQ(back->steps[1].duration_s, 1.0 / 7.0);
  EXPECT_EQ(back->steps[1].kv_blocks_free, 11);
  EXPECT_EQ(back->steps[1].kv_blocks_cached, 4);
  EXPECT_EQ(back->steps[1].preemptions, 2);
  EXPECT_EQ(back->steps[1].time_s[1], 1e-5);
  EXPECT_FALSE(parse_cell(text.substr(0, text.size() - 4)));  // no end marker: a missing cell
  EXPECT_NE(tokens_hash(std::vector<int>{1, 2, 3}), tokens_hash(std::vector<int>{1, 3, 2}));
}

// steps.csv stays bounded: a cell keeps every step up to 2 * kStepsKeptWhole, then the first
// kStepsKeptWhole, every k-th of the rest and the last, evenly spread.
TEST(Reliability, SampleStepsBoundsLongRuns) {
  auto steps_of = [](std::size_t n) {
    std::vector<StepTimeline> s(n);
    for (std::size_t i = 0; i < n; ++i) s[i].seqs = static_cast<int>(i);
    return s;
  };
  EXPECT_EQ(sample_steps(steps_of(2 * kStepsKeptWhole)).size(), 2 * kStepsKeptWhole);
  for (std::size_t n : {2 * kStepsKeptWhole + 1, 7 * kStepsKeptWhole + 3, 100 * kStepsKeptWhole}) {
    const auto kept = sample_steps(steps_of(n));
    EXPECT_LE(kept.size(), 2 * kStepsKeptWhole + 1) << n;
    EXPECT_GE(kept.size(), kStepsKeptWhole + kStepsKeptWhole / 2) << n;
    EXPECT_EQ(kept[kStepsKeptWhole - 1].seqs, static_cast<int>(kStepsKeptWhole - 1)) << n;
    EXPECT_EQ(kept.back().seqs, static_cast<int>(n - 1)) << n;
    const int k = kept[kStepsKeptWhole + 1].seqs - kept[kStepsKeptWhole].seqs;
    for (std::size_t i = kStepsKeptWhole + 1; i + 1 < kept.size(); ++i)
      EXPECT_EQ(kept[i].seqs - kept[i - 1].seqs, k) << n << " at " << i;
  }
}

// A segfault, an abort and a hang each fail only their own cells, named; the other variants'
// cells and greedy tokens equal a run without the broken ones; the exit code is 3.
// AddressSanitizer turns a child's SIGSEGV into its own report and abort, and reserves terabytes
// of address space, so a crash signal or an address-space limit cannot be observed under it.

TEST(Reliability, CrashingAbortingAndHangingVariantsFailAlone) {
  if (testing::kAddressSanitizer) GTEST_SKIP() << "AddressSanitizer reports a SIGSEGV as its own abort (the release suite checks the signal)";
  const fs::path out = fresh_dir("crash");
  std::ofstream(out / "broken.toml") << tiny("broken", 1, test_plugins({"crash", "abort", "hang"}))
                                     << "[[variant]]\nname = \"segv\"\ndecoding = { name = \"crash\", after = 2 }\n"
                                     << "[[variant]]\nname = \"aborts\"\ndecoding = { name = \"abort\", after = 2 }\n"
                                     << "[[variant]]\nname = \"hangs\"\ndecoding = \"hang\"\n"
                                     << "[[variant]]\nname = \"flash\"\nattention = \"flash\"\n";
  std::ofstream(out / "clean.toml") << tiny("clean", 1, test_plugins({})) << "[[variant]]\nname = \"flash\"\nattention = \"flash\"\n";
  const Cli broken = run_cli("run " + (out / "broken.toml").string() +
                             " --set experiment.cell_timeout_s=1.5 --out " + out.string() + " --log quiet");
  EXPECT_EQ(broken.code, 3) << broken.err;
  const Cli clean = run_cli("run " + (out / "clean.toml").string() + " --out " + out.string() + " --log quiet");
  ASSERT_EQ(clean.code, 0) << clean.err;

  const fs::path bdir = only_run_dir(out, "broken");
  auto csv = read_csv(bdir / "metrics.csv");
  ASSERT_EQ(csv.size(), 6u);
  std::map<std::string, std::vector<std::string>> by;
  for (std::size_t r = 1; r < csv.size(); ++r) by[csv[r][0]] = csv[r];
  EXPECT_EQ(by["segv"][2], "failed");
  EXPECT_NE(by["segv"][3].find("SIGSEGV"), std::string::npos) << by["segv"][3];
  EXPECT_EQ(by["aborts"][2], "failed");
  EXPECT_NE(by["aborts"][3].find("SIGABRT"), std::string::npos) << by["aborts"][3];
  EXPECT_EQ(by["hangs"][2], "failed");
  EXPECT_NE(by["hangs"][3].find("time limit of 1.5 s (cell_timeout_s)"), std::string::npos) << by["hangs"][3];
  expect_files_parse(bdir);

  auto b = cells(bdir), c = cells(only_run_dir(out, "clean"));
  for (const char* v : {"baseline", "flash"}) {
    const std::pair<std::string, std::string> key(v, "0");
    ASSERT_TRUE(b.count(key) && c.count(key)) << v;
    EXPECT_EQ(b[key].first, "ok") << v;
    EXPECT_EQ(b[key], c[key]) << v;  // same status and output token hash
    EXPECT_EQ(b[key].second.size(), 16u);
  }
}

// A memory limit a cell cannot live under (a KV pool of ~4 GiB under 64 MiB) fails the cell,
// naming the limit.
TEST(Reliability, MemoryLimitFailsTheCellAndNamesIt) {
  if (testing::kAddressSanitizer) GTEST_SKIP() << "AddressSanitizer needs more address space than cell_memory_mb allows (the release suite checks it)";
  const fs::path out = fresh_dir("memory");
  std::ofstream(out / "mem.toml") << tiny("mem", 1, test_plugins({})) << "[baseline]\nkv = { num_blocks = 100000 }\n";
  const Cli c = run_cli("run " + (out / "mem.toml").string() + " --set experiment.cell_memory_mb=64 --out " + out.string() +
                        " --log quiet");
  EXPECT_EQ(c.code, 3) << c.err;
  auto csv = read_csv(only_run_dir(out, "mem") / "metrics.csv");
  ASSERT_EQ(csv.size(), 2u);
  EXPECT_EQ(csv[1][2], "failed");
  EXPECT_NE(csv[1][3].find("cell_memory_mb"), std::string::npos) << csv[1][3];
}

// SIGINT while a cell waits: exit 130, the folder is marked interrupted with the cells done and
// every file parses; --resume runs only the missing cells and gives the uninterrupted run.
TEST(Reliability, InterruptThenResumeGivesTheUninterruptedRun) {
  const fs::path out = fresh_dir("interrupt");
  const fs::path gate = out / "gate";
  std::ofstream(out / "stop.toml") << tiny("stop", 2, test_plugins({"hang"}))
                                   << "[[variant]]\nname = \"waits\"\ndecoding = { name = \"hang\", while_exists = \""
                                   << gate.string() << "\" }\n";
  std::ofstream(gate) << "x";
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    const std::string bin = testing::binary_dir() + "/bin/inferlab", cfg = (out / "stop.toml").string();
    freopen((out / "run.err").c_str(), "w", stderr);
    freopen((out / "run.out").c_str(), "w", stdout);
    execl(bin.c_str(), bin.c_str(), "run", cfg.c_str(), "--out", out.c_str(), "--log", "warn", static_cast<char*>(nullptr));
    _exit(127);
  }
  // Wait until the baseline's first cell is written (the next one waits on the gate).
  fs::path dir;
  for (int i = 0; i < 3000 && dir.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (fs::exists(out / "stop"))
      for (const auto& d : fs::directory_iterator(out / "stop"))
        if (read_csv(d.path() / "metrics.csv").size() == 2) dir = d.path();
  }
  ASSERT_FALSE(dir.empty()) << slurp(out / "run.err");
  kill(pid, SIGINT);
  int status = 0;
  const auto t0 = std::chrono::steady_clock::now();
  pid_t w = 0;
  while ((w = waitpid(pid, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(30))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (w == 0) kill(pid, SIGKILL);  // a hang guard, not a timing assertion
  ASSERT_EQ(w, pid);
  std::printf("SIGINT to exit: %.0f ms\n",
              std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 130) << slurp(out / "run.err");

  expect_files_parse(dir);
  pt::ptree manifest;
  pt::read_json((dir / "manifest.json").string(), manifest);
  EXPECT_EQ(manifest.get<std::string>("run.status"), "interrupted");
  EXPECT_EQ(manifest.get<std::string>("run.signal"), "SIGINT");
  EXPECT_EQ(manifest.get<int>("run.cells_total"), 4);
  EXPECT_EQ(manifest.get<int>("run.cells_done"), 1);
  EXPECT_EQ(manifest.get_child("run.done").front().second.get<std::string>("variant"), "baseline");
  EXPECT_EQ(manifest.get_child("run.missing").size(), 3u);
  const std::string md = slurp(dir / "summary.md");
  EXPECT_NE(md.find("Interrupted by SIGINT: 1 of 4 cells done"), std::string::npos) << md;

  fs::remove(gate);
  const Cli resumed = run_cli("run --resume " + dir.string() + " --log info");
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_EQ(resumed.err.find("run baseline repeat 0"), std::string::npos) << resumed.err;  // only missing cells
  EXPECT_NE(resumed.err.find("run waits repeat 0"), std::string::npos) << resumed.err;
  pt::read_json((dir / "manifest.json").string(), manifest);
  EXPECT_EQ(manifest.get<std::string>("run.status"), "complete");
  EXPECT_EQ(manifest.get<int>("run.resumes"), 1);
  EXPECT_EQ(slurp(dir / "summary.md").find("Interrupted"), std::string::npos);
  expect_files_parse(dir);

  const fs::path whole = out / "whole";
  const Cli uninterrupted = run_cli("run " + (out / "stop.toml").string() + " --out " + whole.string() + " --log quiet");
  ASSERT_EQ(uninterrupted.code, 0) << uninterrupted.err;
  const fs::path wdir = only_run_dir(whole, "stop");
  EXPECT_EQ(cells(dir), cells(wdir));
  EXPECT_EQ(cells(dir).size(), 4u);
  auto rq = read_csv(dir / "requests.csv"), wq = read_csv(wdir / "requests.csv");
  ASSERT_EQ(rq.size(), wq.size());
  for (std::size_t i = 0; i < rq.size(); ++i) EXPECT_EQ(rq[i].back(), wq[i].back()) << "request row " << i;
}

// The quickstart's tokens are the same on a rerun and at 1 and 2 threads.
TEST(Reliability, CheckDeterminismPassesOnTheQuickstartAtOneAndTwoThreads) {
  const fs::path out = fresh_dir("determinism");
  std::map<std::pair<std::string, std::string>, std::pair<std::string, std::string>> at[2];
  for (int threads : {1, 2}) {
    const fs::path root = out / std::to_string(threads);
    const Cli c = run_cli("run " + testing::source_dir() + "/experiments/quickstart.toml --repeats 1 --check-determinism" +
                          " --set workload.num_requests=6 --set workload.output_len.max=12 --set model.n_layers=1" +
                          " --set device.threads=" + std::to_string(threads) + " --out " +
                          root.string() + " --log quiet");
    ASSERT_EQ(c.code, 0) << c.err;
    const fs::path dir = only_run_dir(root, "quickstart");
    pt::ptree manifest;
    pt::read_json((dir / "manifest.json").string(), manifest);
    for (const auto& [variant, verdict] : manifest.get_child("run.determinism"))
      EXPECT_EQ(verdict.data().rfind("same", 0), 0u) << variant << ": " << verdict.data();
    EXPECT_EQ(manifest.get_child("run.determinism").size(), 3u);
    at[threads - 1] = cells(dir);
  }
  EXPECT_EQ(at[0], at[1]);
}

TEST(Reliability, CheckDeterminismFailsOnAnUnseededPlugin) {
  const fs::path out = fresh_dir("unseeded");
  std::ofstream(out / "u.toml") << tiny("u", 1, test_plugins({"unseeded"}))
                                << "[[variant]]\nname = \"dice\"\ndecoding = \"unseeded\"\n";
  const Cli c = run_cli("run " + (out / "u.toml").string() + " --check-determinism --out " + out.string() + " --log quiet");
  EXPECT_EQ(c.code, 4) << c.err;
  pt::ptree manifest;
  pt::read_json((only_run_dir(out, "u") / "manifest.json").string(), manifest);
  EXPECT_EQ(manifest.get<std::string>("run.determinism.baseline").rfind("same", 0), 0u);
  EXPECT_EQ(manifest.get<std::string>("run.determinism.dice").rfind("differs", 0), 0u);
}

// isolate = false (today's in-process path) gives the same cells and tokens as child processes.
TEST(Reliability, InProcessCellsMatchIsolatedOnes) {
  const fs::path out = fresh_dir("inprocess");
  std::ofstream(out / "p.toml") << tiny("p", 2, test_plugins({"throwing"}))
                                << "[[variant]]\nname = \"broken\"\ndecoding = { name = \"throwing\", after = 2 }\n";
  const Cli a = run_cli("run " + (out / "p.toml").string() + " --out " + (out / "a").string() + " --log quiet");
  const Cli b = run_cli("run " + (out / "p.toml").string() + " --set experiment.isolate=false --out " + (out / "b").string() +
                        " --log quiet");
  EXPECT_EQ(a.code, 3) << a.err;
  EXPECT_EQ(b.code, 3) << b.err;
  const auto ca = cells(only_run_dir(out / "a", "p")), cb = cells(only_run_dir(out / "b", "p"));
  EXPECT_EQ(ca, cb);
  EXPECT_EQ(ca.size(), 4u);
  EXPECT_NE(slurp(only_run_dir(out / "b", "p") / "summary.md").find("cells: in the run's process"), std::string::npos);
}

}  // namespace
}  // namespace inferlab::testing
