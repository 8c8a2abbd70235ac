// Every key of an experiment file acts or is refused. The parser's key list
// (experiment_keys.h) is the one docs/experiment-format.md documents (each documented table
// follows a `<!-- keys: TABLE -->` marker) and the one the parser checks against; and every key,
// walked over every device kind, either changes the resolved config (config.toml: what a run
// records and a resume reruns) or is refused with an error naming it. A key that is parsed and
// then ignored fails the walk; a new key without a probe here fails it too.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include <unistd.h>

#include <gtest/gtest.h>

#include "inferlab/error.h"
#include "inferlab/experiment/experiment.h"
#include "inferlab/experiment/experiment_keys.h"
#include "inferlab/experiment/experiment_toml.h"
#include "inferlab/plugin/registry.h"
#include "inferlab/run/runner.h"
#include "test_support.h"

namespace inferlab {
namespace {

namespace fs = std::filesystem;

fs::path scratch() {
  static const fs::path dir = [] {
    fs::path d = fs::temp_directory_path() / ("inferlab_keys_" + std::to_string(::getpid()));
    fs::create_directories(d);
    return d;
  }();
  return dir;
}

std::string write(const std::string& name, const std::string& text) {
  const fs::path p = scratch() / name;
  std::ofstream(p) << text;
  return p.string();
}

// The keys each `<!-- keys: TABLE -->` marker's markdown table documents: every `name` in the
// first cell of its rows.
std::map<std::string, std::set<std::string>> documented_keys() {
  std::ifstream in(testing::source_dir() + "/docs/experiment-format.md");
  std::map<std::string, std::set<std::string>> out;
  std::string line, table;
  bool in_rows = false;
  while (std::getline(in, line)) {
    if (line.rfind("<!-- keys: ", 0) == 0) {
      table = line.substr(11, line.find(" -->") - 11);
      out[table];
      in_rows = false;
      continue;
    }
    if (table.empty()) continue;
    if (line.rfind("|", 0) != 0) {
      if (in_rows) table.clear();  // the table ended
      continue;
    }
    in_rows = true;
    const std::string cell = line.substr(1, line.find('|', 1) - 1);
    if (cell.find("---") != std::string::npos || cell.find("key") == 1) continue;  // header, rule
    for (std::size_t a = cell.find('`'); a != std::string::npos; a = cell.find('`', a + 1)) {
      const std::size_t b = cell.find('`', a + 1);
      out[table].insert(cell.substr(a + 1, b - a - 1));
      a = b;
    }
  }
  return out;
}

TEST(ExperimentKeys, TheDocDocumentsExactlyTheParsersKeys) {
  const auto doc = documented_keys();
  for (const ExperimentTable& t : experiment_tables()) {
    ASSERT_TRUE(doc.count(t.name)) << "docs/experiment-format.md has no <!-- keys: " << t.name << " --> table";
    const std::set<std::string> parsed(t.keys.begin(), t.keys.end());
    for (const std::string& k : parsed) EXPECT_TRUE(doc.at(t.name).count(k)) << t.name << "." << k << " is parsed but not documented";
    for (const std::string& k : doc.at(t.name)) EXPECT_TRUE(parsed.count(k)) << t.name << "." << k << " is documented but not parsed";
  }
  for (const auto& [name, keys] : doc) EXPECT_NO_THROW(experiment_keys(name)) << "documented table " << name;
}

const char* kBase = R"([experiment]
name = "walk"

[model]
preset = "stories260k"

[workload]
num_requests = 2
prompt_len = 8
output_len = 4

[baseline]
scheduler = "continuous"

[[variant]]
name = "v"
)";

std::string base_file(const std::string& kind) {
  return write("walk_" + kind + ".toml", std::string(kBase) + "\n[device]\nkind = \"" + kind + "\"\n");
}

// A table's parser refuses an unknown key listing exactly experiment_keys(table) as allowed:
// the list the doc is checked against is the one the parser uses.
TEST(ExperimentKeys, EachTableRefusesAnUnknownKeyListingTheKeyList) {
  const std::map<std::string, std::vector<std::string>> where = {
      {"file", {"zz=1"}},
      {"experiment", {"experiment.zz=1"}},
      {"model", {"model.zz=1"}},
      {"device", {"device.zz=1"}},
      {"workload", {"workload.zz=1"}},
      {"length", {"workload.prompt_len={ dist = \"fixed\", zz = 1 }"}},
      {"slo", {"slo.zz=1"}},
      {"quality", {"quality.zz=1"}},
      {"calibration", {"calibration.zz=1"}},
      {"plugins", {"plugins.zz=1"}},
      {"stack", {"baseline.zz=1"}},
      {"variant", {"variant.0.zz=1"}},
      {"kv", {"baseline.kv.zz=1"}},
      {"rule", {"baseline.quantization={ name = \"int8\", rules = [{ layers = [0], method = \"none\", zz = 1 }] }"}},
  };
  for (const ExperimentTable& t : experiment_tables()) {
    ASSERT_TRUE(where.count(t.name)) << "no unknown-key probe for table " << t.name;
    std::string allowed;
    for (const std::string& k : t.keys) allowed += (allowed.empty() ? "" : ", ") + k;
    try {
      load_experiment(base_file("cpu"), where.at(t.name));
      ADD_FAILURE() << t.name << ": unknown key 'zz' accepted";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("unknown key 'zz'"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("allowed: " + allowed), std::string::npos) << t.name << ": " << e.what();
    }
  }
}

// One way to exercise a key: `context` (--set overrides that make the key meaningful, or not)
// and `set`, the key itself. The key acts if the resolved config with context + set differs from
// the one with context alone; a refusal must name the key (or its table).
struct Probe {
  std::string key;  // "table.key" of experiment_tables()
  std::vector<std::string> context;
  std::string set;
};

std::vector<Probe> probes() {
  const std::string text = write("text.txt", std::string(4000, 'a') + "\n");
  const std::string text2 = write("text2.txt", std::string(4000, 'b') + "\n");
  const std::string trace = write("trace.csv", "arrival_s,prompt_tokens,output_tokens\n0,8,4\n0.5,8,4\n");
  const std::string burst = write("burst.csv", "Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
                                               "0,ChatGPT,8,4,12,Conversation log\n1,GPT-4,8,4,12,API log\n");
  const std::string lengths = write("lengths.csv", "num_prefill_tokens,num_decode_tokens\n8,4\n9,5\n");
  const std::string lengths2 = write("lengths2.csv", "num_prefill_tokens,num_decode_tokens\n7,3\n");
  const std::string bin = testing::data_path("models/stories260K/stories260K.bin");
  const std::string tok = testing::data_path("models/stories260K/tok512.bin");
  const std::string q = "\"";
  const std::string path_model = "model={ path = \"" + bin + "\" }";
  const std::string trace_workload = "workload={ trace = \"" + trace + "\" }";
  const std::string gptq = "baseline.quantization=gptq", calib = "calibration.text=\"" + text + "\"";
  const std::string int8_kv = "baseline.kv.dtype=\"int8\"";
  const std::string ruled = "baseline.quantization={ name = \"int8\", rules = [{ layers = [0], method = \"none\" }] }";
  return {
      // the top-level tables
      {"file.experiment", {}, "experiment.repeats=2"},
      {"file.model", {}, "model.n_layers=1"},
      {"file.device", {}, "device.kind=%OTHER%"},
      {"file.workload", {}, "workload.num_requests=3"},
      {"file.slo", {}, "slo.ttft_ms=5"},
      {"file.quality", {}, "quality.text=" + q + text + q},
      {"file.calibration", {}, calib},
      {"file.calibration", {gptq}, calib},
      {"file.plugins", {}, "plugins.paths=[\"" + testing::plugin_dir() + "\"]"},
      {"file.baseline", {}, "baseline.attention=flash"},
      {"file.variant", {}, "variant.0.attention=flash"},
      {"file.sweep", {}, "sweep.\"kv.block_size\"=[8]"},
      // [experiment]
      {"experiment.name", {}, "experiment.name=w2"},
      {"experiment.description", {}, "experiment.description=d"},
      {"experiment.seed", {}, "experiment.seed=7"},
      {"experiment.repeats", {}, "experiment.repeats=2"},
      {"experiment.isolate", {}, "experiment.isolate=false"},
      {"experiment.cell_timeout_s", {}, "experiment.cell_timeout_s=5"},
      {"experiment.cell_timeout_s", {"experiment.isolate=false"}, "experiment.cell_timeout_s=5"},
      {"experiment.cell_memory_mb", {}, "experiment.cell_memory_mb=512"},
      {"experiment.cell_memory_mb", {"experiment.isolate=false"}, "experiment.cell_memory_mb=512"},
      // [model]
      {"model.preset", {}, "model.preset=stories15m"},
      {"model.path", {}, path_model},
      {"model.format", {path_model}, "model.format=llama2c"},
      {"model.tokenizer", {path_model}, "model.tokenizer=" + q + tok + q},
      {"model.n_layers", {}, "model.n_layers=1"},
      {"model.seed", {}, "model.seed=9"},
      {"model.seed", {path_model}, "model.seed=9"},
      {"model.add_bos", {}, "model.add_bos=false"},
      {"model.add_bos", {"quality.text=" + q + text + q}, "model.add_bos=false"},
      // [device]
      {"device.kind", {}, "device.kind=%OTHER%"},
      {"device.threads", {}, "device.threads=1"},
      {"device.threads", {"quality.text=" + q + text + q}, "device.threads=1"},
      {"device.fuse", {}, "device.fuse=%NOT_DEFAULT%"},  // fused by default on cpu only
      {"device.cuda_graphs", {}, "device.cuda_graphs=true"},
      {"device.profile", {}, "device.profile=a100-80gb"},
      {"device.tp", {}, "device.tp=2"},
      {"device.pp", {}, "device.pp=2"},
      // [workload]
      {"workload.trace", {}, trace_workload},
      {"workload.format", {trace_workload}, "workload.format=canonical"},
      {"workload.format", {}, "workload.format=canonical"},
      {"workload.trace_model", {trace_workload}, "workload.trace_model=ChatGPT"},
      {"workload.trace_model", {"workload={ trace = \"" + burst + "\" }"}, "workload.trace_model=ChatGPT"},
      {"workload.trace_log_type", {"workload={ trace = \"" + burst + "\" }"}, "workload.trace_log_type=\"API log\""},
      {"workload.trace_log_type", {}, "workload.trace_log_type=\"API log\""},
      {"workload.num_requests", {}, "workload.num_requests=3"},
      {"workload.num_requests", {trace_workload}, "workload.num_requests=3"},
      {"workload.arrival", {}, "workload.arrival=poisson"},
      {"workload.rate", {}, "workload.rate=3"},
      {"workload.rate", {"workload.arrival=poisson"}, "workload.rate=3"},
      {"workload.burstiness", {"workload.arrival=poisson"}, "workload.burstiness=2"},
      {"workload.burstiness", {"workload.arrival=gamma"}, "workload.burstiness=2"},
      {"workload.prompt_len", {}, "workload.prompt_len=9"},
      {"workload.output_len", {}, "workload.output_len=5"},
      {"workload.lengths_file", {}, "workload.lengths_file=" + q + lengths + q},
      {"workload.lengths_file",
       {"workload.prompt_len={ dist = \"trace\" }", "workload.lengths_file=" + q + lengths + q},
       "workload.lengths_file=" + q + lengths2 + q},
      {"workload.prefix_block_tokens", {}, "workload.prefix_block_tokens=64"},
      {"workload.prefix_block_tokens", {trace_workload}, "workload.prefix_block_tokens=64"},
      {"workload.shared_prefix", {}, "workload.shared_prefix=4"},
      {"workload.limit", {}, "workload.limit=1"},
      {"workload.time_scale", {}, "workload.time_scale=0.5"},
      {"workload.time_scale", {"workload.arrival=poisson"}, "workload.time_scale=0.5"},
      {"workload.max_prompt", {}, "workload.max_prompt=6"},
      {"workload.max_output", {}, "workload.max_output=3"},
      {"workload.seed", {}, "workload.seed=9"},
      {"workload.class_mix", {}, "workload.class_mix=[1.0, 1.0]"},
      {"workload.queue_timeout_s", {}, "workload.queue_timeout_s=1"},
      {"workload.timeout_s", {}, "workload.timeout_s=1"},
      {"workload.max_new_tokens", {}, "workload.max_new_tokens=2"},
      // prompt_len / output_len as a table
      {"length.dist", {}, "workload.prompt_len={ dist = \"uniform\", max = 9 }"},
      {"length.value", {"workload.prompt_len={ dist = \"fixed\", value = 8 }"}, "workload.prompt_len.value=9"},
      {"length.value", {"workload.prompt_len={ dist = \"uniform\", max = 9 }"}, "workload.prompt_len.value=9"},
      {"length.min", {"workload.prompt_len={ dist = \"uniform\", max = 9 }"}, "workload.prompt_len.min=2"},
      {"length.min", {"workload.prompt_len={ dist = \"fixed\", value = 8 }"}, "workload.prompt_len.min=2"},
      {"length.max", {"workload.output_len={ dist = \"uniform\", max = 9 }"}, "workload.output_len.max=10"},
      {"length.mean", {"workload.prompt_len={ dist = \"lognormal\", mean = 8, max = 20 }"}, "workload.prompt_len.mean=9"},
      {"length.mean", {"workload.prompt_len={ dist = \"uniform\", max = 9 }"}, "workload.prompt_len.mean=9"},
      {"length.sigma", {"workload.prompt_len={ dist = \"lognormal\", mean = 8, max = 20 }"}, "workload.prompt_len.sigma=0.9"},
      {"length.sigma", {"workload.prompt_len={ dist = \"fixed\", value = 8 }"}, "workload.prompt_len.sigma=0.9"},
      // [slo]
      {"slo.ttft_ms", {}, "slo.ttft_ms=5"},
      {"slo.tpot_ms", {}, "slo.tpot_ms=5"},
      {"slo.e2e_ms", {}, "slo.e2e_ms=5"},
      {"slo.class_ttft_ms", {}, "slo.class_ttft_ms=[5.0]"},
      {"slo.class_tpot_ms", {}, "slo.class_tpot_ms=[5.0]"},
      {"slo.class_e2e_ms", {}, "slo.class_e2e_ms=[5.0]"},
      // [quality], [calibration], [plugins]
      {"quality.text", {}, "quality.text=" + q + text + q},
      {"quality.max_tokens", {"quality.text=" + q + text + q}, "quality.max_tokens=16"},
      {"quality.context", {"quality.text=" + q + text + q}, "quality.context=16"},
      {"calibration.text", {gptq, calib}, "calibration.text=" + q + text2 + q},
      {"calibration.tokens", {gptq, calib}, "calibration.tokens=64"},
      {"calibration.seq_len", {gptq, calib}, "calibration.seq_len=32"},
      {"calibration.seed", {gptq, calib}, "calibration.seed=9"},
      {"plugins.paths", {}, "plugins.paths=[\"" + testing::plugin_dir() + "\"]"},
      // a stack: [baseline], and [[variant]] (its own keys and a stack's)
      {"stack.attention", {}, "baseline.attention=flash"},
      {"stack.quantization", {}, "baseline.quantization=int8"},
      {"stack.scheduler", {}, "baseline.scheduler=static"},
      {"stack.decoding", {}, "baseline.decoding=beam"},
      {"stack.kv", {}, "baseline.kv={ block_size = 8 }"},
      {"variant.name", {}, "variant.0.name=w"},
      {"variant.model", {}, "variant.0.model={ preset = \"stories260k\", n_layers = 1 }"},
      {"variant.attention", {}, "variant.0.attention=flash"},
      {"variant.quantization", {}, "variant.0.quantization=int8"},
      {"variant.scheduler", {}, "variant.0.scheduler=static"},
      {"variant.decoding", {}, "variant.0.decoding=beam"},
      {"variant.kv", {}, "variant.0.kv={ block_size = 8 }"},
      // kv
      {"kv.enabled", {}, "baseline.kv.enabled=false"},
      {"kv.block_size", {}, "baseline.kv.block_size=8"},
      {"kv.num_blocks", {}, "baseline.kv.num_blocks=64"},
      {"kv.gpu_memory_fraction", {}, "baseline.kv.gpu_memory_fraction=0.5"},
      {"kv.memory_mb", {}, "baseline.kv.memory_mb=1"},
      {"kv.reservation", {}, "baseline.kv.reservation=full"},
      {"kv.prefix_caching", {}, "baseline.kv.prefix_caching=true"},
      {"kv.dtype", {}, int8_kv},
      {"kv.group_size", {int8_kv}, "baseline.kv.group_size=4"},
      {"kv.group_size", {}, "baseline.kv.group_size=4"},
      {"kv.f32_first_layers", {int8_kv}, "baseline.kv.f32_first_layers=1"},
      {"kv.f32_last_layers", {int8_kv}, "baseline.kv.f32_last_layers=1"},
      // a quantization rule
      {"rule.match", {"baseline.quantization=int8"},
       "baseline.quantization={ name = \"int8\", rules = [{ match = \"*.w2\", method = \"none\" }] }"},
      {"rule.layers", {"baseline.quantization=int8"}, ruled},
      {"rule.method", {ruled}, "baseline.quantization.rules=[{ layers = [0], method = \"f16\" }]"},
  };
}

// The resolved config of the base file with these overrides, without its comment lines (which
// quote the --set arguments); "" with `error` set when refused.
std::string resolve(const Registry& reg, const std::string& file, const std::vector<std::string>& sets, std::string& error) {
  try {
    const ExperimentSpec spec = load_experiment(file, sets);
    std::istringstream config(resolved_config_toml(plan_experiment(spec, reg, experiment_model_config(spec.model))));
    std::string out;
    for (std::string line; std::getline(config, line);)
      if (line.rfind("#", 0) != 0) out += line + "\n";
    return out;
  } catch (const Error& e) {
    error = e.what();
    return "";
  }
}

void walk(const std::string& kind) {
  INFERLAB_REQUIRE_FILE(testing::data_path("models/stories260K/stories260K.bin"));
  const Registry reg({testing::plugin_dir()});
  const std::string file = base_file(kind);
  const std::string other = kind == "cpu" ? "sim" : "cpu";
  std::set<std::string> probed;
  int acted = 0, refused = 0;
  for (Probe p : probes()) {
    probed.insert(p.key);
    if (auto at = p.set.find("%OTHER%"); at != std::string::npos) p.set.replace(at, 7, other);
    if (auto at = p.set.find("%NOT_DEFAULT%"); at != std::string::npos) p.set.replace(at, 13, kind == "cpu" ? "false" : "true");
    std::string context_error, error;
    const std::string before = resolve(reg, file, p.context, context_error);
    if (before.empty()) continue;  // the context itself does not exist on this device
    std::vector<std::string> sets = p.context;
    sets.push_back(p.set);
    const std::string after = resolve(reg, file, sets, error);
    const std::string key = p.key.substr(p.key.find('.') + 1), table = p.key.substr(0, p.key.find('.'));
    if (after.empty()) {
      ++refused;
      EXPECT_TRUE(error.find(key) != std::string::npos || (table != "file" && error.find(table) != std::string::npos))
          << kind << ": --set " << p.set << " is refused without naming " << p.key << ": " << error;
    } else {
      ++acted;
      EXPECT_NE(after, before) << kind << ": " << p.key << " (--set " << p.set
                               << ") is accepted and changes nothing in the resolved config";
    }
  }
  for (const ExperimentTable& t : experiment_tables())
    for (const std::string& k : t.keys)
      EXPECT_TRUE(probed.count(t.name + "." + k) || (t.name == "file" && k == "claim"))
          << t.name << "." << k << " has no probe: add one to this walk";  // [claim]: inferlab reproduce's
  std::printf("%s: %d probes act, %d are refused\n", kind.c_str(), acted, refused);
  EXPECT_GT(acted, 40);
}

TEST(ExperimentKeys, EveryKeyActsOrIsRefusedOnCpu) { walk("cpu"); }
TEST(ExperimentKeys, EveryKeyActsOrIsRefusedOnSim) { walk("sim"); }
// Validation is static: planning a CUDA run needs a CUDA build (its plugins declare the device),
// not a GPU. A build without CUDA refuses kind = "cuda" before any key is looked at.
TEST(ExperimentKeys, EveryKeyActsOrIsRefusedOnCuda) {
#if !INFERLAB_HAVE_CUDA
  GTEST_SKIP() << "this build has no CUDA: its plugins declare no cuda device, so a cuda stack cannot be planned";
#endif
  walk("cuda");
}

// A config.toml written before the refusals (every length key, prefix_block_tokens without a
// trace) still resumes: those keys did nothing in that run.
TEST(ExperimentKeys, AnOlderResolvedConfigStillReloads) {
  const std::string old = write("old_config.toml", "[model]\npreset = \"stories260k\"\n[workload]\nnum_requests = 2\n"
                                                   "prefix_block_tokens = 512\nprompt_len = { dist = \"fixed\", value = 8, "
                                                   "min = 1, max = 1048576, mean = 64.0, sigma = 0.5 }\n");
  EXPECT_THROW(load_experiment(old, {}), Error);
  EXPECT_EQ(load_resolved_config(old).workload.prompt_len.value, 8);
}

// What the issue reported, through the CLI: validate says which key, the device and the remedy.
TEST(ExperimentKeys, ValidateRefusesSimulationKeysOnTheCpu) {
  const std::string file = base_file("cpu");
  for (const auto& [set, message] : std::vector<std::pair<std::string, std::string>>{
           {"device.tp=8", "[device] tp does nothing on kind = \"cpu\": tensor parallelism is simulated; use [device] kind = \"sim\""},
           {"device.pp=4", "[device] pp does nothing on kind = \"cpu\": pipeline parallelism is simulated; use [device] kind = \"sim\""},
           {"device.profile=a100-80gb", "[device] profile does nothing on kind = \"cpu\""}}) {
    const auto r = testing::run_inferlab("validate " + file + " --set " + set);
    EXPECT_EQ(r.code, 1) << set;
    EXPECT_NE(r.err.find(file + " (--set): " + message), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace inferlab
