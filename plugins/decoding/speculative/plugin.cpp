// Plugin descriptor for decoding/speculative (class in speculative.h).
#include <algorithm>
#include <map>
#include <string>

#include "inferlab/formats/checkpoint.h"
#include "inferlab/error.h"
#include "inferlab/plugin/plugin.h"
#include "inferlab/plugin/registry.h"
#include "inferlab/sim/sim.h"
#include "plugins/common/decoding/sampling.h"
#include "plugins/common/quantization/float_linear.h"
#include "simulated_draft.h"
#include "speculative.h"

namespace {

inferlab::plugins::SpeculativeParams params_of(const inferlab::Params& p) {
  inferlab::plugins::SpeculativeParams s;
  s.num_draft = static_cast<int>(p.get_int("num_draft"));
  s.draft_layers = static_cast<int>(p.get_int("draft_layers"));
  s.draft_model = p.get_string("draft_model");
  s.sampling = sampling_params_from(p);
  s.draft_kv_tokens = static_cast<int>(p.get_int("draft_kv_tokens"));
  s.draft_quantization = p.get_string("draft_quantization");
  s.adaptive = p.get_bool("adaptive");
  return s;
}

// The draft's shape: the target's first draft_layers layers (self-draft), or draft_model's.
inferlab::ModelConfig sim_draft_config(const inferlab::plugins::SpeculativeParams& s, const inferlab::ModelConfig& target) {
  using namespace inferlab;
  if (s.draft_model.empty()) {
    ModelConfig c = target;
    if (s.draft_layers > 0) c.n_layers = std::min(s.draft_layers, target.n_layers);
    return c;
  }
  const auto presets = preset_names();
  return std::find(presets.begin(), presets.end(), s.draft_model) != presets.end() ? preset_config(s.draft_model)
                                                                                      : read_model_config(s.draft_model);
}

inferlab::PluginDescriptor describe() {
  using namespace inferlab;
  PluginDescriptor d;
  d.kind = PluginKind::kDecoding;
  d.name = "speculative";
  d.version = "1.0.0";
  d.summary = "Speculative decoding: a draft model (self-draft of the first layers, or another checkpoint) proposes, "
              "the target verifies in one pass; lossless (modified rejection sampling)";
  d.params = {
      {"num_draft", ParamType::kInt, std::int64_t{4}, 1.0, 16.0, {}, "γ: draft tokens proposed per step"},
      {"draft_layers", ParamType::kInt, std::int64_t{2}, 0.0, 1024.0, {},
       "Self-draft: the target's first N layers + final norm + classifier (0 = all layers)"},
      {"draft_model", ParamType::kString, std::string(""), std::nullopt, std::nullopt, {},
       "Another draft: a preset name or a checkpoint path with the target's vocabulary (\"\" = self-draft)",
       true, preset_names()},
      {"draft_quantization", ParamType::kString, std::string("none"), std::nullopt, std::nullopt, {},
       "Quantization plugin that stores the draft's linears (e.g. int8, int4: the target itself quantised)"},
      {"draft_activations", ParamType::kString, std::string(""), std::nullopt, std::nullopt, {},
       "Passed to the draft's quantization plugin as its `activations` (e.g. int8: its int8-activation path); "
       "\"\" = that plugin's default"},
      {"draft_group_size", ParamType::kInt, std::int64_t{0}, 0.0, 4096.0, {},
       "Passed to the draft's quantization plugin as its `group_size`; 0 = that plugin's default"},
      {"adaptive", ParamType::kBool, false, std::nullopt, std::nullopt, {},
       "γ per sequence from its running acceptance rate (ceil(α̂ / (1 − α̂)), 1 .. num_draft)"},
      {"draft_kv_tokens", ParamType::kInt, std::int64_t{16384}, 16.0, 1048576.0, {},
       "Capacity of the draft's own KV cache, in tokens"},
      {"sim_accept_prob", ParamType::kFloat, 0.0, 0.0, 1.0, {},
       "Simulation only (device sim): no draft model runs, each draft is accepted with this probability α "
       "(Bernoulli, i.i.d.); 0 = unset (a sim run then refuses this decoder)"},
  };
  add_sampling_param_specs(d.params);  // the target distribution: temperature, top_k, top_p
  d.supports = [](const SupportQuery& q) {
    std::vector<std::string> reasons;
    const auto s = params_of(q.params);
    if (s.draft_quantization == "none" &&
        (q.params.get_int("draft_group_size") > 0 || !q.params.get_string("draft_activations").empty()))
      reasons.push_back("draft_group_size and draft_activations configure the draft's quantization plugin; set "
                        "draft_quantization (e.g. \"int8\", \"int4\") or leave them unset");
    if (s.draft_model.empty()) {
      if (s.draft_layers > q.model.n_layers)
        reasons.push_back("draft_layers = " + std::to_string(s.draft_layers) + " but the model has " +
                          std::to_string(q.model.n_layers) + " layers");
    } else {
      const auto presets = preset_names();
      try {
        const ModelConfig c = std::find(presets.begin(), presets.end(), s.draft_model) != presets.end()
                                  ? preset_config(s.draft_model)
                                  : read_model_config(s.draft_model);
        if (c.vocab_size != q.model.vocab_size)
          reasons.push_back("draft_model '" + s.draft_model + "' has a vocabulary of " + std::to_string(c.vocab_size) +
                            " tokens, the target " + std::to_string(q.model.vocab_size));
      } catch (const Error& e) {
        reasons.push_back(std::string("draft_model: ") + e.what());
      }
    }
    return reasons;
  };
  // A simulated run has no draft model to run: a Bernoulli(α) draft against the synthetic target.
  const auto make_simulated = [](const PluginContext& ctx) -> std::unique_ptr<Decoder> {
    const double alpha = ctx.params.get_float("sim_accept_prob");
    if (alpha <= 0.0) throw Error("decoding 'speculative' on a simulated device needs sim_accept_prob > 0");
    if (ctx.weights == nullptr) throw Error("decoding 'speculative' in simulation needs the run's model config");
    auto* sim = dynamic_cast<SimDevice*>(&ctx.device);
    if (sim == nullptr || sim->options() == nullptr)
      throw Error("decoding 'speculative' in simulation needs the run's cost model (SimDevice::set_options) to "
                  "charge its draft");
    const auto s = params_of(ctx.params);
    const ModelConfig draft = sim_draft_config(s, ctx.weights->config);
    SimOptions options = *sim->options();
    if (options.calibrated)
      throw Error("decoding 'speculative' cannot charge its draft under a calibrated profile (the fit is of the "
                  "target's steps only); use a hardware profile");
    // The draft's linears as draft_quantization stores them (asked on the host, where its
    // planned_bytes probe can build a linear).
    CpuDevice host(1);
    std::shared_ptr<Quantization> quant = std::make_shared<NoQuantization>();
    if (s.draft_quantization != "none") {
      if (ctx.registry == nullptr) throw Error("decoding 'speculative': draft_quantization needs the plugin registry");
      quant = ctx.registry->create_quantization(
          s.draft_quantization,
          ctx.registry->resolve(PluginKind::kQuantization, s.draft_quantization, {}, "decoding 'speculative' draft_quantization"),
          host);
    }
    options.linears = sim_linears(*quant, draft, options.weight_bytes);
    return std::make_unique<plugins::SimulatedDraftDecoder>(s.num_draft, alpha,
                                                            std::min(ctx.weights->config.vocab_size, kSimVocab), *sim,
                                                            draft, options);
  };
  const auto simulated_supports = [](const SupportQuery& q) {
    std::vector<std::string> reasons;
    const double alpha = q.params.get_float("sim_accept_prob");
    if (alpha <= 0.0)
      reasons.push_back("needs real logits: it builds and runs a draft model, which a simulated run (device 'sim') "
                        "never materialises; set sim_accept_prob = α to simulate Bernoulli(α) acceptance instead");
    if (alpha > 0.0 && params_of(q.params).sampling.temperature != 0.0)
      reasons.push_back("sim_accept_prob models greedy verification; temperature must be 0 in simulation");
    return reasons;
  };
  // The draft model runs on the run's device, CPU or CUDA alike.
  const auto make = [](const PluginContext& ctx) -> std::unique_ptr<Decoder> {
    if (ctx.weights == nullptr || ctx.attention == nullptr)
      throw Error("decoding 'speculative' needs the run's model weights and attention to build its draft");
    const auto s = params_of(ctx.params);
    std::shared_ptr<Quantization> quant;
    if (s.draft_quantization != "none") {
      if (ctx.registry == nullptr) throw Error("decoding 'speculative': draft_quantization needs the plugin registry");
      std::map<std::string, ParamValue> qp;
      if (const std::string a = ctx.params.get_string("draft_activations"); !a.empty()) qp["activations"] = a;
      if (const auto g = ctx.params.get_int("draft_group_size"); g > 0) qp["group_size"] = g;
      quant = ctx.registry->create_quantization(
          s.draft_quantization,
          ctx.registry->resolve(PluginKind::kQuantization, s.draft_quantization, qp, "decoding 'speculative' draft_quantization"),
          ctx.device);
    } else if (ctx.registry != nullptr) {  // quantization/none's linears for the run's device (CPU or CUDA)
      quant = ctx.registry->create_quantization(
          "none", ctx.registry->resolve(PluginKind::kQuantization, "none", {}, "decoding 'speculative' draft_quantization"),
          ctx.device);
    }
    return std::make_unique<plugins::SpeculativeDecoder>(s, *ctx.weights, *ctx.attention, ctx.device, std::move(quant));
  };
  const auto real_supports = [](const SupportQuery& q) {
    std::vector<std::string> reasons;
    if (const double alpha = q.params.get_float("sim_accept_prob"); alpha > 0.0)
      reasons.push_back("sim_accept_prob = " + std::to_string(alpha) +
                        " applies only to a simulated run ([device] kind = \"sim\"); a real run verifies its draft model");
    return reasons;
  };
  d.devices = {{DeviceKind::kCpu, {make, real_supports}},
               {DeviceKind::kCuda, {make, real_supports}},
               {DeviceKind::kSim, {make_simulated, simulated_supports}}};
  return d;
}

}  // namespace

INFERLAB_PLUGIN(describe)
