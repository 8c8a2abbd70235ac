// Static layer skipping plans (see layer_skip.h).
#include "layer_skip.h"

#include "inferlab/error.h"

namespace inferlab::plugins {

LayerPlan layer_skip_plan(const std::string& layers, int count, const std::string& heuristic, int n_layers) {
  check(n_layers > 0, "decoding 'layer_skip': the model has no layers");
  const bool listed = layers.find_first_not_of(" \t,") != std::string::npos;
  if (listed && count > 0)
    throw Error("decoding 'layer_skip': give either 'layers' (a list) or 'count' (with a heuristic), not both");
  LayerPlan plan;
  plan.skip.assign(static_cast<std::size_t>(n_layers), false);
  if (listed) {
    for (int l : parse_layer_list(layers, n_layers, "decoding 'layer_skip' layers"))
      plan.skip[static_cast<std::size_t>(l)] = true;
  } else if (count > 0) {
    if (count >= n_layers)
      throw Error("decoding 'layer_skip': count = " + std::to_string(count) + " would skip every layer of " +
                  std::to_string(n_layers) + "; allowed: 0.." + std::to_string(n_layers - 1));
    if (heuristic != "last")
      throw Error("decoding 'layer_skip': heuristic = \"" + heuristic + "\"; allowed: last");
    for (int l = n_layers - 1 - count; l < n_layers - 1; ++l) plan.skip[static_cast<std::size_t>(l)] = true;
  }
  if (plan.active_layers(n_layers) == 0)
    throw Error("decoding 'layer_skip': layers = \"" + layers + "\" skips every layer; allowed: at least one layer left");
  return plan;
}

}  // namespace inferlab::plugins
