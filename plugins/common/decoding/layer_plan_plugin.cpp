// The decoder and descriptor of the layer-plan decoding strategies (see layer_plan_plugin.h).
#include "plugins/common/decoding/layer_plan_plugin.h"

#include "inferlab/error.h"

namespace inferlab {

void LayerPlanDecoder::accept(std::span<const int> tokens, std::span<const int> drafts, const float* logits, int vocab,
                              Rng& rng, std::vector<int>& out) {
  (void)tokens;
  check(drafts.empty(), "a layer-plan decoder never drafts, yet was asked to verify drafts");
  out.push_back(sample_token(logits, vocab, sampling_, rng, scratch_));
}

PluginDescriptor layer_plan_decoding_descriptor(LayerPlanPluginSpec spec) {
  PluginDescriptor d;
  d.kind = PluginKind::kDecoding;
  d.name = spec.name;
  d.version = spec.version;
  d.summary = spec.summary;
  d.params = spec.params;
  add_sampling_param_specs(d.params);
  auto plan_of = spec.plan_of;
  d.supports = [plan_of, sim_reason = spec.sim_reason](const SupportQuery& q) {
    std::vector<std::string> reasons;
    if (q.device == DeviceKind::kSim) reasons.push_back(sim_reason);
    try {
      plan_of(q.params, q.model.n_layers);
    } catch (const Error& e) {
      reasons.push_back(e.what());
    }
    return reasons;
  };
  d.devices[DeviceKind::kCpu] = [plan_of, name = spec.name](const PluginContext& ctx) -> std::unique_ptr<Decoder> {
    if (ctx.weights == nullptr) throw Error("decoding '" + name + "' needs the run's model to know its depth");
    return std::make_unique<LayerPlanDecoder>(sampling_params_from(ctx.params),
                                              plan_of(ctx.params, ctx.weights->config.n_layers));
  };
  return d;
}

}  // namespace inferlab
