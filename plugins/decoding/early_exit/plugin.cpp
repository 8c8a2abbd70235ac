// Plugin descriptor for decoding/early_exit (plan in early_exit.h).
#include "early_exit.h"
#include "inferlab/error.h"
#include "inferlab/plugin.h"
#include "inferlab/sampling.h"

namespace {

inferlab::LayerPlan plan_of(const inferlab::Params& p, int n_layers) {
  return inferlab::plugins::early_exit_plan(p.get_string("exit_layers"), p.get_float("threshold"),
                                            p.get_string("criterion"), n_layers);
}

inferlab::PluginDescriptor describe() {
  using namespace inferlab;
  PluginDescriptor d;
  d.kind = PluginKind::kDecoding;
  d.name = "early_exit";
  d.version = "1.0.0";
  d.summary = "Early exit by confidence (CALM): final norm + classifier after chosen layers, a token leaves when "
              "its confidence reaches the threshold; upper layers' K/V from the exit state";
  d.params = {
      {"exit_layers", ParamType::kString, std::string(""), std::nullopt, std::nullopt, {},
       "Comma-separated layers a token may exit after, e.g. \"1,3\" (\"\" = layers n/2 .. n-2)"},
      {"threshold", ParamType::kFloat, 0.9, std::nullopt, std::nullopt, {},
       "Exit when the confidence reaches this, in (0, 1] (1 = only at probability 1)"},
      {"criterion", ParamType::kString, std::string("max_prob"), std::nullopt, std::nullopt, {"max_prob", "margin"},
       "Confidence: max_prob = top softmax probability, margin = top-1 minus top-2 probability"},
  };
  add_sampling_param_specs(d.params);
  d.supports = [](const SupportQuery& q) {
    std::vector<std::string> reasons;
    if (q.device == DeviceKind::kSim)
      reasons.push_back("needs real logits at intermediate layers, which a simulated run (device 'sim') never has");
    try {
      plan_of(q.params, q.model.n_layers);
    } catch (const Error& e) {
      reasons.push_back(e.what());
    }
    return reasons;
  };
  d.make_decoder = [](const PluginContext& ctx) -> std::unique_ptr<Decoder> {
    if (ctx.weights == nullptr) throw Error("decoding 'early_exit' needs the run's model to know its depth");
    return std::make_unique<LayerPlanDecoder>(sampling_params_from(ctx.params),
                                              plan_of(ctx.params, ctx.weights->config.n_layers));
  };
  return d;
}

}  // namespace

INFERLAB_PLUGIN(describe)
