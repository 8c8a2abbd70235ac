// config.toml in a results folder is "fully resolved": loading it again must give the same
// experiment (every workload key, every stack, every plugin parameter), or a rerun from it
// silently measures something else.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "inferlab/experiment/experiment.h"
#include "inferlab/experiment/experiment_toml.h"
#include "inferlab/plugin/registry.h"
#include "inferlab/run/runner.h"
#include "test_support.h"

namespace inferlab {
namespace {

namespace fs = std::filesystem;

std::string write_file(const std::string& name, const std::string& text) {
  fs::path dir = fs::temp_directory_path() / "inferlab_resolved_config_tests";
  fs::create_directories(dir);
  fs::path p = dir / name;
  std::ofstream(p) << text;
  return p.string();
}

void expect_same_length(const LengthSpec& a, const LengthSpec& b, const char* what) {
  EXPECT_EQ(a.dist, b.dist) << what;
  EXPECT_EQ(a.value, b.value) << what;
  EXPECT_EQ(a.min, b.min) << what;
  EXPECT_EQ(a.max, b.max) << what;
  EXPECT_EQ(a.mean, b.mean) << what;
  EXPECT_EQ(a.sigma, b.sigma) << what;
}

TEST(ResolvedConfig, ReloadsToTheSameExperiment) {
  const std::string first = write_file("resolved_in.toml", "[plugins]\npaths = [\"" + testing::plugin_dir() + "\"]\n" + R"([experiment]
name = "rt"
seed = 5
repeats = 2

[model]
preset = "stories260k"

[device]
threads = 2

[workload]
num_requests = 6
arrival = "gamma"
rate = 0.123456789
burstiness = 2.0000001
prompt_len = { dist = "lognormal", mean = 33.3333333, sigma = 0.7777777, min = 2, max = 90 }
output_len = 9
time_scale = 0.00123456789
max_prompt = 80

[slo]
ttft_ms = 12.3456789

[baseline]
scheduler = { name = "sjf", key = "prompt", starvation_s = 0.333333333 }
decoding = { name = "sampling", temperature = 0.7, top_p = 0.9 }
kv = { block_size = 8, reservation = "full" }

[[variant]]
name = "flash"
attention = { name = "flash", tile = 32 }
)");
  Registry reg({testing::plugin_dir()});
  const ExperimentSpec a = load_experiment(first, {});
  const Plan plan = plan_experiment(a, reg, experiment_model_config(a.model));
  const ExperimentSpec b = load_experiment(write_file("resolved_out.toml", resolved_config_toml(plan)), {});

  EXPECT_EQ(b.name, a.name);
  EXPECT_EQ(b.seed, a.seed);
  EXPECT_EQ(b.repeats, a.repeats);
  EXPECT_EQ(b.device.threads, a.device.threads);
  EXPECT_EQ(b.plugin_paths, a.plugin_paths);
  EXPECT_EQ(b.plugin_paths.size(), 1u);
  const WorkloadSpec &wa = a.workload, &wb = b.workload;
  EXPECT_EQ(wb.num_requests, wa.num_requests);
  EXPECT_EQ(wb.arrival, wa.arrival);
  EXPECT_EQ(wb.rate, wa.rate);
  EXPECT_EQ(wb.burstiness, wa.burstiness);
  expect_same_length(wa.prompt_len, wb.prompt_len, "prompt_len");
  expect_same_length(wa.output_len, wb.output_len, "output_len");
  EXPECT_EQ(wb.prefix_block_tokens, wa.prefix_block_tokens);
  EXPECT_EQ(wb.time_scale, wa.time_scale);
  EXPECT_EQ(wb.max_prompt, wa.max_prompt);
  EXPECT_EQ(wb.seed, wa.seed);
  EXPECT_EQ(b.slo.ttft_ms, a.slo.ttft_ms);

  const Plan again = plan_experiment(b, reg, experiment_model_config(b.model));
  ASSERT_EQ(again.variants.size(), plan.variants.size());
  for (std::size_t i = 0; i < plan.variants.size(); ++i) {
    const ResolvedVariant &x = plan.variants[i], &y = again.variants[i];
    EXPECT_EQ(y.name, x.name);
    EXPECT_EQ(y.attention.values(), x.attention.values()) << x.name;
    EXPECT_EQ(y.quantization.values(), x.quantization.values()) << x.name;
    EXPECT_EQ(y.scheduler.values(), x.scheduler.values()) << x.name;
    EXPECT_EQ(y.decoding.values(), x.decoding.values()) << x.name;
    EXPECT_EQ(y.stack.kv.block_size, x.stack.kv.block_size);
    EXPECT_EQ(y.stack.kv.reservation, x.stack.kv.reservation);
  }
}

}  // namespace
}  // namespace inferlab
