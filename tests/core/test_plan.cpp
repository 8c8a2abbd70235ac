// plan_experiment refuses, before any work, a stack that cannot run as asked: a device no
// plugin runs on (never a silent CPU run) and a plugin's own supports() check.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "inferlab/error.h"
#include "inferlab/experiment.h"
#include "inferlab/registry.h"
#include "inferlab/runner.h"
#include "test_support.h"

namespace inferlab {
namespace {

namespace fs = std::filesystem;

std::string plan_error(const std::string& name, const std::string& text) {
  fs::path dir = fs::temp_directory_path() / "inferlab_plan_tests";
  fs::create_directories(dir);
  const fs::path p = dir / name;
  std::ofstream(p) << text;
  Registry reg({testing::plugin_dir()});
  const ExperimentSpec spec = load_experiment(p.string(), {});
  try {
    plan_experiment(spec, reg, experiment_model_config(spec.model));
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Plan, CudaDeviceIsRefusedByCpuOnlyPlugins) {
  const std::string e = plan_error("cuda.toml", R"([model]
preset = "stories260k"
[device]
kind = "cuda"
[baseline]
attention = "flash"
)");
  EXPECT_NE(e.find("cuda.toml:6:13: variant 'baseline': attention 'flash' cannot run this: does not run on device 'cuda'"),
            std::string::npos)
      << e;
}

TEST(Plan, PluginSupportsCheckIsAsked) {
  const std::string e = plan_error("ngram.toml", R"([model]
preset = "stories260k"
[[variant]]
name = "pld"
decoding = { name = "prompt_lookup", min_ngram = 4, max_ngram = 2 }
)");
  EXPECT_NE(e.find("variant 'pld': decoding 'prompt_lookup' cannot run this: min_ngram must be <= max_ngram"),
            std::string::npos)
      << e;
}

}  // namespace
}  // namespace inferlab
