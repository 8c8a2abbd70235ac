// Experiment files: every error names file:line:col and what is allowed; --set, variants, sweeps.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "inferlab/error.h"
#include "inferlab/experiment/experiment.h"

namespace inferlab {
namespace {

namespace fs = std::filesystem;

std::string write_toml(const std::string& name, const std::string& text) {
  fs::path dir = fs::temp_directory_path() / "inferlab_experiment_tests";
  fs::create_directories(dir);
  fs::path p = dir / name;
  std::ofstream(p) << text;
  return p.string();
}

std::string error_of(const std::string& path, const std::vector<std::string>& sets = {}) {
  try {
    load_experiment(path, sets);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

const char* kBase = R"([experiment]
name = "t"
seed = 7
repeats = 2

[model]
preset = "stories260k"

[workload]
num_requests = 4
prompt_len = 8
output_len = { dist = "uniform", min = 2, max = 6 }

[baseline]
attention = "naive"
scheduler = { name = "continuous", max_batch = 4 }
kv = { block_size = 8 }
)";

TEST(Experiment, ParsesSectionsAndDefaults) {
  auto spec = load_experiment(write_toml("base.toml", kBase), {});
  EXPECT_EQ(spec.name, "t");
  EXPECT_EQ(spec.seed, 7u);
  EXPECT_EQ(spec.repeats, 2);
  EXPECT_EQ(spec.model.preset, "stories260k");
  EXPECT_EQ(spec.model.seed, 7u);  // inherits the experiment seed
  EXPECT_EQ(spec.workload.num_requests, 4);
  EXPECT_EQ(spec.workload.prompt_len.dist, "fixed");
  EXPECT_EQ(spec.workload.prompt_len.value, 8);
  EXPECT_EQ(spec.workload.output_len.dist, "uniform");
  EXPECT_EQ(spec.workload.output_len.max, 6);
  ASSERT_EQ(spec.variants.size(), 1u);
  const Stack& s = spec.variants[0].stack;
  EXPECT_EQ(s.attention.name, "naive");
  EXPECT_EQ(s.quantization.name, "none");  // default
  EXPECT_EQ(s.scheduler.name, "continuous");
  EXPECT_EQ(std::get<std::int64_t>(s.scheduler.params.at("max_batch")), 4);
  EXPECT_EQ(s.kv.block_size, 8);
  EXPECT_NE(s.scheduler.where.find("base.toml:16:13"), std::string::npos) << s.scheduler.where;
}

TEST(Experiment, VariantsMergeOrReplaceChoices) {
  std::string text = std::string(kBase) + R"(
[[variant]]
name = "bigger"
scheduler = { max_batch = 8 }

[[variant]]
name = "static"
scheduler = "static"
attention = { name = "flash", tile = 16 }
)";
  auto spec = load_experiment(write_toml("variants.toml", text), {});
  ASSERT_EQ(spec.variants.size(), 3u);
  EXPECT_EQ(spec.variants[1].stack.scheduler.name, "continuous");
  EXPECT_EQ(std::get<std::int64_t>(spec.variants[1].stack.scheduler.params.at("max_batch")), 8);
  EXPECT_EQ(spec.variants[2].stack.scheduler.name, "static");
  EXPECT_TRUE(spec.variants[2].stack.scheduler.params.empty());  // a new plugin drops old params
  EXPECT_EQ(spec.variants[2].stack.attention.name, "flash");
  EXPECT_EQ(spec.variants[2].stack.kv.block_size, 8);  // inherited from the baseline
}

TEST(Experiment, SweepIsACartesianGrid) {
  std::string text = std::string(kBase) + R"(
[sweep]
"scheduler.max_batch" = [1, 2]
"kv.block_size" = [4, 16, 32]
)";
  auto spec = load_experiment(write_toml("sweep.toml", text), {});
  ASSERT_EQ(spec.variants.size(), 7u);
  // Axes vary in key order (TOML tables are unordered); the last axis varies fastest.
  EXPECT_EQ(spec.variants[1].name, "kv.block_size=4,scheduler.max_batch=1");
  EXPECT_EQ(spec.variants[2].name, "kv.block_size=4,scheduler.max_batch=2");
  EXPECT_EQ(spec.variants[6].name, "kv.block_size=32,scheduler.max_batch=2");
  EXPECT_EQ(spec.variants[6].stack.kv.block_size, 32);
  EXPECT_EQ(std::get<std::int64_t>(spec.variants[6].stack.scheduler.params.at("max_batch")), 2);
}

TEST(Experiment, SetOverridesAnyDottedKey) {
  auto spec = load_experiment(write_toml("set.toml", kBase),
                              {"baseline.attention=flash", "experiment.repeats=1", "workload.num_requests=9",
                               "baseline.scheduler.max_batch=2", "baseline.decoding.temperature=0.5",
                               "workload.arrival=poisson"});
  EXPECT_EQ(spec.repeats, 1);
  EXPECT_EQ(spec.workload.num_requests, 9);
  EXPECT_EQ(spec.workload.arrival, "poisson");
  EXPECT_EQ(spec.variants[0].stack.attention.name, "flash");
  EXPECT_EQ(std::get<std::int64_t>(spec.variants[0].stack.scheduler.params.at("max_batch")), 2);
  EXPECT_EQ(spec.variants[0].stack.decoding.name, "sampling");  // a string choice became a table
  EXPECT_DOUBLE_EQ(std::get<double>(spec.variants[0].stack.decoding.params.at("temperature")), 0.5);
}

TEST(Experiment, ErrorsNameFileLineColumnAndAllowed) {
  struct Case {
    std::string text, expect1, expect2;
  };
  const std::vector<Case> cases = {
      {"[model]\npreset = \"stories260k\"\n[workload]\nnum_request = 3\n", ":4:1: unknown key 'num_request' in [workload]",
       "allowed: trace, format, num_requests"},
      {"[model]\npreset = \"stories260k\"\n[workload]\nnum_requests = \"three\"\n", ":4:16: 'num_requests' must be an integer",
       "a string"},
      {"[model]\npreset = \"stories260k\"\n[modle]\n", ":3:2: unknown key 'modle' in the experiment file", "allowed: experiment, model"},
      {"[model]\npreset = \"stories260k\"\n[workload]\narrival = \"bursty\"\n", ":4:11:", "allowed: all_at_once, poisson, gamma"},
      {"[model]\npreset = \"stories260k\"\n[baseline]\nkv = { block_size = 0 }\n", ":4:21:", "out of range [1,"},
      {"[model]\npreset = \"stories260k\"\n[baseline]\nkv = { reservation = \"some\" }\n", ":4:", "allowed: on_demand, full"},
      {"[model]\npreset = \"stories260k\"\npath = \"y\"\n", "file not found", "y"},
      {"[workload]\nnum_requests = 3\n", "missing [model] section", ""},
      {"[model]\npreset = \"stories260k\"\n[experiment\n", ":3:", ""},  // TOML syntax error
      {"[model]\npreset = \"stories260k\"\n[[variant]]\nattention = \"flash\"\n", ":3:1: [[variant]] needs a 'name'", ""},
      {"[model]\npreset = \"stories260k\"\n[sweep]\n\"scheduler.max_batch\" = 4\n", ":4:", "non-empty array"},
      {"[model]\npreset = \"stories260k\"\n[sweep]\n\"sched.max_batch\" = [4]\n", "must start with one of", "scheduler"},
      {"[model]\npreset = \"stories260k\"\n[baseline]\nattention = 3\n", ":4:13: 'attention' must be a table", ""},
      {"[model]\npreset = \"stories260k\"\nn_layers = 9\n", ":3:12: n_layers = 9, but preset 'stories260k' has 5 layers", "allowed: 1..5"},
      {"[model]\npreset = \"stories260k\"\nformat = \"gguf\"\n", ":3:10: [model] format applies to a checkpoint", ""},
      {"[model]\npreset = \"nosuch\"\n", "unknown", "stories260k"},
      {"[model]\npreset = \"stories260k\"\n[baseline]\nkv = { enabled = false, prefix_caching = true }\n", ":4:6:",
       "cannot be combined with kv.enabled = false"},
  };
  for (std::size_t i = 0; i < cases.size(); ++i) {
    std::string path = write_toml("bad" + std::to_string(i) + ".toml", cases[i].text);
    std::string msg = error_of(path);
    EXPECT_NE(msg.find(path), std::string::npos) << "case " << i << ": " << msg;
    EXPECT_NE(msg.find(cases[i].expect1), std::string::npos) << "case " << i << ": " << msg;
    EXPECT_NE(msg.find(cases[i].expect2), std::string::npos) << "case " << i << ": " << msg;
  }
}

// [device] fuse: a boolean for cpu and cuda (refused at its line with kind = "sim"), on by
// default on cpu (the fast path), off on cuda and sim, and switched by --set without editing the file.
TEST(Experiment, DeviceFuseIsABooleanForCpuAndCuda) {
  EXPECT_TRUE(load_experiment(write_toml("fuse_default.toml", kBase), {}).device.fuse);
  EXPECT_TRUE(load_experiment(write_toml("fuse_cpu.toml", std::string(kBase) + "[device]\nthreads = 1\n"), {}).device.fuse);
  EXPECT_FALSE(load_experiment(write_toml("fuse_cpu_set_off.toml", kBase), {"device.fuse=false"}).device.fuse);
  EXPECT_FALSE(load_experiment(write_toml("fuse_cuda_default.toml", std::string(kBase) + "[device]\nkind = \"cuda\"\n"), {})
                   .device.fuse);
  EXPECT_FALSE(load_experiment(write_toml("fuse_sim_default.toml", kBase), {"device.kind=sim"}).device.fuse);
  const std::string path = write_toml("fuse_off.toml", std::string(kBase) + "[device]\nkind = \"cpu\"\nfuse = false\n");
  EXPECT_FALSE(load_experiment(path, {}).device.fuse);
  EXPECT_TRUE(load_experiment(path, {"device.fuse=true"}).device.fuse);
  EXPECT_TRUE(
      load_experiment(write_toml("fuse_cuda.toml", std::string(kBase) + "[device]\nkind = \"cuda\"\nfuse = true\n"), {})
          .device.fuse);
  const std::string sim =
      error_of(write_toml("fuse_sim.toml", std::string(kBase) + "[device]\nkind = \"sim\"\nfuse = true\n"));
  EXPECT_NE(sim.find("fuse_sim.toml:20:8: [device] fuse = true runs on cpu and cuda"), std::string::npos) << sim;
  const std::string msg = error_of(write_toml("fuse_str.toml", std::string(kBase) + "[device]\nfuse = \"yes\"\n"));
  EXPECT_NE(msg.find(":19:8: 'fuse' must be true or false"), std::string::npos) << msg;
}

// [device] cuda_graphs: a boolean, CUDA only (refused at its line with kind = "cpu" or "sim",
// naming the key and what is allowed there), off by default; accepted with kind = "cuda" (parsing
// needs no GPU) and written back into the resolved config.
TEST(Experiment, DeviceCudaGraphsIsABooleanForCudaOnly) {
  EXPECT_FALSE(load_experiment(write_toml("graphs_default.toml", kBase), {}).device.cuda_graphs);
  const std::string path =
      write_toml("graphs_on.toml", std::string(kBase) + "[device]\nkind = \"cuda\"\ncuda_graphs = true\n");
  EXPECT_TRUE(load_experiment(path, {}).device.cuda_graphs);
  EXPECT_FALSE(load_experiment(path, {"device.cuda_graphs=false"}).device.cuda_graphs);
  for (const char* kind : {"cpu", "sim"}) {
    const std::string msg =
        error_of(write_toml(std::string("graphs_") + kind + ".toml",
                            std::string(kBase) + "[device]\nkind = \"" + kind + "\"\ncuda_graphs = true\n"));
    EXPECT_NE(msg.find("graphs_" + std::string(kind) + ".toml:20:15: [device] cuda_graphs = true is cuda-only"),
              std::string::npos)
        << msg;
    EXPECT_NE(msg.find("allowed there: cuda_graphs = false"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
  const std::string msg =
      error_of(write_toml("graphs_str.toml", std::string(kBase) + "[device]\ncuda_graphs = 1\n"));
  EXPECT_NE(msg.find(":19:15: 'cuda_graphs' must be true or false"), std::string::npos) << msg;
}

// [device] kind is parsed into DeviceKind when the file is read: a name outside the enum is
// refused at its line, naming the key and the allowed kinds; --set reaches the same parser.
TEST(Experiment, DeviceKindIsParsedOnceWithItsAllowedValues) {
  EXPECT_EQ(load_experiment(write_toml("kind_default.toml", kBase), {}).device.kind, DeviceKind::kCpu);
  EXPECT_EQ(load_experiment(write_toml("kind_sim.toml", std::string(kBase) + "[device]\nkind = \"sim\"\n"), {})
                .device.kind,
            DeviceKind::kSim);
  const std::string msg = error_of(write_toml("kind_gpu.toml", std::string(kBase) + "[device]\nkind = \"gpu\"\n"));
  EXPECT_NE(msg.find("kind_gpu.toml:19:8: [device] kind = \"gpu\"; allowed: cpu, cuda, sim"), std::string::npos) << msg;
  const std::string set = error_of(write_toml("kind_set.toml", kBase), {"device.kind=CPU"});
  EXPECT_NE(set.find("[device] kind = \"CPU\"; allowed: cpu, cuda, sim"), std::string::npos) << set;
}

TEST(Experiment, BadSetOverrides) {
  std::string path = write_toml("set_bad.toml", kBase);
  EXPECT_NE(error_of(path, {"novalue"}).find("expected key=value"), std::string::npos);
  EXPECT_NE(error_of(path, {"workload.nme=3"}).find("unknown key 'nme'"), std::string::npos);
  EXPECT_NE(error_of(path, {"workload.num_requests=abc"}).find("(--set)"), std::string::npos);
}

TEST(Experiment, SetWithAHugeArrayIndexIsAnErrorNotAnOverflow) {
  std::string path = write_toml("set_huge_index.toml", std::string(kBase) + "[[variant]]\nname = \"v\"\n");
  EXPECT_NE(error_of(path, {"variant.99999999999999999999.name=x"}).find("has no table at index 99999999999999999999"),
            std::string::npos);
  EXPECT_NE(error_of(path, {"variant.1.name=x"}).find("has no table at index 1"), std::string::npos);
  EXPECT_EQ(error_of(path, {"variant.0.name=x"}), "");
}

TEST(Experiment, FloatBoundInTheErrorIsTheRealOne) {
  std::string path = write_toml("float_bound.toml", kBase);
  EXPECT_NE(error_of(path, {"workload.rate=0"}).find("'rate' = 0 is out of range; allowed: 1e-06 .. 1e+09"), std::string::npos)
      << error_of(path, {"workload.rate=0"});
  EXPECT_NE(error_of(path, {"workload.time_scale=-1"}).find("'time_scale' = -1 is out of range; allowed: 0 .. 1e+06"),
            std::string::npos);
}

TEST(Experiment, QualityTextMustHaveTextAndContextMustPredictSomething) {
  std::string empty = write_toml("empty.txt", "");
  std::string text = write_toml("some.txt", "Once upon a time");
  std::string path = write_toml("quality_bad.toml", std::string(kBase) + "[quality]\ntext = \"" + empty + "\"\n");
  std::string msg = error_of(path);
  EXPECT_NE(msg.find(path + ":19:8: [quality] text " + empty + " is empty or not a regular file"), std::string::npos) << msg;
  EXPECT_NE(error_of(path, {"quality.text=\"/dev/null\""}).find("is a character device, not a regular file"), std::string::npos);
  EXPECT_NE(error_of(path, {"quality.text=\"/tmp\""}).find("is a directory, not a regular file"), std::string::npos);
  EXPECT_EQ(error_of(path, {"quality.text=\"" + text + "\""}), "");
  msg = error_of(path, {"quality.text=\"" + text + "\"", "quality.context=1"});
  EXPECT_NE(msg.find("'context' = 1 is out of range; allowed: 0 (the model's context) or >= 2"), std::string::npos) << msg;
  EXPECT_EQ(error_of(path, {"quality.text=\"" + text + "\"", "quality.context=2"}), "");
}

TEST(Experiment, CalibrationSectionParsesAndNamesItsTextOnError) {
  std::string text = write_toml("calib.txt", std::string(600, 'a'));
  std::string path = write_toml("calib.toml", std::string(kBase) + "[calibration]\ntext = \"" + text +
                                                  "\"\ntokens = 256\nseq_len = 64\n");
  auto spec = load_experiment(path, {});
  EXPECT_TRUE(spec.calibration.enabled);
  EXPECT_EQ(spec.calibration.text, text);
  EXPECT_EQ(spec.calibration.tokens, 256);
  EXPECT_EQ(spec.calibration.seq_len, 64);
  EXPECT_EQ(spec.calibration.seed, 7u);  // the experiment's
  EXPECT_FALSE(load_experiment(write_toml("nocalib.toml", kBase), {}).calibration.enabled);
  // Missing file: named, with where it was looked for.
  std::string msg = error_of(path, {"calibration.text=\"no_such_calibration.txt\""});
  EXPECT_NE(msg.find("no_such_calibration.txt"), std::string::npos) << msg;
  // Empty, and too short for the tokens asked: the file is named with the line of the key.
  std::string empty = write_toml("calib_empty.txt", "");
  msg = error_of(path, {"calibration.text=\"" + empty + "\""});
  EXPECT_NE(msg.find("[calibration] text " + empty + " is empty or not a regular file"), std::string::npos) << msg;
  msg = error_of(path, {"calibration.tokens=4096"});
  EXPECT_NE(msg.find(path + ":19:8: [calibration] text " + text + " has 600 bytes, too short for tokens = 4096"),
            std::string::npos)
      << msg;
  msg = error_of(write_toml("calib_notext.toml", std::string(kBase) + "[calibration]\ntokens = 8\n"));
  EXPECT_NE(msg.find("[calibration] needs 'text'"), std::string::npos) << msg;
  msg = error_of(path, {"calibration.seq_len=1"});
  EXPECT_NE(msg.find("'seq_len' = 1 is out of range"), std::string::npos) << msg;
  msg = error_of(path, {"calibration.samples=3"});
  EXPECT_NE(msg.find("samples"), std::string::npos) << msg;
}

TEST(Experiment, LengthTablesMustNotFallBackToDefaultsSilently) {
  std::string path = write_toml("length_tables.toml", kBase);
  std::string msg = error_of(path, {"workload.prompt_len={ dist = \"uniform\", min = 5 }"});
  EXPECT_NE(msg.find("prompt_len with dist = \"uniform\" needs 'max'"), std::string::npos) << msg;
  msg = error_of(path, {"workload.prompt_len={ min = 8, max = 64 }"});
  EXPECT_NE(msg.find("prompt_len table needs 'dist'; allowed: fixed, uniform"), std::string::npos) << msg;
  // A table always names its dist and that dist's parameters (issue 42): no silent defaults.
  msg = error_of(path, {"workload.prompt_len={ value = 8 }"});
  EXPECT_NE(msg.find("prompt_len table needs 'dist'"), std::string::npos) << msg;
  EXPECT_EQ(error_of(path, {"workload.prompt_len={ dist = \"fixed\", value = 8 }"}), "");
  EXPECT_EQ(error_of(path, {"workload.prompt_len={ dist = \"uniform\", min = 5, max = 9 }"}), "");
  msg = error_of(path, {"workload.prompt_len={ dist = \"lognormal\", mean = 20 }"});
  EXPECT_NE(msg.find("needs 'sigma'"), std::string::npos) << msg;
  EXPECT_EQ(error_of(path, {"workload.prompt_len={ dist = \"lognormal\", mean = 20, sigma = 0.5 }"}), "");
}

TEST(Experiment, VariantNameMustBeAName) {
  std::string path = write_toml("variant_names.toml", std::string(kBase) + "[[variant]]\nname = \"\"\n");
  std::string msg = error_of(path);
  EXPECT_NE(msg.find(path + ":19:8: [[variant]] name '' is empty; allowed: 1 to 128 letters, digits and - _ . + ="),
            std::string::npos)
      << msg;
  EXPECT_NE(error_of(path, {"variant.0.name=\"a\\nb\""}).find("has '\\x0a' at position 2"), std::string::npos);
  EXPECT_NE(error_of(path, {"variant.0.name=\"flash, int8\""}).find("has ',' at position 6"), std::string::npos);
  EXPECT_EQ(error_of(path, {"variant.0.name=\"flash+int8=g32\""}), "");
}

TEST(Experiment, DataPathsResolveAgainstTheDataRoot) {
  std::string msg;
  try {
    resolve_data_path("no/such/file.csv", "/tmp", "x.toml:1:1");
  } catch (const Error& e) {
    msg = e.what();
  }
  EXPECT_NE(msg.find("x.toml:1:1: file not found: no/such/file.csv"), std::string::npos) << msg;
  EXPECT_NE(msg.find("INFERLAB_DATA"), std::string::npos) << msg;
}

}  // namespace
}  // namespace inferlab
