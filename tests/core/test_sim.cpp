// Simulation: the roofline cost model against hand arithmetic, the sim device and registry
// rules, the engine on a SimExecutor, the CLI's sim quickstart (same columns as a CPU run) and
// `inferlab reproduce` (a claim pushed past its tolerance fails).
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <type_traits>

#include <gtest/gtest.h>

#include "inferlab/engine/batch.h"
#include "inferlab/error.h"
#include "inferlab/kv/kv_storage.h"
#include "inferlab/plugin/registry.h"
#include "inferlab/repro/reproduce.h"
#include "inferlab/results/metrics.h"
#include "inferlab/sim/sim.h"
#include "inferlab/model/weights.h"
#include "test_support.h"

namespace inferlab {
namespace {

namespace fs = std::filesystem;

SimOptions h100() {
  SimOptions o;
  o.profile = hw_profile("h100");
  return o;
}

StepBatch decode_batch(int seqs, int context) {
  StepBatch b;
  std::vector<int> table((context + 15) / 16);
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int>(i);
  for (int s = 0; s < seqs; ++s) {
    std::vector<int> tok{5};
    b.add_sequence(tok, context - 1, table, 16, 0, 1);
  }
  return b;
}

TEST(SimCost, DecodeOfOneRowIsTheWeightReadOverBandwidth) {
  const ModelConfig m = preset_config("llama-2-7b");
  const SimOptions o = h100();
  const StepCost c = step_cost(m, o, decode_batch(1, 128));
  const double d = 4096, h = 11008, v = 32000;
  const double layer_weights = (4 * d * d + 3 * h * d) * 2;
  const double want = (32 * layer_weights / 3.35e12 + v * d * 2 / 3.35e12) / 0.75;
  EXPECT_NEAR(c.seconds[static_cast<std::size_t>(TimeCategory::kLinear)], want, want * 0.01);
  // A 7B decode step on an H100 is ~5 ms (13.5 GB of weights at 3.35 TB/s, derated).
  EXPECT_GT(c.total(), 4e-3);
  EXPECT_LT(c.total(), 7e-3);
}

TEST(SimCost, BatchingAmortisesTheWeightsAndTensorParallelSplitsThem) {
  const ModelConfig m = preset_config("llama-2-7b");
  SimOptions o = h100();
  const double one = step_cost(m, o, decode_batch(1, 512)).total();
  const double many = step_cost(m, o, decode_batch(64, 512)).total();
  EXPECT_LT(many, 3 * one);  // 64× the tokens for well under 3× the time
  o.tp = 2;
  const StepCost tp2 = step_cost(m, o, decode_batch(1, 512));
  EXPECT_LT(tp2.total(), one);
  EXPECT_GT(tp2.seconds[static_cast<std::size_t>(TimeCategory::kFramework)], 0);  // all-reduces
}

TEST(SimCost, KvBytesAndPool) {
  const ModelConfig m13 = preset_config("llama-2-13b");
  SimOptions o = h100();
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(m13, o), 819200.0);  // vLLM's 800 KB for OPT-13B
  o.tp = 2;
  EXPECT_DOUBLE_EQ(kv_bytes_per_token(m13, o), 409600.0);
  const ModelConfig m7 = preset_config("llama-2-7b");
  const SimOptions one = h100();
  const double free = 0.9 * 80e9 - static_cast<double>(m7.parameter_count()) * 2;
  EXPECT_EQ(sim_kv_blocks(m7, one, 16), static_cast<int>(free / (524288.0 * 16)));
  SimOptions small = one;
  small.profile = hw_profile("a100-40gb");
  EXPECT_THROW(sim_kv_blocks(preset_config("llama-2-13b"), small, 16, 0.5), Error);
  EXPECT_THROW(hw_profile("tpu"), Error);
}

TEST(SimCost, QuantizedWeightsShrinkTheWeightReadUntilComputeBinds) {
  const ModelConfig m = preset_config("llama-2-7b");
  SimOptions bf16;
  bf16.profile = hw_profile("a100-80gb");
  SimOptions int8 = bf16;
  int8.weight_bytes = 1;
  auto linear = [&](const SimOptions& o, int batch) {
    return step_cost(m, o, decode_batch(batch, 512)).seconds[static_cast<std::size_t>(TimeCategory::kLinear)];
  };
  // Batch 1 reads the weights and almost nothing else: half the bytes, about half the time.
  EXPECT_NEAR(linear(bf16, 1) / linear(int8, 1), 2.0, 0.02);
  // Batch 512 is compute bound (2 · 512 FLOPs per weight read at 312 TFLOP/s over 2 TB/s):
  // the same FLOPs, the same time.
  EXPECT_NEAR(linear(bf16, 512) / linear(int8, 512), 1.0, 1e-9);
}

TEST(SimCost, TensorParallelOverEthernetIsBoundByItsAllReduces) {
  const HwProfile& eth = hw_profile("a100-80gb-100gbe");
  EXPECT_DOUBLE_EQ(eth.link_bw, 12.5e9);
  EXPECT_DOUBLE_EQ(eth.link_latency_s, 25e-6);
  EXPECT_DOUBLE_EQ(eth.mem_bw, hw_profile("a100-80gb").mem_bw);
  const ModelConfig m = preset_config("llama-2-13b");
  SimOptions nvlink;
  nvlink.profile = hw_profile("a100-80gb");
  nvlink.tp = 8;
  SimOptions ethernet = nvlink;
  ethernet.profile = eth;
  const StepBatch b = decode_batch(64, 512);
  // Per layer two all-reduces of 2 · 7/8 · 64 rows · 5120 · 2 bytes at 12.5 GB/s plus 25 us each.
  const double allreduce = 2 * 7.0 / 8 * 64 * 5120 * 2 / 12.5e9 + 25e-6;
  const double launches = 40 * 12 * 4e-6 + 3 * 4e-6;
  EXPECT_NEAR(step_cost(m, ethernet, b).seconds[static_cast<std::size_t>(TimeCategory::kFramework)],
              40 * 2 * allreduce + launches, 1e-9);
  // The same step over NVLink (300 GB/s, 8 us) spends a small fraction of that on all-reduces.
  EXPECT_GT(step_cost(m, ethernet, b).total(), 1.5 * step_cost(m, nvlink, b).total());
}

// A simulated device has memory and time only: it is no ComputeDevice, so the model and the KV
// storage refuse it when they are built, naming themselves.
TEST(SimDevice, MemoryWorksAndItHasNoOps) {
  SimDevice dev;
  Buffer b(dev, 64);
  float x[4] = {1, 2, 3, 4};
  dev.copy_to_device(b.data(), x, sizeof x);
  float y[4] = {};
  dev.copy_to_host(y, b.data(), sizeof y);
  EXPECT_EQ(y[3], 4.0f);
  static_assert(!std::is_base_of_v<ComputeDevice, SimDevice>);
  EXPECT_THROW(compute_device(dev, "model"), Error);
  try {
    KvStorage kv(dev, preset_config("stories260k"), 4, 16);
    ADD_FAILURE() << "KV storage built on a simulated device";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("KV storage runs the model's ops"), std::string::npos) << e.what();
  }
  const auto made = make_device(DeviceKind::kSim, 1, "sim of h100");
  EXPECT_EQ(made->kind(), DeviceKind::kSim);
  EXPECT_EQ(made->describe(), "sim of h100");
}

// Every plugin but those that need the real forward pass (a draft model, layer plans).
TEST(SimRegistry, EveryPluginRunsOnSimExceptSpeculative) {
  Registry reg({testing::plugin_dir()});
  const ModelConfig m = preset_config("stories15m");
  const Params none;
  for (const auto* d : reg.list()) {
    const Params p = reg.resolve(d->kind, d->name, {}, "test");
    const auto reasons = reg.check_support(d->kind, d->name, SupportQuery{m, DeviceKind::kSim, KvDtype::kF32, p});
    if (d->name == "speculative" || d->name == "early_exit") {
      ASSERT_FALSE(reasons.empty());
      EXPECT_NE(reasons[0].find("real logits"), std::string::npos) << reasons[0];
    } else if (d->name == "layer_skip") {  // changes the forward pass, which a simulation never runs
      ASSERT_FALSE(reasons.empty());
      EXPECT_NE(reasons[0].find("simulated run"), std::string::npos) << reasons[0];
    } else if (d->name == "gguf") {  // runs a GGUF file's own blocks: a preset has none
      ASSERT_FALSE(reasons.empty());
      EXPECT_NE(reasons[0].find("not a GGUF checkpoint"), std::string::npos) << reasons[0];
    } else {
      EXPECT_TRUE(reasons.empty()) << d->name << ": " << (reasons.empty() ? "" : reasons[0]);
    }
  }
  SimDevice dev;
  EXPECT_NO_THROW(reg.create_attention("flash", reg.resolve(PluginKind::kAttention, "flash", {}, "t"), dev));
}

TEST(SimRegistry, SpeculativeRunsOnSimOnlyWithABernoulliAcceptanceRate) {
  Registry reg({testing::plugin_dir()});
  const ModelConfig m = preset_config("stories15m");
  const Params p = reg.resolve(PluginKind::kDecoding, "speculative", {{"sim_accept_prob", 0.7}}, "test");
  EXPECT_TRUE(reg.check_support(PluginKind::kDecoding, "speculative", SupportQuery{m, DeviceKind::kSim, KvDtype::kF32, p}).empty());
  // A real run verifies a real draft: the parameter would be parsed and ignored there, so it is refused.
  const auto cpu = reg.check_support(PluginKind::kDecoding, "speculative", SupportQuery{m, DeviceKind::kCpu, KvDtype::kF32, p});
  ASSERT_EQ(cpu.size(), 1u);
  EXPECT_NE(cpu[0].find("only to a simulated run"), std::string::npos) << cpu[0];
  const Params hot = reg.resolve(PluginKind::kDecoding, "speculative", {{"sim_accept_prob", 0.7}, {"temperature", 1.0}}, "test");
  EXPECT_FALSE(reg.check_support(PluginKind::kDecoding, "speculative", SupportQuery{m, DeviceKind::kSim, KvDtype::kF32, hot}).empty());
}

// The Bernoulli(α) draft through the real engine (SimExecutor + continuous scheduler + the
// plugin's greedy verification): tokens per target call follow Eq. 1 at α, and drafts cost
// nothing to propose, so a higher α finishes in fewer steps.
TEST(SimEngine, BernoulliDraftsYieldEquationOneTokensPerStep) {
  Registry reg({testing::plugin_dir()});
  ModelConfig m = preset_config("stories15m");
  SimOptions o = h100();
  std::vector<Request> requests;
  for (int i = 0; i < 24; ++i) {
    Request r;
    r.id = i;
    r.prompt = std::vector<int>(16, 5 + i);
    r.max_output = 400;
    requests.push_back(r);
  }
  double steps_at[2] = {0, 0};
  int k = 0;
  for (double alpha : {0.5, 0.8}) {
    SimDevice dev;
    dev.set_options(std::make_shared<const SimOptions>(o));  // the draft's passes are charged by it
    SimExecutor ex(m, o, dev);
    ModelWeights w;
    w.config = m;
    auto sched = reg.create_scheduler("continuous", reg.resolve(PluginKind::kScheduling, "continuous", {}, "t"), dev);
    auto dec = reg.create_decoder(
        "speculative", reg.resolve(PluginKind::kDecoding, "speculative", {{"sim_accept_prob", alpha}, {"num_draft", std::int64_t{3}}}, "t"),
        dev, &w, nullptr);
    EngineOptions eo;
    eo.seed = 5;
    Engine engine(ex, *sched, *dec, eo);
    const RunResult r = engine.run(requests);
    const auto metrics = compute_metrics(r.timeline, {});
    double per_step = 0;
    for (const auto& [name, v] : metrics)
      if (name == "spec_tokens_per_step") per_step = v;
    EXPECT_NEAR(per_step / spec_expected_tokens(alpha, 3), 1.0, 0.03) << "alpha " << alpha;
    // Drafts after the first miss count as proposed: the accepted fraction is (E - 1) / γ, not α.
    const double frac = static_cast<double>(r.timeline.spec_accepted) / static_cast<double>(r.timeline.spec_proposed);
    EXPECT_NEAR(frac / ((spec_expected_tokens(alpha, 3) - 1) / 3), 1.0, 0.05) << "alpha " << alpha;
    steps_at[k++] = static_cast<double>(r.timeline.steps.size());
  }
  EXPECT_LT(steps_at[1], steps_at[0]);
}



// stdout then stderr, from the source folder (claim files name paths relative to it).
using Cli = testing::CliResult;
Cli run_cli(const std::string& args) {
  Cli r = testing::run_inferlab(args, testing::source_dir());
  r.out += r.err;
  return r;
}

std::string first_line(const fs::path& p) {
  std::ifstream in(p);
  std::string line;
  std::getline(in, line);
  return line;
}

fs::path only_child(const fs::path& root) {
  for (const auto& e : fs::directory_iterator(root)) return e.path();
  return {};
}

TEST(SimCli, QuickstartOnSimHasTheColumnsOfACpuRun) {
  const fs::path out = fs::temp_directory_path() / ("inferlab_sim_qs_" + std::to_string(getpid()));
  fs::remove_all(out);
  const std::string qs = testing::source_dir() + "/experiments/quickstart.toml";
  Cli cpu = run_cli("run " + qs + " --repeats 1 --log warn --out " + (out / "cpu").string());
  ASSERT_EQ(cpu.code, 0) << cpu.out;
  Cli sim = run_cli("run " + qs + " --repeats 1 --log warn --set device.kind=sim --out " + (out / "sim").string());
  ASSERT_EQ(sim.code, 0) << sim.out;
  const fs::path cpu_dir = only_child(only_child(out / "cpu")), sim_dir = only_child(only_child(out / "sim"));
  EXPECT_EQ(first_line(cpu_dir / "metrics.csv"), first_line(sim_dir / "metrics.csv"));
  std::ifstream in(sim_dir / "metrics.csv");
  std::string line;
  std::getline(in, line);
  int rows = 0;
  while (std::getline(in, line)) {
    ++rows;
    EXPECT_NE(line.find(",ok,"), std::string::npos) << line;
  }
  EXPECT_EQ(rows, 3);
  std::ifstream cfg(sim_dir / "config.toml");
  std::stringstream text;
  text << cfg.rdbuf();
  EXPECT_NE(text.str().find("profile = \"h100\""), std::string::npos);
  fs::remove_all(out);
}

TEST(SimCli, ReproduceExactPassesAndAClaimPastItsToleranceFails) {
  Cli ok = run_cli("reproduce --class exact --log warn");
  EXPECT_EQ(ok.code, 0) << ok.out;
  EXPECT_EQ(ok.out.find("FAIL"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("| pass |"), std::string::npos);
  // The same KV claim with an expected value 2% off and a 1% tolerance must fail.
  const fs::path bad = fs::temp_directory_path() / ("inferlab_sim_claim_" + std::to_string(getpid()) + ".toml");
  {
    std::ofstream f(bad);
    f << "[model]\npreset = \"llama-2-13b\"\n\n[claim]\nsource = \"test\"\ntext = \"kv slots off by 2%\"\n"
         "quantity = \"kv_slots\"\nkv_gib = 12\nexpected = 16043\ntolerance = 0.01\nclass = \"exact\"\n";
  }
  Cli fail = run_cli("reproduce --log warn " + bad.string());
  EXPECT_EQ(fail.code, 1) << fail.out;
  EXPECT_NE(fail.out.find("FAIL"), std::string::npos) << fail.out;
  fs::remove(bad);
}

TEST(Reproduce, OnlyAClassCpuClaimRunsItsExperimentOnThisCpu) {
  const fs::path f = fs::temp_directory_path() / ("inferlab_cpu_claim_" + std::to_string(getpid()) + ".toml");
  auto write = [&](const char* cls, const char* expected = "1") {
    std::ofstream(f) << "[experiment]\nname = \"cpu_claim\"\nrepeats = 1\nisolate = false\n"
                        "[model]\npreset = \"stories260k\"\n[device]\nkind = \"cpu\"\nthreads = 1\n"
                        "[workload]\nnum_requests = 3\nprompt_len = 8\noutput_len = 4\n"
                        "[baseline]\nscheduler = { name = \"continuous\" }\n"
                        "[[variant]]\nname = \"static\"\nscheduler = { name = \"static\" }\n"
                        "[[claim]]\nsource = \"test\"\ntext = \"both finish every request\"\nquantity = \"ratio\"\n"
                        "metric = \"requests\"\nnumerator = \"baseline\"\ndenominator = \"static\"\nexpected = "
                     << expected << "\ntolerance = 0\nclass = \"" << cls << "\"\n";
  };
  const Registry reg({testing::plugin_dir()});
  write("cpu");
  const ClaimResult r = check_claim(read_claims(f.string()).at(0), reg);
  EXPECT_EQ(r.verdict, "pass");
  EXPECT_EQ(r.measured, 1.0);  // 3 finished requests in each variant's real CPU run
  // A failing cpu claim is reported by class; it fails the command only when --class cpu asked for it.
  write("cpu", "2");
  const Cli all = run_cli("reproduce --log warn " + f.string());
  EXPECT_EQ(all.code, 0) << all.out;
  EXPECT_NE(all.out.find("1 claims checked, failed: 1 cpu"), std::string::npos) << all.out;
  const Cli asked = run_cli("reproduce --class cpu --log warn " + f.string());
  EXPECT_EQ(asked.code, 1) << asked.out;
  write("exact");  // an exact claim must hold on any machine: a real run is refused
  try {
    check_claim(read_claims(f.string()).at(0), reg);
    ADD_FAILURE() << "an exact claim ran a CPU experiment";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("kind = \"sim\""), std::string::npos) << e.what();
  }
  fs::remove(f);
}

TEST(SimCli, ValidateRefusesAPluginThatNeedsRealLogitsWithTheReason) {
  const fs::path f = fs::temp_directory_path() / ("inferlab_sim_spec_" + std::to_string(getpid()) + ".toml");
  std::ofstream(f) << "[model]\npreset = \"stories15m\"\n[device]\nkind = \"sim\"\n"
                      "[workload]\nnum_requests = 2\nprompt_len = 8\noutput_len = 8\n"
                      "[baseline]\ndecoding = { name = \"speculative\", num_draft = 3 }\n";
  Cli refused = run_cli("validate " + f.string());
  EXPECT_NE(refused.code, 0) << refused.out;
  EXPECT_NE(refused.out.find("needs real logits"), std::string::npos) << refused.out;
  EXPECT_NE(refused.out.find("sim_accept_prob"), std::string::npos) << refused.out;
  Cli bernoulli = run_cli("validate " + f.string() + " --set baseline.decoding.sim_accept_prob=0.7");
  EXPECT_EQ(bernoulli.code, 0) << bernoulli.out;
  fs::remove(f);
}

TEST(SarathiFormula, MaxPiggybackedDecodes) {
  const double m_kv = 819200, m_s = static_cast<double>(preset_config("llama-2-13b").parameter_count()) * 2;
  EXPECT_EQ(sarathi_max_decodes(80e9, m_s, 4096, m_kv), 16);  // 16.08 rounded down
  EXPECT_EQ(sarathi_max_decodes(48e9, m_s, 1024, m_kv), 26);  // 26.19
  EXPECT_EQ(sarathi_max_decodes(24e9, m_s, 1024, m_kv), 0);   // the weights alone do not fit
  EXPECT_THROW(sarathi_max_decodes(80e9, m_s, 0, m_kv), Error);
}

TEST(SpecFormula, LeviathanEquationOne) {
  EXPECT_NEAR(spec_expected_tokens(0.8, 5), 3.68928, 1e-5);
  EXPECT_NEAR(spec_expected_tokens(0.0, 4), 1.0, 1e-12);
  EXPECT_NEAR(spec_expected_tokens(1.0, 4), 5.0, 1e-12);
  EXPECT_NEAR(spec_speedup(0.8, 5, 0.1), 3.68928 / 1.5, 1e-5);
}

}  // namespace
}  // namespace inferlab
