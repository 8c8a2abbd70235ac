// Static layer skipping: a fixed set of decoder layers is left out for every token (no compute,
// no K/V), chosen by hand or by a named heuristic. The residual stream simply passes the skipped
// layer by, which is what the pre-norm residual architecture makes cheap to try (Men et al.,
// "ShortGPT: Layers in Large Language Models are More Redundant Than You Expect", 2024; Elhoushi
// et al., "LayerSkip", 2024, train for it). Tokens are sampled as decoding 'sampling' does.
#pragma once
#include <string>

#include "inferlab/plugin/layer_plan.h"

namespace inferlab::plugins {

// Heuristics naming `count` layers to skip in a model of n_layers:
//   "last": the count layers directly below the top one (n-1-count .. n-2); the top layer, which
//           writes the state the classifier reads, always runs.
inline constexpr const char* kLayerSkipHeuristics[] = {"last"};

// The plan for `layers` (comma-separated indices) or, when it is empty, `count` layers picked by
// `heuristic`. Throws Error naming the parameter and the allowed values: a layer the model does
// not have, both a list and a count, a count that would leave no layer.
LayerPlan layer_skip_plan(const std::string& layers, int count, const std::string& heuristic, int n_layers);

}  // namespace inferlab::plugins
