// Plugin descriptor for decoding/early_exit (plan in early_exit.h).
#include "early_exit.h"
#include "plugins/common/decoding/layer_plan_plugin.h"

namespace {

inferlab::PluginDescriptor describe() {
  using namespace inferlab;
  return layer_plan_decoding_descriptor({
      .name = "early_exit",
      .version = "1.0.0",
      .summary = "Early exit by confidence (CALM): final norm + classifier after chosen layers, a token leaves when "
                 "its confidence reaches the threshold; upper layers' K/V from the exit state",
      .params =
          {
              {"exit_layers", ParamType::kString, std::string(""), std::nullopt, std::nullopt, {},
               "Comma-separated layers a token may exit after, e.g. \"1,3\" (\"\" = layers n/2 .. n-2)"},
              {"threshold", ParamType::kFloat, 0.9, std::nullopt, std::nullopt, {},
               "Exit when the confidence reaches this, in (0, 1] (1 = only at probability 1)"},
              {"criterion", ParamType::kString, std::string("max_prob"), std::nullopt, std::nullopt,
               {"max_prob", "margin"},
               "Confidence: max_prob = top softmax probability, margin = top-1 minus top-2 probability"},
          },
      .sim_reason = "needs real logits at intermediate layers, which a simulated run (device 'sim') never has",
      .plan_of =
          [](const Params& p, int n_layers) {
            return plugins::early_exit_plan(p.get_string("exit_layers"), p.get_float("threshold"),
                                            p.get_string("criterion"), n_layers);
          },
  });
}

}  // namespace

INFERLAB_PLUGIN(describe)
