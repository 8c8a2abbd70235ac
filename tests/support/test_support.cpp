#include "test_support.h"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace inferlab::testing {

std::string data_dir() {
  if (const char* env = std::getenv("INFERLAB_DATA"); env && *env) return env;
  return (std::filesystem::path(INFERLAB_TEST_SOURCE_DIR).parent_path() / "shared").string();
}

std::string data_path(const std::string& relative) { return data_dir() + "/" + relative; }
std::string plugin_dir() {
  // The build tree's plugins when they are there (never a user's INFERLAB_PLUGIN_PATH in their
  // stead). A packed build (scripts/pack_gpu_build.sh) runs on a machine where that folder does
  // not exist; its wrapper names the packed plugins in INFERLAB_PLUGIN_PATH.
  if (std::filesystem::is_directory(INFERLAB_TEST_PLUGIN_DIR)) return INFERLAB_TEST_PLUGIN_DIR;
  if (const char* env = std::getenv("INFERLAB_PLUGIN_PATH"); env && *env) {
    const std::string first = std::string(env).substr(0, std::string(env).find(':'));
    if (std::filesystem::is_directory(first)) return first;
  }
  return INFERLAB_TEST_PLUGIN_DIR;
}
std::string source_dir() { return INFERLAB_TEST_SOURCE_DIR; }
std::string smollm2_path() {
  const char* env = std::getenv("INFERLAB_MODELS");
  return (env ? std::string(env) : source_dir() + "/models") + "/SmolLM2-135M-Instruct.Q4_1.gguf";
}
std::string binary_dir() { return INFERLAB_TEST_BINARY_DIR; }

std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

namespace {

CliResult run_shell(const std::string& prefix, const std::string& args, int timeout_s) {
  static std::atomic<int> n{0};
  const std::filesystem::path tmp =
      std::filesystem::temp_directory_path() / ("inferlab_cli_" + std::to_string(getpid()) + "_" + std::to_string(n++));
  const std::string out = tmp.string() + ".out", err = tmp.string() + ".err";
  // A cache of this test process's own (calibrations, the bandwidth probe): never the user's,
  // whose calibrations would add pred_* columns to every run (inferlab/results/prediction.h).
  const std::string cache = (std::filesystem::temp_directory_path() / ("inferlab_cli_cache_" + std::to_string(getpid()))).string();
  // A shell assignment, not `env`: some tests run with a PATH that holds no programs.
  std::string cmd = prefix + "XDG_CACHE_HOME=" + cache + " " +
                    (timeout_s > 0 ? "timeout " + std::to_string(timeout_s) + " " : "") + binary_dir() +
                    "/bin/inferlab " + args + " >" + out + " 2>" + err;
  const int status = std::system(cmd.c_str());
  CliResult r{WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
  std::error_code ec;
  std::filesystem::remove(out, ec);
  std::filesystem::remove(err, ec);
  return r;
}

}  // namespace

CliResult run_inferlab(const std::string& args, const std::string& cwd, int timeout_s) {
  return run_shell(cwd.empty() ? "" : "cd '" + cwd + "' && ", args, timeout_s);
}

CliResult run_inferlab_limited(const std::string& args, long long address_space_kib, int timeout_s) {
  return run_shell(address_space_kib > 0 ? "ulimit -v " + std::to_string(address_space_kib) + " && " : "", args, timeout_s);
}

std::vector<std::vector<std::string>> read_csv(const std::filesystem::path& path) {
  std::vector<std::vector<std::string>> rows;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> cells;
    std::string cell;
    bool quoted = false;
    for (char ch : line) {
      if (ch == '"') quoted = !quoted;
      else if (ch == ',' && !quoted) cells.push_back(cell), cell.clear();
      else cell += ch;
    }
    cells.push_back(cell);
    rows.push_back(cells);
  }
  return rows;
}

}  // namespace inferlab::testing
