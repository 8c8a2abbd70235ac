// Plugin descriptor for decoding/early_exit (plan in early_exit.h).
#include "early_exit.h"
#include "inferlab/error.h"
#include "inferlab/plugin.h"

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
      {"temperature", ParamType::kFloat, 0.0, 0.0, 100.0, {}, "Sampling temperature (0 = greedy)"},
      {"top_k", ParamType::kInt, std::int64_t{0}, 0.0, 1e9, {}, "Sample among the k most likely (0 = off)"},
      {"top_p", ParamType::kFloat, 1.0, 1e-9, 1.0, {}, "Nucleus mass"},
  };
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
    SamplingParams sp;
    sp.temperature = ctx.params.get_float("temperature");
    sp.top_k = static_cast<int>(ctx.params.get_int("top_k"));
    sp.top_p = ctx.params.get_float("top_p");
    return std::make_unique<LayerPlanDecoder>(sp, plan_of(ctx.params, ctx.weights->config.n_layers));
  };
  return d;
}

}  // namespace

INFERLAB_PLUGIN(describe)
