// Early exit by confidence (CALM: Schuster et al., "Confident Adaptive Language Modeling",
// NeurIPS 2022). After each chosen intermediate layer the model's final norm and classifier are
// applied to a token's hidden state; when the softmax confidence (the top probability, or the
// top-1 minus top-2 margin) reaches the threshold the token exits with those logits. The layers
// above still get K/V for that position, computed from the exit layer's hidden state (CALM's
// state propagation), so later tokens see a complete cache. Sampling as decoding 'sampling'.
#pragma once
#include <string>

#include "inferlab/plugin/layer_plan.h"

namespace inferlab::plugins {

// exit_layers: comma-separated layer indices below the top one ("" = the upper half: layers
// n/2 .. n-2; after the first layers a tied-embedding model mostly predicts its input token back,
// confidently: stories260K exits 94 % of tokens after layer 0 at threshold 0.99);
// threshold in (0, 1]; criterion "max_prob" or "margin". Throws Error naming the parameter and
// what is allowed.
LayerPlan early_exit_plan(const std::string& exit_layers, double threshold, const std::string& criterion,
                          int n_layers);

}  // namespace inferlab::plugins
