// Every experiment the repository ships validates as a new user would run it (`inferlab validate
// FILE` from the checkout), claim files of experiments/repro included; a claim naming an unknown
// quantity is refused when the file is read, naming the allowed ones.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli_runs.h"
#include "test_support.h"

namespace inferlab::testing {
namespace {

namespace fs = std::filesystem;

std::vector<fs::path> shipped_experiments() {
  std::vector<fs::path> files;
  for (const char* dir : {"experiments", "experiments/repro"})
    for (const auto& e : fs::directory_iterator(fs::path(source_dir()) / dir))
      if (e.path().extension() == ".toml") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

TEST(ShippedExperiments, EveryFileValidates) {
  const std::vector<fs::path> files = shipped_experiments();
  ASSERT_GT(files.size(), 30u);
  std::vector<std::string> missing_data;  // a file refused only because shared data or SmolLM2 is absent
  for (const fs::path& f : files) {
    const CliResult r = run_inferlab("validate " + f.string() + " --log warn", source_dir());
    if (r.code != 0 && (r.err.find("file not found: models/") != std::string::npos ||
                        r.err.find("file not found: traces/") != std::string::npos)) {
      missing_data.push_back(f.filename().string() + ": " + r.err);
      continue;
    }
    EXPECT_EQ(r.code, 0) << f << ": " << r.err;
    EXPECT_NE(r.out.find(f.string() + ": ok — "), std::string::npos) << f << ": " << r.out;
  }
  if (!missing_data.empty()) {
    std::string why = std::to_string(missing_data.size()) + " file(s) need data not on this machine:";
    for (const auto& m : missing_data) why += "\n  " + m;
    GTEST_SKIP() << why;
  }
}

TEST(ShippedExperiments, ClaimFilesValidateWithoutPlanningARun) {
  // flash_attention_io.toml has no [model]: its claims need only their own arguments.
  const CliResult io = run_inferlab("validate experiments/repro/flash_attention_io.toml", source_dir());
  EXPECT_EQ(io.code, 0) << io.err;
  EXPECT_NE(io.out.find("claim(s) computed from their own arguments, no run"), std::string::npos) << io.out;
  // kv_cache_size.toml reads LLaMA-2-13B's shape; planning its run would ask for ~50 GiB.
  const CliResult kv = run_inferlab("validate experiments/repro/kv_cache_size.toml --max-memory 1GiB", source_dir());
  EXPECT_EQ(kv.code, 0) << kv.err;
  EXPECT_NE(kv.out.find("computed from the model's shape, no run"), std::string::npos) << kv.out;
}

TEST(ShippedExperiments, AnUnknownClaimQuantityIsRefusedWhenTheFileIsRead) {
  const std::string f = (fresh_dir("claims", "typo") / "typo.toml").string();
  std::ofstream(f) << "[[claim]]\nsource = \"test\"\nquantity = \"kv_slot\"\nexpected = 1\n";
  const CliResult r = run_inferlab("validate " + f);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.err.find(f + ": [claim] quantity = \"kv_slot\"; allowed: kv_bytes_per_token, kv_slots,"), std::string::npos)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
}

}  // namespace
}  // namespace inferlab::testing
