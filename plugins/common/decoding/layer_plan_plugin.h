// The decoder and descriptor shared by decoding plugins that are a LayerPlanDecoder (layer_skip,
// early_exit): the plugin supplies its own parameters and how they become a LayerPlan; the rest
// (sampling parameters, refusal on 'sim', the plan checked at validate against the model's
// depth, the decoder built on the run's model) is the same for every such strategy.
#pragma once
#include <functional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "inferlab/plugin/decoder.h"
#include "inferlab/plugin/layer_plan.h"
#include "inferlab/plugin/plugin.h"
#include "plugins/common/decoding/sampling.h"

namespace inferlab {

// A decoder that samples one token per step (as decoding 'sampling') from logits computed under
// its LayerPlan. The layer_skip and early_exit strategies are this with different plans.
class LayerPlanDecoder : public Decoder {
 public:
  LayerPlanDecoder(const SamplingParams& sampling, LayerPlan plan) : sampling_(sampling), plan_(std::move(plan)) {}
  void accept(std::span<const int> tokens, std::span<const int> drafts, const float* logits, int vocab, Rng& rng,
              std::vector<int>& out) override;
  LayerPlan* layer_plan() override { return &plan_; }

 private:
  SamplingParams sampling_;
  LayerPlan plan_;
  std::vector<std::pair<float, int>> scratch_;
};

struct LayerPlanPluginSpec {
  std::string name, version, summary;
  std::vector<ParamSpec> params;  // the strategy's own; the sampling parameters are appended
  std::string sim_reason;         // why a simulated run (no real forward pass) cannot run it
  // The plan for a model of n_layers; throws Error naming the parameter when it cannot be made.
  std::function<LayerPlan(const Params&, int n_layers)> plan_of;
};

PluginDescriptor layer_plan_decoding_descriptor(LayerPlanPluginSpec spec);

}  // namespace inferlab
