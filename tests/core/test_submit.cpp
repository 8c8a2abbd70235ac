// `inferlab submit --slurm` without a Slurm cluster: the dry run's scripts, the errors for bad
// options and for a missing or failing sbatch, the job ids and dependency it hands sbatch (a
// stand-in sbatch on PATH records them), and the scripts themselves run by bash as Slurm would
// run them, merging into the local run's results. `merge` reports a shard's failed cells with
// their errors. The real cluster test is tests/slurm/slurm_test.sh (ctest label "slurm").
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "inferlab/error.h"
#include "inferlab/run/slurm.h"
#include "cli_runs.h"
#include "test_support.h"

namespace inferlab::testing {
namespace {

namespace fs = std::filesystem;

fs::path fresh_dir(const std::string& name) { return testing::fresh_dir("submit", name); }

// Two variants (baseline, smaller KV blocks) x 2 repeats, greedy decoding: 4 cells.
fs::path write_tiny(const fs::path& dir) {
  const fs::path cfg = dir / "tiny.toml";
  std::ofstream(cfg) << "[experiment]\nname = \"tiny\"\nrepeats = 2\n[model]\npreset = \"stories260k\"\n"
                     << "[device]\nthreads = 1\n[workload]\nnum_requests = 3\nprompt_len = 6\noutput_len = 8\n"
                     << "[[variant]]\nname = \"blocks8\"\nkv = { block_size = 8 }\n";
  return cfg;
}

// Runs the CLI with PATH set to `path` (the binary is called by its absolute path).
Cli run_with_path(const std::string& args, const std::string& path) {
  const std::string saved = std::getenv("PATH") ? std::getenv("PATH") : "";
  setenv("PATH", path.c_str(), 1);
  Cli r = testing::run_inferlab(args);
  setenv("PATH", saved.c_str(), 1);
  return r;
}

void write_script(const fs::path& p, const std::string& text) {
  std::ofstream(p) << text;
  fs::permissions(p, fs::perms::owner_all);
}

// The one folder under `root` (a submission's experiment folder).
fs::path only_dir(const fs::path& root) {
  std::vector<fs::path> dirs;
  for (const auto& d : fs::directory_iterator(root)) dirs.push_back(d.path());
  EXPECT_EQ(dirs.size(), 1u) << root;
  return dirs.empty() ? fs::path() : dirs.front();
}

TEST(Submit, DryRunPrintsTheArrayAndTheDependentMergeJob) {
  const fs::path dir = fresh_dir("dry");
  const Cli c = testing::run_inferlab("submit " + write_tiny(dir).string() + " --slurm --dry-run --array-size 3 --partition gpu_a100 " +
                                      "--time 1:30:00 --set workload.num_requests=2 --repeats 2 --out " + (dir / "res").string());
  ASSERT_EQ(c.code, 0) << c.err;
  const std::vector<std::string> wants = {
      "#SBATCH --array=0-2\n", "#SBATCH --partition=gpu_a100\n", "#SBATCH --time=1:30:00\n", "#SBATCH --job-name=inferlab-tiny\n",
        "#SBATCH --job-name=inferlab-tiny-merge\n", "/logs/shard-%a.err\n", "#SBATCH --chdir=" + fs::current_path().string() + "\n",
        " run '" + (dir / "tiny.toml").string() + "' --set 'workload.num_requests=2' --repeats 2 --shard \"$SLURM_ARRAY_TASK_ID/3\" --out '",
        "*\"-shard${i}of3\"", " merge \"${dirs[@]}\" --out '", "sbatch --parsable --dependency=afterany:<array job id> ",
        "/res/tiny/"};
  for (const auto& want : wants)
    EXPECT_NE(c.out.find(want), std::string::npos) << want << "\n" << c.out;
  EXPECT_FALSE(fs::exists(dir / "res")) << "a dry run writes nothing";
  // Without --array-size: one task per cell (2 variants x 2 repeats).
  const Cli d = testing::run_inferlab("submit " + (dir / "tiny.toml").string() + " --slurm --dry-run --out " + (dir / "res").string());
  ASSERT_EQ(d.code, 0) << d.err;
  EXPECT_NE(d.out.find("#SBATCH --array=0-3\n"), std::string::npos) << d.out;
  EXPECT_EQ(d.out.find("#SBATCH --partition"), std::string::npos) << d.out;
}

TEST(Submit, RefusesBadOptionsNamingWhatIsAllowed) {
  const fs::path dir = fresh_dir("bad");
  const std::string cfg = write_tiny(dir).string();
  const std::map<std::string, std::string> cases = {
      {"", "allowed: --slurm"},
      {"--slurm --array-size 5", "--array-size 5: allowed: 1 .. 4"},
      {"--slurm --array-size 0", "--array-size 0: allowed: 1 .. 4"},
      {"--slurm --time soon", "--time soon: allowed: Slurm's formats"},
      {"--slurm --partition 'a;b'", "--partition a;b: allowed"},
      {"--slurm --out 'with space'", "allowed: a path without whitespace"},
      {"--slurm --set model.preset=nope", "nope"},
  };
  for (const auto& [args, want] : cases) {
    const Cli c = testing::run_inferlab("submit " + cfg + " " + args + " --dry-run");
    EXPECT_EQ(c.code, 1) << args;
    EXPECT_NE(c.err.find(want), std::string::npos) << args << ": " << c.err;
  }
  EXPECT_EQ(parse_sbatch_job_id("1234;cluster\n"), "1234");
  EXPECT_EQ(parse_sbatch_job_id("77\n"), "77");
  EXPECT_THROW(parse_sbatch_job_id("Submitted batch job 77\n"), Error);
  EXPECT_EQ(shell_quote("it's"), "'it'\\''s'");
}

TEST(Submit, MissingOrFailingSbatchIsAClearError) {
  const fs::path dir = fresh_dir("nosbatch");
  const std::string cfg = write_tiny(dir).string();
  fs::create_directories(dir / "empty");
  const Cli missing = run_with_path("submit " + cfg + " --slurm --out " + (dir / "res").string(), (dir / "empty").string());
  EXPECT_EQ(missing.code, 1);
  EXPECT_NE(missing.err.find("sbatch not found on PATH"), std::string::npos) << missing.err;

  fs::create_directories(dir / "bin");
  write_script(dir / "bin" / "sbatch", "#!/bin/sh\necho 'sbatch: error: invalid partition specified: nope' >&2\nexit 1\n");
  const Cli failing = run_with_path("submit " + cfg + " --slurm --partition nope --out " + (dir / "res").string(),
                                    (dir / "bin").string() + ":/usr/bin:/bin");
  EXPECT_EQ(failing.code, 1);
  EXPECT_NE(failing.err.find("failed (exit status 1): \"sbatch: error: invalid partition specified: nope\""), std::string::npos)
      << failing.err;
}

// A stand-in sbatch records its arguments and answers job ids 101 and 102; then bash runs the
// scripts as Slurm would (task ids 0 .. n-1, then the merge job) and the merged folder must be
// the local run's. Then a task that wrote nothing: the merge job names it with its log and fails.
TEST(Submit, SubmittedScriptsMergeIntoTheLocalRun) {
  const fs::path dir = fresh_dir("scripts");
  const std::string cfg = write_tiny(dir).string();
  const Cli local = testing::run_inferlab("run " + cfg + " --out " + (dir / "local").string() + " --log warn");
  ASSERT_EQ(local.code, 0) << local.err;
  fs::create_directories(dir / "bin");
  write_script(dir / "bin" / "sbatch", "#!/bin/sh\necho \"$@\" >> " + (dir / "sbatch_args").string() +
                                           "\nn=$(wc -l < " + (dir / "sbatch_args").string() + ")\necho \"$((100 + n));cluster\"\n");
  const Cli sub = run_with_path("submit " + cfg + " --slurm --array-size 2 --out " + (dir / "res").string(),
                                (dir / "bin").string() + ":/usr/bin:/bin");
  ASSERT_EQ(sub.code, 0) << sub.err;
  const fs::path job = only_dir(dir / "res" / "tiny");
  EXPECT_NE(sub.out.find("array job: 101 (2 task(s)"), std::string::npos) << sub.out;
  EXPECT_NE(sub.out.find("merge job: 102 (after every task of 101 ends)"), std::string::npos) << sub.out;
  EXPECT_NE(sub.out.find("results: " + (job / "merged").string() + "\n"), std::string::npos) << sub.out;
  EXPECT_EQ(slurp(dir / "sbatch_args"), "--parsable " + (job / "array.sbatch").string() +
                                            "\n--parsable --dependency=afterany:101 " + (job / "merge.sbatch").string() + "\n");

  auto task = [&](int i) {
    return std::system(("cd '" + fs::current_path().string() + "' && SLURM_ARRAY_TASK_ID=" + std::to_string(i) + " bash '" +
                        (job / "array.sbatch").string() + "' >'" + (job / "logs").string() + "/shard-" + std::to_string(i) +
                        ".out' 2>'" + (job / "logs").string() + "/shard-" + std::to_string(i) + ".err'")
                           .c_str());
  };
  auto merge = [&] {
    return std::system(("bash '" + (job / "merge.sbatch").string() + "' >'" + (job / "logs/merge.out").string() + "' 2>'" +
                        (job / "logs/merge.err").string() + "'")
                           .c_str());
  };
  // Task 1 "dies" before writing anything: the merge job names it and refuses the missing cells.
  ASSERT_EQ(task(0), 0) << slurp(job / "logs/shard-0.err");
  std::ofstream(job / "logs/shard-1.err") << "slurmstepd: error: *** JOB 101 ON node1 CANCELLED DUE TO TIME LIMIT ***\n";
  EXPECT_NE(merge(), 0);
  const std::string err = slurp(job / "logs/merge.err");
  EXPECT_NE(err.find("shard 1/2 wrote no results folder"), std::string::npos) << err;
  EXPECT_NE(err.find("CANCELLED DUE TO TIME LIMIT"), std::string::npos) << err;
  EXPECT_NE(err.find("2 cell(s) missing"), std::string::npos) << err;
  EXPECT_FALSE(fs::exists(job / "merged" / "metrics.csv"));

  ASSERT_EQ(task(1), 0) << slurp(job / "logs/shard-1.err");
  ASSERT_EQ(merge(), 0) << slurp(job / "logs/merge.err");
  const fs::path ldir = only_dir(dir / "local" / "tiny");
  EXPECT_EQ(request_keys(job / "merged"), request_keys(ldir));
  EXPECT_EQ(request_keys(ldir).size(), 12u);
  EXPECT_EQ(slurp(job / "merged" / "config.toml"), slurp(ldir / "config.toml"));
}

// A shard whose variant failed: merge keeps the failed rows, names them with the error the shard
// recorded, and exits 3 as run does; a shard missing a cell is refused unless --allow-partial.
TEST(Submit, MergeReportsAFailedShardWithItsError) {
  const fs::path dir = fresh_dir("failed");
  const fs::path cfg = dir / "broken.toml";
  std::ofstream(cfg) << "[experiment]\nname = \"broken\"\nrepeats = 1\n[model]\npreset = \"stories260k\"\n"
                     << "[device]\nthreads = 1\n[workload]\nnum_requests = 2\nprompt_len = 6\noutput_len = 8\n"
                     << "[plugins]\npaths = [\"" << testing::binary_dir() << "/test_plugins/throwing\"]\n"
                     << "[[variant]]\nname = \"throws\"\ndecoding = { name = \"throwing\", after = 2 }\n";
  std::string dirs;
  for (int i = 0; i < 2; ++i) {
    const Cli s = testing::run_inferlab("run " + cfg.string() + " --shard " + std::to_string(i) + "/2 --out " +
                                        (dir / "shards").string() + " --log quiet");
    EXPECT_EQ(s.code, i == 1 ? 3 : 0) << s.err;  // shard 1 holds the failing variant
  }
  for (const auto& d : fs::directory_iterator(dir / "shards" / "broken")) dirs += " " + d.path().string();
  const Cli m = testing::run_inferlab("merge" + dirs + " --out " + (dir / "merged").string());
  EXPECT_EQ(m.code, 3) << m.err;
  EXPECT_NE(m.err.find("1 of 1 cells, 1 failed: throws repeat 0: throwing decoder: deliberate failure after 2 calls"),
            std::string::npos)
      << m.err;
  EXPECT_NE(m.out.find("1 failed"), std::string::npos) << m.out;

  // An incomplete shard (its cell file gone, as after a kill): refused, unless --allow-partial.
  for (const auto& d : fs::directory_iterator(dir / "shards" / "broken"))
    if (d.path().string().ends_with("-shard0of2")) fs::remove(d.path() / "cells" / "r0-v0.cell");
  const Cli refused = testing::run_inferlab("merge" + dirs + " --out " + (dir / "partial").string());
  EXPECT_EQ(refused.code, 1);
  EXPECT_NE(refused.err.find("1 cell(s) missing (baseline repeat 0)"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("0 of 1 cells"), std::string::npos) << refused.err;
  const Cli partial = testing::run_inferlab("merge" + dirs + " --out " + (dir / "partial").string() + " --allow-partial");
  EXPECT_EQ(partial.code, 3) << partial.err;  // the failed cell still says so
  EXPECT_NE(slurp(dir / "partial" / "summary.md").find("Partial merge: 1 of 2 cells"), std::string::npos);
}

}  // namespace
}  // namespace inferlab::testing
