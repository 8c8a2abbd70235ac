// Early-exit plans (see early_exit.h).
#include "early_exit.h"

#include "inferlab/error.h"

namespace inferlab::plugins {

LayerPlan early_exit_plan(const std::string& exit_layers, double threshold, const std::string& criterion,
                          int n_layers) {
  check(n_layers > 0, "decoding 'early_exit': the model has no layers");
  if (!(threshold > 0.0 && threshold <= 1.0))
    throw Error("decoding 'early_exit': threshold = " + std::to_string(threshold) + "; allowed: (0, 1]");
  LayerPlan plan;
  if (!parse_exit_criterion(criterion, plan.criterion))
    throw Error("decoding 'early_exit': criterion = \"" + criterion + "\"; allowed: max_prob, margin");
  plan.threshold = threshold;
  if (exit_layers.find_first_not_of(" \t,") == std::string::npos) {
    for (int l = n_layers / 2; l + 1 < n_layers; ++l) plan.exit_after.push_back(l);
  } else {
    plan.exit_after = parse_layer_list(exit_layers, n_layers, "decoding 'early_exit' exit_layers");
    if (plan.exit_after.back() == n_layers - 1)
      throw Error("decoding 'early_exit' exit_layers names layer " + std::to_string(n_layers - 1) +
                  ", the top one, where every token leaves anyway; allowed: 0.." + std::to_string(n_layers - 2));
  }
  if (plan.exit_after.empty())
    throw Error("decoding 'early_exit': a model of " + std::to_string(n_layers) +
                " layer(s) has no layer in its upper half below the top to exit after; name exit_layers");
  return plan;
}

}  // namespace inferlab::plugins
