// Plugin descriptor for decoding/layer_skip (plan in layer_skip.h).
#include "inferlab/error.h"
#include "inferlab/plugin.h"
#include "inferlab/sampling.h"
#include "layer_skip.h"

namespace {

inferlab::LayerPlan plan_of(const inferlab::Params& p, int n_layers) {
  return inferlab::plugins::layer_skip_plan(p.get_string("layers"), static_cast<int>(p.get_int("count")),
                                            p.get_string("heuristic"), n_layers);
}

inferlab::PluginDescriptor describe() {
  using namespace inferlab;
  PluginDescriptor d;
  d.kind = PluginKind::kDecoding;
  d.name = "layer_skip";
  d.version = "1.0.0";
  d.summary = "Static layer skipping: listed layers (or a count by heuristic) do no compute and hold no K/V for "
              "every token; sampling as 'sampling'";
  d.params = {
      {"layers", ParamType::kString, std::string(""), std::nullopt, std::nullopt, {},
       "Comma-separated layer indices to skip, e.g. \"3,4\" (\"\" = none, or use count)"},
      {"count", ParamType::kInt, std::int64_t{0}, 0.0, 1024.0, {}, "Skip this many layers chosen by 'heuristic'"},
      {"heuristic", ParamType::kString, std::string("last"), std::nullopt, std::nullopt, {"last"},
       "How count picks layers: last = the count layers just below the top one"},
  };
  add_sampling_param_specs(d.params);
  d.supports = [](const SupportQuery& q) {
    std::vector<std::string> reasons;
    if (q.device == DeviceKind::kSim)
      reasons.push_back("changes the model's forward pass, which a simulated run (device 'sim') never runs");
    try {
      plan_of(q.params, q.model.n_layers);
    } catch (const Error& e) {
      reasons.push_back(e.what());
    }
    return reasons;
  };
  d.make_decoder = [](const PluginContext& ctx) -> std::unique_ptr<Decoder> {
    if (ctx.weights == nullptr) throw Error("decoding 'layer_skip' needs the run's model to know its depth");
    return std::make_unique<LayerPlanDecoder>(sampling_params_from(ctx.params),
                                              plan_of(ctx.params, ctx.weights->config.n_layers));
  };
  return d;
}

}  // namespace

INFERLAB_PLUGIN(describe)
