// Helpers of the tests that run experiments through the `inferlab` program and read the folders
// it writes (test_end_to_end, test_reliability, test_results_tools, test_run_folder, test_submit).
#pragma once
#include <unistd.h>

#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "test_support.h"

namespace inferlab::testing {

using Cli = CliResult;
inline Cli run_cli(const std::string& args) { return run_inferlab(args); }

// An empty folder <tmp>/inferlab_<prefix>_<name>_<pid> (whatever was there is removed).
inline std::filesystem::path fresh_dir(const std::string& prefix, const std::string& name) {
  const std::filesystem::path d =
      std::filesystem::temp_directory_path() / ("inferlab_" + prefix + "_" + name + "_" + std::to_string(getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

// The one folder under root/experiment whose name ends in `suffix` (a test failure when there
// is not exactly one; then an empty path).
inline std::filesystem::path only_run_dir(const std::filesystem::path& root, const std::string& experiment,
                                          const std::string& suffix = "") {
  std::vector<std::filesystem::path> dirs;
  for (const auto& d : std::filesystem::directory_iterator(root / experiment)) {
    const std::string n = d.path().filename().string();
    if (n.size() >= suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0)
      dirs.push_back(d.path());
  }
  EXPECT_EQ(dirs.size(), 1u) << root / experiment << " " << suffix;
  return dirs.empty() ? std::filesystem::path() : dirs.front();
}

// (variant, repeat) -> (status, tokens_hash) of every cell of dir/metrics.csv.
inline std::map<std::pair<std::string, std::string>, std::pair<std::string, std::string>> cells(
    const std::filesystem::path& dir) {
  auto csv = read_csv(dir / "metrics.csv");
  std::map<std::pair<std::string, std::string>, std::pair<std::string, std::string>> m;
  for (std::size_t r = 1; r < csv.size(); ++r) m[{csv[r][0], csv[r][1]}] = {csv[r][2], csv[r].back()};
  return m;
}

// (variant, repeat, request id, prompt tokens, output tokens, output hash, status) of every
// request of dir/requests.csv, joined by '|'.
inline std::vector<std::string> request_keys(const std::filesystem::path& dir) {
  auto csv = read_csv(dir / "requests.csv");
  std::vector<std::string> keys;
  for (std::size_t r = 1; r < csv.size(); ++r)
    keys.push_back(csv[r][0] + "|" + csv[r][1] + "|" + csv[r][2] + "|" + csv[r][6] + "|" + csv[r][7] + "|" +
                   csv[r][12] + "|" + csv[r][13]);
  return keys;
}

}  // namespace inferlab::testing
