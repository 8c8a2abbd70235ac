// Plugin descriptor for decoding/layer_skip (plan in layer_skip.h).
#include "layer_skip.h"
#include "plugins/common/decoding/layer_plan_plugin.h"

namespace {

inferlab::PluginDescriptor describe() {
  using namespace inferlab;
  return layer_plan_decoding_descriptor({
      .name = "layer_skip",
      .version = "1.0.0",
      .summary = "Static layer skipping: listed layers (or a count by heuristic) do no compute and hold no K/V for "
                 "every token; sampling as 'sampling'",
      .params =
          {
              {"layers", ParamType::kString, std::string(""), std::nullopt, std::nullopt, {},
               "Comma-separated layer indices to skip, e.g. \"3,4\" (\"\" = none, or use count)"},
              {"count", ParamType::kInt, std::int64_t{0}, 0.0, 1024.0, {},
               "Skip this many layers chosen by 'heuristic'"},
              {"heuristic", ParamType::kString, std::string("last"), std::nullopt, std::nullopt, {"last"},
               "How count picks layers: last = the count layers just below the top one"},
          },
      .sim_reason = "changes the model's forward pass, which a simulated run (device 'sim') never runs",
      .plan_of =
          [](const Params& p, int n_layers) {
            return plugins::layer_skip_plan(p.get_string("layers"), static_cast<int>(p.get_int("count")),
                                            p.get_string("heuristic"), n_layers);
          },
  });
}

}  // namespace

INFERLAB_PLUGIN(describe)
