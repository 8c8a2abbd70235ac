// inferlab submit FILE --slurm: a sweep as a Slurm job array plus a dependent merge job
// (slurm.h). The scripts are written into a fresh submission folder and handed to sbatch.
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <boost/program_options.hpp>

#include "commands.h"
#include "inferlab/error.h"
#include "inferlab/run/slurm.h"

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace inferlab::cli {

namespace {

// The first executable `name` on $PATH, or "".
std::string find_on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "");
  for (std::string d; std::getline(dirs, d, ':');) {
    const fs::path p = fs::path(d.empty() ? "." : d) / name;
    if (access(p.c_str(), X_OK) == 0 && !fs::is_directory(p)) return p.string();
  }
  return "";
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs sbatch with `args`; its stdout and stderr go to logs/<tag>.sbatch.{out,err}. Returns the
// job id; throws Error quoting sbatch's stderr when it fails.
std::string run_sbatch(const std::string& sbatch, const std::vector<std::string>& args, const fs::path& logs,
                       const std::string& tag) {
  const fs::path out = logs / (tag + ".sbatch.out"), err = logs / (tag + ".sbatch.err");
  std::vector<std::string> argv_s = {sbatch};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  std::string command;
  for (const auto& a : argv_s) command += (command.empty() ? "" : " ") + a;
  const pid_t pid = fork();
  if (pid < 0) throw Error("submit: cannot start " + sbatch + ": " + std::strerror(errno));
  if (pid == 0) {
    const int o = open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (o < 0 || e < 0 || dup2(o, STDOUT_FILENO) < 0 || dup2(e, STDERR_FILENO) < 0) _exit(126);
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(sbatch.c_str(), argv.data());
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  std::string stderr_text = read_file(err);
  while (!stderr_text.empty() && stderr_text.back() == '\n') stderr_text.pop_back();
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    const std::string how = WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                                              : "signal " + std::to_string(WTERMSIG(status));
    throw Error("submit: `" + command + "` failed (" + how + "): " +
                (stderr_text.empty() ? std::string("no message on stderr") : "\"" + stderr_text + "\""));
  }
  return parse_sbatch_job_id(read_file(out));
}

// <out>/<experiment>/<UTC stamp>-slurm, with -1, -2, ... when taken (not created here).
fs::path submission_folder(const fs::path& out_root, const std::string& experiment) {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
  const fs::path base = out_root / experiment / (std::string(stamp) + "-slurm");
  fs::path d = base;
  for (int n = 1; fs::exists(d); ++n) d = base.string() + "-" + std::to_string(n);
  return d;
}

}  // namespace

int cmd_submit(const std::vector<std::string>& args) {
  po::options_description o("submit options");
  o.add_options()("file", po::value<std::string>(), "experiment TOML")(
      "set", po::value<std::vector<std::string>>()->composing(), "override a key: dotted.key=value (repeatable; every shard gets it)")(
      "repeats", po::value<int>(), "override [experiment] repeats")(
      "slurm", po::bool_switch(), "submit to Slurm with sbatch (the only scheduler)")(
      "array-size", po::value<int>(), "array tasks = shards (default: one per variant x repeat cell, at most 1000)")(
      "partition", po::value<std::string>(), "Slurm partition (default: the cluster's)")(
      "time", po::value<std::string>(), "time limit per job, Slurm's format (e.g. 30, 1:30:00, 2-00)")(
      "out", po::value<std::string>()->default_value("results"), "results root: the submission folder is OUT/<experiment>/<stamp>-slurm")(
      "dry-run", po::bool_switch(), "print the scripts and the sbatch commands; write and submit nothing");
  po::positional_options_description pos;
  pos.add("file", 1);
  po::variables_map vm;
  if (!parse_options(args,
                     "usage: inferlab submit FILE --slurm [--array-size n] [--partition P] [--time T] [--dry-run] [--out DIR]\n"
                     "                       [--set key=value]... [--repeats N]",
                     o, &pos, vm))
    return 0;
  if (!vm.count("file")) throw Error("submit needs an experiment FILE (see inferlab submit --help)");
  if (!vm["slurm"].as<bool>()) throw Error("submit needs a scheduler; allowed: --slurm");
  const Loaded l = load_and_plan(vm);  // a bad config fails here, not in every array task
  const int cells = static_cast<int>(l.plan.variants.size()) * l.plan.repeats;

  SlurmSubmission s;
  // Default: a task per cell, at most Slurm's default MaxArraySize (1001: indices 0 .. 1000).
  s.shards = vm.count("array-size") ? vm["array-size"].as<int>() : std::min(cells, 1000);
  if (s.shards < 1 || s.shards > cells)
    throw Error("--array-size " + std::to_string(s.shards) + ": allowed: 1 .. " + std::to_string(cells) + " (" +
                std::to_string(l.plan.variants.size()) + " variant(s) x " + std::to_string(l.plan.repeats) +
                " repeat(s); a shard with no cell would do nothing)");
  std::error_code ec;
  s.inferlab = fs::read_symlink("/proc/self/exe", ec).string();
  if (ec) throw Error("submit: cannot find the inferlab binary's path (/proc/self/exe): " + ec.message());
  s.experiment_file = fs::absolute(vm["file"].as<std::string>()).lexically_normal().string();
  if (vm.count("set")) s.sets = vm["set"].as<std::vector<std::string>>();
  if (vm.count("repeats")) s.repeats = vm["repeats"].as<int>();
  s.experiment_name = l.spec.name;
  if (vm.count("partition")) s.partition = vm["partition"].as<std::string>();
  if (vm.count("time")) s.time_limit = vm["time"].as<std::string>();
  s.chdir = fs::current_path().string();
  s.workdir = submission_folder(fs::absolute(vm["out"].as<std::string>()).lexically_normal(), l.spec.name).string();
  const std::string array_script = slurm_array_script(s), merge_script = slurm_merge_script(s);  // checks s
  const fs::path array_file = fs::path(s.workdir) / "array.sbatch", merge_file = fs::path(s.workdir) / "merge.sbatch";

  if (vm["dry-run"].as<bool>()) {
    std::cout << "# " << array_file.string() << "\n" << array_script << "\n# " << merge_file.string() << "\n"
              << merge_script << "\n# dry run: nothing written or submitted; inferlab submit would run\n"
              << "#   sbatch --parsable " << array_file.string() << "\n"
              << "#   sbatch --parsable --dependency=afterany:<array job id> " << merge_file.string() << "\n"
              << "# merged results: " << s.merged_dir() << "\n"
              << std::flush;
    return 0;
  }
  const std::string sbatch = find_on_path("sbatch");
  if (sbatch.empty())
    throw Error("submit --slurm: sbatch not found on PATH; run on a Slurm login node or install Slurm's client "
                "(Debian: apt-get install slurm-client); --dry-run prints the scripts without it");

  const fs::path logs = fs::path(s.workdir) / "logs";
  fs::create_directories(logs);
  fs::create_directories(fs::path(s.workdir) / "shards");
  std::ofstream(array_file) << array_script;
  std::ofstream(merge_file) << merge_script;
  const std::string array_job = run_sbatch(sbatch, {"--parsable", array_file.string()}, logs, "array");
  std::string merge_job;
  try {
    merge_job = run_sbatch(sbatch, {"--parsable", "--dependency=afterany:" + array_job, merge_file.string()}, logs, "merge");
  } catch (const Error& e) {
    throw Error(std::string(e.what()) + "\n  the array job " + array_job + " was submitted; once it ends, merge by hand: sbatch " +
                merge_file.string() + " (or scancel " + array_job + ")");
  }
  std::cout << "array job: " << array_job << " (" << s.shards << " task(s), shards 0.." << s.shards - 1 << " of " << cells
            << " cell(s))\nmerge job: " << merge_job << " (after every task of " << array_job << " ends)\n"
            << "logs: " << logs.string() << "\nresults: " << s.merged_dir() << "\n"
            << std::flush;
  return 0;
}

}  // namespace inferlab::cli
