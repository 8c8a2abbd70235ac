// A results folder is owned and tied to its config, and every end of a run marks it (issue 42):
// through the CLI as a user runs it. Two concurrent resumes of one folder: one runs, the other
// stops at once naming the holder; an edited config.toml is refused naming the key, and
// --force-config is recorded; a full disk (a small tmpfs) leaves the folder "failed" with "no
// space left" and no temp files, and a resume completes it; a run killed by SIGKILL reads
// "interrupted" (its cells die with it); a crash with isolate = false marks the folder failed; a
// cell that failed because its run could not take its result is run again by a resume. The
// experiments are tiny (stories260k, 3 requests); a hang plugin gated on a file holds a run at a
// known cell.
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include <boost/property_tree/json_parser.hpp>
#include <boost/property_tree/ptree.hpp>
#include <gtest/gtest.h>

#include "inferlab/run/cell.h"
#include "inferlab/run/run_folder.h"
#include "cli_runs.h"
#include "sanitizers.h"
#include "test_support.h"

namespace inferlab::testing {
namespace {

namespace fs = std::filesystem;
namespace pt = boost::property_tree;

fs::path fresh_dir(const std::string& name) { return testing::fresh_dir("folder", name); }

// Baseline + a variant that waits while `gate` exists; 3 requests, 1 thread.
std::string gated(const std::string& name, int repeats, const fs::path& gate) {
  std::ostringstream t;
  t << "[experiment]\nname = \"" << name << "\"\nrepeats = " << repeats << "\n[model]\npreset = \"stories260k\"\n"
    << "[device]\nthreads = 1\n[workload]\nnum_requests = 3\nprompt_len = 6\noutput_len = 8\n[plugins]\npaths = [\""
    << testing::binary_dir() << "/test_plugins/hang\"]\n"
    << "[[variant]]\nname = \"waits\"\ndecoding = { name = \"hang\", while_exists = \"" << gate.string() << "\" }\n";
  return t.str();
}

// `inferlab ARGS...` in the background, its output in LOG.out / LOG.err.
pid_t spawn(const std::vector<std::string>& args, const fs::path& log) {
  const pid_t pid = fork();
  if (pid == 0) {
    const std::string bin = testing::binary_dir() + "/bin/inferlab";
    freopen((log.string() + ".err").c_str(), "w", stderr);
    freopen((log.string() + ".out").c_str(), "w", stdout);
    std::vector<char*> argv{const_cast<char*>(bin.c_str())};
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(bin.c_str(), argv.data());
    _exit(127);
  }
  return pid;
}

// The exit status of `pid`, killed after 60 s (a hang guard, not a timing assertion).
int wait_exit(pid_t pid) {
  int status = 0;
  const auto t0 = std::chrono::steady_clock::now();
  pid_t w = 0;
  while ((w = waitpid(pid, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(60))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  if (w == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return -2;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Waits (up to 30 s) until `ready` holds.
bool wait_until(const std::function<bool()>& ready) {
  for (int i = 0; i < 3000; ++i) {
    if (ready()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// The one run folder under ROOT/EXPERIMENT once its metrics.csv holds `rows` rows.
fs::path run_dir_with_rows(const fs::path& root, const std::string& experiment, std::size_t rows) {
  fs::path dir;
  wait_until([&] {
    std::error_code ec;
    for (const auto& d : fs::directory_iterator(root / experiment, ec))
      if (read_csv(d.path() / "metrics.csv").size() == rows + 1) dir = d.path();
    return !dir.empty();
  });
  return dir;
}

// Whether a process whose parent is `pid` exists (a cell's child process of that run).
bool has_child(pid_t pid) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    std::ifstream stat(e.path() / "stat");
    std::string line;
    if (!std::getline(stat, line) || line.rfind(')') == std::string::npos) continue;
    std::istringstream rest(line.substr(line.rfind(')') + 2));
    char state = 0;
    pid_t ppid = 0;
    if (rest >> state >> ppid && ppid == pid) return true;
  }
  return false;
}

pt::ptree manifest_of(const fs::path& dir) {
  pt::ptree m;
  pt::read_json((dir / "manifest.json").string(), m);
  return m;
}

std::vector<std::string> temp_files(const fs::path& dir) {
  std::vector<std::string> found;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() == ".tmp" || name == ".reserve" || name.find(".child") != std::string::npos)
      found.push_back(e.path().string());
  }
  return found;
}

// Every metrics row ok, and 3 request rows per cell.
void expect_whole(const fs::path& dir, std::size_t cells) {
  const auto metrics = read_csv(dir / "metrics.csv");
  ASSERT_EQ(metrics.size(), cells + 1);
  for (std::size_t r = 1; r < metrics.size(); ++r) EXPECT_EQ(metrics[r][2], "ok") << metrics[r][0] << ": " << metrics[r][3];
  EXPECT_EQ(read_csv(dir / "requests.csv").size(), 3 * cells + 1);
  EXPECT_EQ(manifest_of(dir).get<std::string>("run.status"), "complete");
}

// A run of `gated` stopped by SIGINT after its first cell: an interrupted folder with 1 of 4
// cells done.
fs::path interrupted_folder(const fs::path& out, const fs::path& gate) {
  std::ofstream(out / "g.toml") << gated("g", 2, gate);
  std::ofstream(gate) << "x";
  const pid_t pid = spawn({"run", (out / "g.toml").string(), "--out", out.string(), "--log", "warn"}, out / "first");
  const fs::path dir = run_dir_with_rows(out, "g", 1);
  kill(pid, SIGINT);
  EXPECT_EQ(wait_exit(pid), 130) << slurp(out / "first.err");
  return dir;
}

TEST(RunFolder, ConcurrentResumesOneRunsTheOtherStopsAtOnce) {
  const fs::path out = fresh_dir("concurrent"), gate = out / "gate";
  const fs::path dir = interrupted_folder(out, gate);
  ASSERT_FALSE(dir.empty());
  // The first resume waits at the gate in the "waits" cell, holding the folder.
  const pid_t first = spawn({"run", "--resume", dir.string(), "--log", "warn"}, out / "resume1");
  ASSERT_TRUE(wait_until([&] { return !folder_lock_holder(dir.string()).empty(); })) << slurp(out / "resume1.err");
  const testing::CliResult second = testing::run_inferlab("run --resume " + dir.string() + " --log warn", "", 30);
  EXPECT_EQ(second.code, 1) << second.err;
  EXPECT_NE(second.err.find(dir.string() + " is in use by another inferlab run (pid " + std::to_string(first) + " on host " +
                            host_name()),
            std::string::npos)
      << second.err;
  EXPECT_EQ(manifest_of(dir).get<std::string>("run.status"), "running");  // the second touched nothing
  fs::remove(gate);
  ASSERT_EQ(wait_exit(first), 0) << slurp(out / "resume1.err");
  expect_whole(dir, 4);
  EXPECT_EQ(manifest_of(dir).get<int>("run.resumes"), 1);
  EXPECT_TRUE(folder_lock_holder(dir.string()).empty());
  EXPECT_TRUE(temp_files(dir).empty());
}

TEST(RunFolder, EditedConfigIsRefusedNamingTheKeyAndForceConfigIsRecorded) {
  const fs::path out = fresh_dir("config"), gate = out / "gate";  // no gate file: nothing waits
  std::ofstream(out / "c.toml") << gated("c", 2, gate);
  ASSERT_EQ(testing::run_inferlab("run " + (out / "c.toml").string() + " --out " + out.string() + " --log quiet").code, 0);
  const fs::path dir = run_dir_with_rows(out, "c", 4);
  ASSERT_FALSE(dir.empty());
  // Edit the seed of [experiment] (the first `seed =` line) and drop two cells.
  std::string config = slurp(dir / "config.toml");
  config = std::regex_replace(config, std::regex("\nseed = [0-9]+\n"), "\nseed = 77\n", std::regex_constants::format_first_only);
  std::ofstream(dir / "config.toml") << config;
  fs::remove(dir / "cells" / "r1-v0.cell");
  fs::remove(dir / "cells" / "r1-v1.cell");

  const testing::CliResult refused = testing::run_inferlab("run --resume " + dir.string() + " --log warn");
  EXPECT_EQ(refused.code, 1) << refused.err;
  EXPECT_NE(refused.err.find((dir / "config.toml").string() + " was edited after the folder's cells were run (changed: "
                                                               "experiment.seed (1 → 77))"),
            std::string::npos)
      << refused.err;
  EXPECT_NE(refused.err.find("--force-config"), std::string::npos) << refused.err;
  {  // an edit that planning would refuse is named as an edit first
    const std::string edited = slurp(dir / "config.toml");
    std::ofstream(dir / "config.toml") << std::regex_replace(edited, std::regex("stories260k"), "no-such-preset");
    const testing::CliResult r = testing::run_inferlab("run --resume " + dir.string() + " --log warn");
    EXPECT_EQ(r.code, 1);
    EXPECT_NE(r.err.find("model.preset ('stories260k' → 'no-such-preset')"), std::string::npos) << r.err;
    std::ofstream(dir / "config.toml") << edited;
  }
  EXPECT_EQ(read_csv(dir / "metrics.csv").size(), 5u);  // untouched
  EXPECT_EQ(manifest_of(dir).get<std::string>("run.status"), "complete");

  const testing::CliResult forced = testing::run_inferlab("run --resume " + dir.string() + " --force-config --log warn");
  ASSERT_EQ(forced.code, 0) << forced.err;
  const pt::ptree m = manifest_of(dir);
  ASSERT_EQ(m.get_child("run.config_forced").size(), 1u);
  const pt::ptree& change = m.get_child("run.config_forced").front().second;
  EXPECT_EQ(change.get<int>("resume"), 1);
  EXPECT_EQ(change.get_child("changed").front().second.data(), "experiment.seed (1 → 77)");
  EXPECT_NE(slurp(dir / "summary.md").find("accepted by --force-config at resume 1"), std::string::npos);
  expect_whole(dir, 4);
  // The accepted config is the folder's now: a later resume needs no flag.
  EXPECT_EQ(testing::run_inferlab("run --resume " + dir.string() + " --log quiet").code, 0);
  EXPECT_EQ(testing::run_inferlab("run " + (out / "c.toml").string() + " --force-config --out " + out.string()).code, 1);
}

// The disk fills while the second cell runs: its result cannot be written.
TEST(RunFolder, FullDiskLeavesTheFolderFailedAndResumeCompletesIt) {
  const fs::path out = fresh_dir("disk"), gate = out / "gate", disk = out / "disk";
  fs::create_directories(disk);
  if (mount("tmpfs", disk.c_str(), "tmpfs", 0, "size=4m") != 0)
    GTEST_SKIP() << "cannot mount a tmpfs here (" << std::strerror(errno) << "; the test needs root)";
  struct Unmount {
    fs::path at;
    ~Unmount() { umount2(at.c_str(), MNT_DETACH); }
  } unmount{disk};
  std::ofstream(out / "d.toml") << gated("d", 2, gate);
  std::ofstream(gate) << "x";
  const pid_t pid = spawn({"run", (out / "d.toml").string(), "--out", disk.string(), "--log", "warn"}, out / "run");
  const fs::path dir = run_dir_with_rows(disk, "d", 1);
  ASSERT_FALSE(dir.empty()) << slurp(out / "run.err");
  {  // fill the disk to the last byte
    std::ofstream fill(disk / "filler", std::ios::binary);
    const std::string block(1 << 16, 'x');
    while (fill.write(block.data(), static_cast<std::streamsize>(block.size()))) {
    }
  }
  {
    std::ofstream fill(disk / "filler-small", std::ios::binary);
    while (fill.put('x')) fill.flush();
  }
  fs::remove(gate);
  EXPECT_EQ(wait_exit(pid), 1);
  const std::string err = slurp(out / "run.err");
  EXPECT_NE(err.find("no space left on device ("), std::string::npos) << err;
  // The failing write is the second cell's result, or the folder's tables when the first cell's
  // rewrite of them comes after the disk filled: either way a file of this folder.
  EXPECT_NE(err.find(" bytes free at " + dir.string()), std::string::npos) << err;
  const pt::ptree m = manifest_of(dir);
  EXPECT_EQ(m.get<std::string>("run.status"), "failed");
  EXPECT_NE(m.get<std::string>("run.reason").find("no space left on device"), std::string::npos);
  EXPECT_EQ(m.get<int>("run.cells_done"), 1);
  EXPECT_NE(slurp(dir / "summary.md").find("Failed: "), std::string::npos);
  EXPECT_EQ(temp_files(dir), std::vector<std::string>{});
  EXPECT_EQ(read_folder_status(dir.string()).status, "failed");

  fs::remove(disk / "filler");
  fs::remove(disk / "filler-small");
  const testing::CliResult resumed = testing::run_inferlab("run --resume " + dir.string() + " --log warn");
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  expect_whole(dir, 4);
  EXPECT_TRUE(temp_files(dir).empty());
}

// SIGKILL leaves "running"; its cell (waiting at the gate) dies with it and frees the folder,
// which then reads interrupted (compare and resume say so) and resumes.
TEST(RunFolder, RunKilledBySigkillReadsInterrupted) {
  const fs::path out = fresh_dir("sigkill"), gate = out / "gate";
  std::ofstream(out / "k.toml") << gated("k", 1, gate);
  std::ofstream(gate) << "x";
  const pid_t pid = spawn({"run", (out / "k.toml").string(), "--out", out.string(), "--log", "warn"}, out / "run");
  const fs::path dir = run_dir_with_rows(out, "k", 1);
  ASSERT_FALSE(dir.empty()) << slurp(out / "run.err");
  ASSERT_TRUE(wait_until([&] { return has_child(pid); }));  // the "waits" cell is running, holding the lock too
  kill(pid, SIGKILL);
  EXPECT_EQ(wait_exit(pid), 128 + SIGKILL);
  EXPECT_EQ(manifest_of(dir).get<std::string>("run.status"), "running");
  const bool freed = wait_until([&] { return folder_lock_holder(dir.string()).empty(); });  // the cell died with it
  if (!freed) fs::remove(gate);  // let an orphaned cell end
  ASSERT_TRUE(freed);
  const FolderStatus s = read_folder_status(dir.string());
  EXPECT_EQ(s.status, "interrupted");
  EXPECT_TRUE(s.stale);
  EXPECT_EQ(s.detail, "left \"running\" by pid " + std::to_string(pid) + " on host " + host_name() + ", which is gone");
  const testing::CliResult compared = testing::run_inferlab("compare " + dir.string() + " " + dir.string());
  EXPECT_EQ(compared.code, 0) << compared.err;
  EXPECT_NE(compared.out.find("— interrupted (left \"running\" by pid " + std::to_string(pid)), std::string::npos)
      << compared.out;
  fs::remove(gate);
  const testing::CliResult resumed = testing::run_inferlab("run --resume " + dir.string() + " --log warn");
  ASSERT_EQ(resumed.code, 0) << resumed.err;
  EXPECT_NE(resumed.err.find("was left \"running\" by pid " + std::to_string(pid)), std::string::npos) << resumed.err;
  expect_whole(dir, 2);
}

TEST(RunFolder, CrashWithCellsInTheRunsProcessMarksTheFolderFailed) {
  if (testing::kAddressSanitizer) GTEST_SKIP() << "AddressSanitizer reports a SIGSEGV as its own abort (the release suite checks it)";
  const fs::path out = fresh_dir("crash");
  std::ofstream(out / "x.toml") << "[experiment]\nname = \"x\"\nisolate = false\n[model]\npreset = \"stories260k\"\n"
                                << "[device]\nthreads = 1\n[workload]\nnum_requests = 3\nprompt_len = 6\noutput_len = 8\n"
                                << "[plugins]\npaths = [\"" << testing::binary_dir() << "/test_plugins/crash\"]\n"
                                << "[[variant]]\nname = \"segv\"\ndecoding = { name = \"crash\", after = 2 }\n";
  const pid_t pid = spawn({"run", (out / "x.toml").string(), "--out", out.string(), "--log", "warn"}, out / "run");
  EXPECT_EQ(wait_exit(pid), 128 + SIGSEGV) << slurp(out / "run.err");
  const fs::path dir = run_dir_with_rows(out, "x", 1);
  ASSERT_FALSE(dir.empty());
  const pt::ptree m = manifest_of(dir);
  EXPECT_EQ(m.get<std::string>("run.status"), "failed");
  EXPECT_EQ(m.get<std::string>("run.reason"),
            "crashed: killed by SIGSEGV in the run's own process (experiment.isolate = false: cells run in it)");
  EXPECT_NE(slurp(dir / "summary.md").find("Failed: crashed: killed by SIGSEGV"), std::string::npos);
  EXPECT_EQ(read_folder_status(dir.string()).status, "failed");
}

// A cell recorded as failed because its run could not take its result (marked run_fault, or an
// older build's "cell process exited without a result") is run again; a plugin's failure is not.
TEST(RunFolder, ResumeRedoesCellsThatFailedForTheRunsOwnReasons) {
  const fs::path out = fresh_dir("runfault"), gate = out / "gate";
  std::ofstream(out / "f.toml") << gated("f", 2, gate);
  ASSERT_EQ(testing::run_inferlab("run " + (out / "f.toml").string() + " --out " + out.string() + " --log quiet").code, 0);
  const fs::path dir = run_dir_with_rows(out, "f", 4);
  ASSERT_FALSE(dir.empty());
  auto fail_cell = [&](const std::string& file, const std::string& error, bool run_fault) {
    CellResult c = *read_cell_file((dir / "cells" / file).string());
    c.row.ok = false;
    c.row.error = error;
    c.row.metrics.clear();
    c.requests.clear();
    c.run_fault = run_fault;
    write_cell_file((dir / "cells" / file).string(), c);
  };
  fail_cell("r0-v1.cell", "cell process could not write its result to x", true);
  fail_cell("r1-v0.cell", "cell process exited without a result", false);  // an older build's cell
  fail_cell("r1-v1.cell", "the plugin threw", false);
  const testing::CliResult resumed = testing::run_inferlab("run --resume " + dir.string() + " --log info");
  EXPECT_EQ(resumed.code, 3) << resumed.err;  // the plugin's failure stays
  EXPECT_NE(resumed.err.find("run waits repeat 0"), std::string::npos) << resumed.err;
  EXPECT_NE(resumed.err.find("run baseline repeat 1"), std::string::npos) << resumed.err;
  EXPECT_EQ(resumed.err.find("run waits repeat 1"), std::string::npos) << resumed.err;
  const auto metrics = read_csv(dir / "metrics.csv");
  ASSERT_EQ(metrics.size(), 5u);
  for (std::size_t r = 1; r < metrics.size(); ++r)
    EXPECT_EQ(metrics[r][2], metrics[r][0] == "waits" && metrics[r][1] == "1" ? "failed" : "ok") << metrics[r][0];
}

TEST(RunFolder, ChangedConfigKeysNamesEachDottedKey) {
  const std::string a = "[experiment]\nseed = 1\n[[variant]]\nname = \"v\"\nattention = \"flash\"\n"
                        "[[variant]]\nname = \"w\"\nkv = { block_size = 16 }\n";
  EXPECT_TRUE(changed_config_keys(a, "# a comment\n" + a).empty());  // the same meaning
  const std::string b = "[experiment]\nseed = 1\nrepeats = 2\n[[variant]]\nname = \"v\"\nattention = \"naive\"\n"
                        "[[variant]]\nname = \"w\"\nkv = { block_size = 32 }\n";
  EXPECT_EQ(changed_config_keys(a, b),
            (std::vector<std::string>{"variant.0.attention ('flash' → 'naive')", "variant.1.kv.block_size (16 → 32)",
                                      "experiment.repeats (absent → 2)"}));
  EXPECT_EQ(changed_config_keys(a, "[experiment\n").front().rfind("the whole file (it no longer parses", 0), 0u);
}

}  // namespace
}  // namespace inferlab::testing
