// The simulator charges every strategy by what it declares (docs/simulation.md, "What a strategy
// costs"): a quantization's bytes (planned_bytes) and arithmetic per linear, an attention's
// memory traffic, a speculative draft's passes by the draft's own shape. (A strategy that
// declares nothing is refused on sim at validate time: test_plan.cpp.)
#include <gtest/gtest.h>

#include "inferlab/engine/engine.h"
#include "inferlab/error.h"
#include "inferlab/formats/formats.h"
#include "inferlab/results/metrics.h"
#include "inferlab/experiment/quantization_rules.h"
#include "inferlab/plugin/registry.h"
#include "inferlab/repro/reproduce.h"
#include "inferlab/sim/sim.h"
#include "inferlab/model/weights.h"
#include "test_support.h"

namespace inferlab {
namespace {

constexpr std::size_t kLinear = static_cast<std::size_t>(TimeCategory::kLinear);
constexpr std::size_t kAttention = static_cast<std::size_t>(TimeCategory::kAttention);

SimOptions h100() {
  SimOptions o;
  o.profile = hw_profile("h100");
  return o;
}

double metric(const std::vector<std::pair<std::string, double>>& metrics, const std::string& name) {
  for (const auto& [n, v] : metrics)
    if (n == name) return v;
  ADD_FAILURE() << "no metric " << name;
  return 0;
}

// One request at a time through the engine on a SimExecutor with options `o`.
RunResult run_sim(Registry& reg, const ModelConfig& m, const SimOptions& o, const std::string& decoder,
                  std::map<std::string, ParamValue> dec_params, int output = 128) {
  SimDevice dev;
  dev.set_options(std::make_shared<const SimOptions>(o));
  SimExecutor ex(m, o, dev);
  ModelWeights w;
  w.config = m;
  auto sched = reg.create_scheduler(
      "static", reg.resolve(PluginKind::kScheduling, "static", {{"max_batch", std::int64_t{1}}}, "t"), dev);
  auto dec = reg.create_decoder(decoder, reg.resolve(PluginKind::kDecoding, decoder, dec_params, "t"), dev, &w, nullptr);
  std::vector<Request> requests(2);
  for (int i = 0; i < 2; ++i) {
    requests[static_cast<std::size_t>(i)].id = i;
    requests[static_cast<std::size_t>(i)].prompt = std::vector<int>(64, 5 + i);
    requests[static_cast<std::size_t>(i)].max_output = output;
  }
  Engine engine(ex, *sched, *dec, EngineOptions{});
  return engine.run(requests);
}

TEST(SimStrategy, QuantizationsChargeTheirPlannedBytesAndArithmetic) {
  Registry reg({testing::plugin_dir()});
  ModelConfig m = preset_config("llama-2-7b");
  // A GGUF checkpoint's header in Q4_0 (the gguf strategy sizes its linears from it).
  for (const LinearSlot& l : model_linears(m)) m.source_linear_types[l.name] = static_cast<std::uint32_t>(GgmlType::kQ4_0);
  CpuDevice host(1);
  struct Row {
    std::string name;
    double tpot = 0, linear_s = 0, weights = 0;
  };
  std::vector<Row> rows;
  for (const std::string q : {"none", "int8", "int4", "gguf"}) {
    auto quant = reg.create_quantization(q, reg.resolve(PluginKind::kQuantization, q, {}, "t"), host);
    SimOptions o = h100();
    o.linears = sim_linears(*quant, m);
    const RunResult r = run_sim(reg, m, o, "sampling", {});
    rows.push_back({q, metric(compute_metrics(r.timeline, {}), "tpot_ms_p50"), r.timeline.time_s[kLinear],
                    static_cast<double>(r.timeline.weights_bytes)});
  }
  // bf16 weights for none; int8 ~1 byte, int4 (groups of 32, fp32 scale and min) 0.75, Q4_0 0.5625.
  EXPECT_NEAR(rows[0].weights, static_cast<double>(m.parameter_count()) * 2, 1e6);
  for (std::size_t i = 1; i < rows.size(); ++i) {
    EXPECT_LT(rows[i].weights, rows[i - 1].weights) << rows[i].name;
    EXPECT_LT(rows[i].tpot, rows[i - 1].tpot) << rows[i].name;
    // Decode at batch 1 reads every weight once: the linears' seconds follow the weights' bytes.
    const double bytes_ratio = rows[0].weights / rows[i].weights, time_ratio = rows[0].linear_s / rows[i].linear_s;
    EXPECT_NEAR(time_ratio / bytes_ratio, 1.0, 0.05) << rows[i].name << " bytes " << bytes_ratio << " time " << time_ratio;
  }
}

TEST(SimStrategy, W8A8MultipliesOnInt8TensorCoresAndUnpackingCostsComputeAtLargeBatch) {
  Registry reg({testing::plugin_dir()});
  const ModelConfig m = preset_config("llama-2-7b");
  CpuDevice host(1);
  const auto linears = [&](const std::string& q, std::map<std::string, ParamValue> p) {
    SimOptions o = h100();
    o.linears = sim_linears(*reg.create_quantization(q, reg.resolve(PluginKind::kQuantization, q, p, "t"), host), m);
    return o;
  };
  const SimOptions none = linears("none", {}), w8 = linears("int8", {}), w8a8 = linears("int8", {{"activations", std::string("int8")}});
  // A 2048-row prefill is compute bound: the int8 tensor rate (2x bf16 on the H100) halves the
  // linears; weight-only int8 multiplies at the bf16 rate and unpacks 2 ops per weight per 128 rows.
  StepBatch prefill;
  std::vector<int> table(128), tokens(2048, 5);
  for (int i = 0; i < 128; ++i) table[static_cast<std::size_t>(i)] = i;
  prefill.add_sequence(tokens, 0, table, 16, 2047, 2048);
  const double t_none = step_cost(m, none, prefill).seconds[kLinear];
  const double t_w8a8 = step_cost(m, w8a8, prefill).seconds[kLinear];
  const double t_w8 = step_cost(m, w8, prefill).seconds[kLinear];
  EXPECT_NEAR(t_none / t_w8a8, 1979.0 / 989.0, 0.05);
  const double params = static_cast<double>(m.n_layers) * (4.0 * 4096 * 4096 + 3.0 * 11008 * 4096);
  const double unpack = 2 * params * 16 / 67e12 / 0.75;  // 2 ops x params x 2048/128 tiles at the fp32 rate
  EXPECT_NEAR(t_w8 - t_none, unpack, unpack * 0.05);
}

TEST(SimStrategy, AttentionChargesTheTrafficItDeclares) {
  Registry reg({testing::plugin_dir()});
  const ModelConfig m = preset_config("llama-2-7b");
  CpuDevice host(1);
  const auto with = [&](const std::string& a) {
    SimOptions o = h100();
    const AttentionTraffic t =
        sim_attention_traffic(*reg.create_attention(a, reg.resolve(PluginKind::kAttention, a, {}, "t"), host), m, a);
    o.attn_score_bytes = t.score_bytes;
    o.attn_partial_bytes = t.partial_bytes;
    o.attn_partial_bytes_per_key = t.partial_bytes_per_key;
    o.attn_partial_max_rows = t.partial_max_rows;
    return o;
  };
  // One 2048-token prompt: 2048 · 2049 / 2 attended keys per head.
  StepBatch prefill;
  std::vector<int> table(128), tokens(2048, 5);
  for (int i = 0; i < 128; ++i) table[static_cast<std::size_t>(i)] = i;
  prefill.add_sequence(tokens, 0, table, 16, 2047, 2048);
  const double keys = 2048.0 * 2049 / 2, d = 4096, layers = 32;
  const double io = 2048.0 * 2 * d * 2 /* K/V */ + 2048.0 * 2 * d * 2 /* q in, out */;
  const double flash = step_cost(m, with("flash"), prefill).seconds[kAttention];
  const double naive = step_cost(m, with("naive"), prefill).seconds[kAttention];
  const double split_k = step_cost(m, with("split_k"), prefill).seconds[kAttention];
  // flash: compute bound (4 d FLOPs per key); naive: its fp32 scores and probabilities, written
  // and read back, 16 bytes per (row, head, key), make it memory bound.
  EXPECT_NEAR(flash, layers * std::max(4 * d * keys / 989e12, io / 3.35e12) / 0.6, flash * 1e-9);
  EXPECT_NEAR(naive, layers * (io + keys * 32 * 16) / 3.35e12 / 0.6, naive * 1e-9);
  EXPECT_GT(naive / flash, 3.0);
  // split_k tiles a prefill like flash; it splits a decode, whose partials (one per 256 keys by
  // default) are a sliver beside its K/V.
  EXPECT_DOUBLE_EQ(split_k, flash);
  StepBatch decode;
  decode.add_sequence(std::vector<int>{5}, 2047, table, 16, 0, 1);
  const double decode_flash = step_cost(m, with("flash"), decode).seconds[kAttention];
  const double decode_split = step_cost(m, with("split_k"), decode).seconds[kAttention];
  EXPECT_GT(decode_split, decode_flash);
  EXPECT_LT(decode_split, decode_flash * 1.02);
}

TEST(SimStrategy, SpeculativeDecodingIsChargedItsDraftsPasses) {
  Registry reg({testing::plugin_dir()});
  const ModelConfig m = preset_config("llama-2-7b");
  const SimOptions o = h100();
  const RunResult plain = run_sim(reg, m, o, "sampling", {}, 512);
  const double alpha = 0.8;
  const int gamma = 4;
  const RunResult spec = run_sim(reg, m, o, "speculative",
                                 {{"sim_accept_prob", alpha},
                                  {"num_draft", std::int64_t{gamma}},
                                  {"draft_model", std::string("tinyllama-1.1b")}},
                                 512);
  EXPECT_GT(spec.timeline.draft_s, 0);
  const double speedup = metric(compute_metrics(spec.timeline, {}), "throughput_out_tok_s") /
                         metric(compute_metrics(plain.timeline, {}), "throughput_out_tok_s");
  // Theorem 3.8 with c the draft's one-token step over the target's (both batch 1, ~330 keys).
  const double c = sequence_step_cost(preset_config("tinyllama-1.1b"), o, 1, 330).total() /
                   sequence_step_cost(m, o, 1, 330).total();
  EXPECT_GT(c, 0.1);
  EXPECT_NEAR(speedup / (spec_expected_tokens(alpha, gamma) / (gamma * c + 1)), 1.0, 0.05) << "c " << c;
}

}  // namespace
}  // namespace inferlab
