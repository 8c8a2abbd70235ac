// The descriptor shared by decoding plugins that are a LayerPlanDecoder (layer_skip, early_exit):
// the plugin supplies its own parameters and how they become a LayerPlan; the rest (sampling
// parameters, refusal on 'sim', the plan checked at validate against the model's depth, the
// decoder built on the run's model) is the same for every such strategy.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "inferlab/layer_plan.h"
#include "inferlab/plugin.h"

namespace inferlab {

struct LayerPlanPluginSpec {
  std::string name, version, summary;
  std::vector<ParamSpec> params;  // the strategy's own; the sampling parameters are appended
  std::string sim_reason;         // why a simulated run (no real forward pass) cannot run it
  // The plan for a model of n_layers; throws Error naming the parameter when it cannot be made.
  std::function<LayerPlan(const Params&, int n_layers)> plan_of;
};

PluginDescriptor layer_plan_decoding_descriptor(LayerPlanPluginSpec spec);

}  // namespace inferlab
