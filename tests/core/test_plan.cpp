// plan_experiment refuses, before any work, a stack that cannot run as asked: a device no
// plugin runs on (never a silent CPU run) and a plugin's own supports() check.
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>

#include "inferlab/error.h"
#include "inferlab/experiment/experiment.h"
#include "inferlab/plugin/registry.h"
#include "inferlab/run/runner.h"
#include "inferlab/workload/workload.h"
#include "test_support.h"

namespace inferlab {
namespace {

namespace fs = std::filesystem;

// The plan's error ("" when it plans), plugins from the build and `test_plugins` folders of
// tests/plugins.
std::string plan_error(const std::string& name, const std::string& text, const std::string& test_plugins = "") {
  fs::path dir = fs::temp_directory_path() / "inferlab_plan_tests";
  fs::create_directories(dir);
  const fs::path p = dir / name;
  std::ofstream(p) << text;
  std::vector<std::string> dirs = {testing::plugin_dir()};
  if (!test_plugins.empty()) dirs.push_back(testing::binary_dir() + "/test_plugins/" + test_plugins);
  Registry reg(dirs);
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
decoding = "early_exit"
)");
#if INFERLAB_HAVE_CUDA
  // flash has a CUDA path in this build (kernels/cuda); a CPU-only plugin of the variant
  // (early_exit) is still refused, naming the device.
  EXPECT_EQ(e.find("attention 'flash'"), std::string::npos) << e;
  EXPECT_NE(e.find("decoding 'early_exit' cannot run this: does not run on device 'cuda'"), std::string::npos) << e;
#else
  // A build without CUDA refuses the device itself, before asking any plugin.
  EXPECT_NE(e.find("cuda.toml: [device] kind = \"cuda\", but this build has no CUDA ("), std::string::npos) << e;
  EXPECT_NE(e.find("allowed on this machine: cpu, sim"), std::string::npos) << e;
#endif
}

// kv.dtype f16 / bf16 on cuda: each CUDA attention plugin declares it reads them (DeviceImpl
// kv_dtypes) and the CUDA KV storage holds them, so the plan is accepted; int4 (not stored on
// cuda) is still refused by the storage rule, naming the variant and what is allowed.
TEST(Plan, HalfKvFormatsAreAcceptedOnCudaByEveryCudaAttention) {
  for (const char* attention : {"naive", "flash", "split_k"})
    for (const char* dtype : {"f16", "bf16"}) {
      const std::string e = plan_error("half_kv.toml", std::string(R"([model]
preset = "stories260k"
[device]
kind = "cuda"
[baseline]
attention = ")") + attention + "\"\nkv = { dtype = \"" + dtype + "\" }\n");
#if INFERLAB_HAVE_CUDA
      EXPECT_EQ(e, "") << attention << " " << dtype;
#else
      EXPECT_NE(e.find("but this build has no CUDA ("), std::string::npos) << e;
#endif
    }
  const std::string e = plan_error("int4_kv.toml", R"([model]
preset = "stories260k"
[device]
kind = "cuda"
[[variant]]
name = "q"
kv = { dtype = "int4", group_size = 8 }
)");
#if INFERLAB_HAVE_CUDA
  EXPECT_NE(e.find("variant 'q'"), std::string::npos) << e;
  EXPECT_NE(e.find("has no storage on device 'cuda' (allowed there: f32; f16 or bf16 on both sides"), std::string::npos)
      << e;
#else
  EXPECT_NE(e.find("but this build has no CUDA ("), std::string::npos) << e;
#endif
}

TEST(Plan, CalibratedQuantizationWithoutCalibrationIsRefusedWithTheReason) {
  for (const char* method : {"gptq", "awq"}) {
    const std::string e = plan_error(std::string(method) + ".toml", std::string(R"([model]
preset = "stories260k"
[[variant]]
name = "q"
quantization = ")") + method + "\"\n");
    EXPECT_NE(e.find("variant 'q': quantization '" + std::string(method) +
                     "' calibrates on the float model's activations and needs a [calibration] section"),
              std::string::npos)
        << e;
  }
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

// The trace and lengths files are read at plan time: a malformed row is a located error before
// any weights are loaded, for validate and run alike.
TEST(Plan, MalformedTraceAndLengthsFilesAreLocatedErrors) {
  const fs::path dir = fs::temp_directory_path() / "inferlab_plan_tests";
  fs::create_directories(dir);
  std::ofstream(dir / "plan_bad_trace.csv") << "arrival_s,prompt_tokens,output_tokens\n0,10,5\n0.5,abc,5\n";
  std::ofstream(dir / "plan_bad_lengths.csv") << "prompt_tokens,output_tokens\n10,5\n12,-3\n";
  std::string e = plan_error("bad_trace.toml", "[model]\npreset = \"stories260k\"\n[workload]\ntrace = \"plan_bad_trace.csv\"\n");
  EXPECT_NE(e.find((dir / "plan_bad_trace.csv").string() + ":3: prompt_tokens 'abc' is not an integer"), std::string::npos) << e;
  e = plan_error("bad_lengths.toml", "[model]\npreset = \"stories260k\"\n[workload]\nlengths_file = \"plan_bad_lengths.csv\"\n"
                                     "prompt_len = { dist = \"trace\" }\noutput_len = { dist = \"trace\" }\n");
  EXPECT_NE(e.find((dir / "plan_bad_lengths.csv").string() + ":3: output_tokens"), std::string::npos) << e;
}

// Requests longer than the trained context still run, and the summary says how many.
TEST(Plan, RunNotesRequestsPastTheTrainedContext) {
  const fs::path dir = fs::temp_directory_path() / "inferlab_plan_tests";
  fs::create_directories(dir);
  const fs::path p = dir / "long.toml";
  const int ctx = preset_config("stories260k").max_seq_len;
  std::ofstream(p) << "[model]\npreset = \"stories260k\"\n[device]\nthreads = 1\n[workload]\nnum_requests = 8\n"
                   << "prompt_len = { dist = \"uniform\", min = " << ctx - 100 << ", max = " << ctx + 20 << " }\n"
                   << "output_len = 2\n[baseline]\nscheduler = { name = \"continuous\", max_tokens = 4096 }\n";
  Registry reg({testing::plugin_dir()});
  const ExperimentSpec spec = load_experiment(p.string(), {});
  const auto requests = build_workload(spec.workload, preset_config("stories260k").vocab_size);
  std::size_t beyond = 0;
  for (const auto& r : requests) beyond += static_cast<int>(r.prompt.size()) + r.max_output - 1 > ctx;
  ASSERT_GT(beyond, 0u);  // the seed gives a mix: some past, some within
  ASSERT_LT(beyond, requests.size());
  RunOptions opt;
  opt.out_root = (dir / "results").string();
  const RunOutcome outcome = run_plan(plan_experiment(spec, reg, experiment_model_config(spec.model)), reg, opt);
  EXPECT_EQ(outcome.rows, 1u);
  EXPECT_EQ(outcome.failed, 0u);
  std::ifstream in(fs::path(outcome.dir) / "summary.md");
  std::stringstream md;
  md << in.rdbuf();
  EXPECT_NE(md.str().find("context: " + std::to_string(beyond) + " of 8 requests run past the model's trained context of " +
                          std::to_string(ctx) + " tokens"),
            std::string::npos)
      << md.str();
}

// run_plan counts its rows and failed rows: `inferlab run` exits 3 on failed > 0.
TEST(Plan, RunCountsFailedRows) {
  const fs::path dir = fs::temp_directory_path() / "inferlab_plan_tests";
  fs::create_directories(dir);
  const fs::path p = dir / "failing.toml";
  std::ofstream(p) << "[experiment]\nrepeats = 2\n[model]\npreset = \"stories260k\"\n[device]\nthreads = 1\n"
                   << "[workload]\nnum_requests = 2\nprompt_len = 4\noutput_len = 4\n"
                   << "[[variant]]\nname = \"broken\"\ndecoding = { name = \"throwing\", after = 1 }\n";
  Registry reg({testing::plugin_dir(), testing::binary_dir() + "/test_plugins/throwing"});
  const ExperimentSpec spec = load_experiment(p.string(), {});
  RunOptions opt;
  opt.out_root = (dir / "results").string();
  const RunOutcome outcome = run_plan(plan_experiment(spec, reg, experiment_model_config(spec.model)), reg, opt);
  EXPECT_EQ(outcome.rows, 4u);  // 2 variants x 2 repeats
  EXPECT_EQ(outcome.failed, 2u);
  EXPECT_TRUE(fs::exists(fs::path(outcome.dir) / "metrics.csv"));
}

// The simulator charges an attention or quantization by what it declares (docs/simulation.md,
// "What a strategy costs"); one that declares nothing is refused on sim, and runs on the CPU.
TEST(Plan, StrategiesTheSimulatorCannotChargeAreRefusedOnSimWithTheReason) {
  const auto with = [](const std::string& device, const std::string& variant) {
    return "[model]\npreset = \"stories260k\"\n[device]\nkind = \"" + device +
           "\"\n[workload]\nnum_requests = 2\n[[variant]]\nname = \"v\"\n" + variant + "\n";
  };
  const std::string att = plan_error("undeclared.toml", with("sim", "attention = \"undeclared_attention\""), "undeclared");
  EXPECT_NE(att.find("attention 'undeclared_attention' cannot run this"), std::string::npos) << att;
  EXPECT_NE(att.find("declares no memory traffic"), std::string::npos) << att;
  const std::string quant =
      plan_error("undeclared.toml", with("sim", "quantization = \"undeclared_quantization\""), "undeclared");
  EXPECT_NE(quant.find("quantization 'undeclared_quantization' cannot run this"), std::string::npos) << quant;
  EXPECT_NE(quant.find("declares no arithmetic"), std::string::npos) << quant;
  EXPECT_EQ(plan_error("undeclared.toml", with("cpu", "attention = \"undeclared_attention\""), "undeclared"), "");
  EXPECT_EQ(plan_error("undeclared.toml", with("cpu", "quantization = \"undeclared_quantization\""), "undeclared"), "");
}

}  // namespace
}  // namespace inferlab
