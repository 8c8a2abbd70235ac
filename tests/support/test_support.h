// Shared test helpers: where the shared data lives, and skipping visibly when it is missing.
#pragma once
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "inferlab/device/cuda_device.h"
#include "inferlab/error.h"

namespace inferlab::testing {

// $INFERLAB_DATA, else <source>/../shared.
std::string data_dir();
// data_dir() + "/" + relative.
std::string data_path(const std::string& relative);
// The plugin directory: the build tree's, or, where that folder does not exist (a packed build
// on another machine), the first entry of $INFERLAB_PLUGIN_PATH.
std::string plugin_dir();
std::string source_dir();
// SmolLM2-135M-Instruct (Q4_1 GGUF) as scripts/fetch_smollm2.sh installs it: $INFERLAB_MODELS, or
// the checkout's models/ folder. Tests skip with INFERLAB_REQUIRE_FILE when it is missing.
std::string smollm2_path();
std::string binary_dir();

// What one run of the `inferlab` program gave: exit code (-1 when killed), stdout, stderr.
struct CliResult {
  int code = -1;
  std::string out, err;
};
// Runs build/bin/inferlab with `args` (shell words), in `cwd` when given, killed after
// timeout_s seconds when > 0; its output goes through temporary files that are removed.
// XDG_CACHE_HOME is a folder of the test process's own, so no user's calibration (or bandwidth
// record) reaches a test.
CliResult run_inferlab(const std::string& args, const std::string& cwd = "", int timeout_s = 0);
// As run_inferlab, with the process's address space capped at address_space_kib (ulimit -v;
// 0 = no cap). A process killed by the timeout exits with 124.
CliResult run_inferlab_limited(const std::string& args, long long address_space_kib, int timeout_s);
// A file's bytes ("" when it cannot be read).
std::string slurp(const std::filesystem::path& path);
// A CSV file as rows of cells (double quotes group commas; no escapes inside quotes).
std::vector<std::vector<std::string>> read_csv(const std::filesystem::path& path);

// The message of the inferlab::Error `f` throws; "" when it throws none.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace inferlab::testing

// Skips the test with a message naming the missing file.
#define INFERLAB_REQUIRE_FILE(path)                                              \
  do {                                                                          \
    if (!std::filesystem::exists(path))                                         \
      GTEST_SKIP() << "data file missing: " << (path)                           \
                   << " (set INFERLAB_DATA to the shared data folder)";         \
  } while (0)

// Skips the test unless a CUDA device is visible, saying why not ("no CUDA device visible:
// cudaGetDeviceCount: cudaErrorNoDevice ...", or that the build has no CUDA).
#define INFERLAB_REQUIRE_CUDA()                                                  \
  do {                                                                          \
    std::string inferlab_cuda_reason_;                                          \
    if (!::inferlab::cuda_device_visible(inferlab_cuda_reason_))                \
      GTEST_SKIP() << "no CUDA device visible: " << inferlab_cuda_reason_;      \
  } while (0)
