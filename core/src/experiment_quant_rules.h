// The `rules` of a quantization choice (internal to core/src/experiment*.cpp): per-layer
// quantization policies, parsed with their file:line (the model-dependent checks are at
// planning, variant_quantization.h).
#pragma once
#include <string>
#include <vector>

#include <toml++/toml.h>

#include "experiment_parse.h"
#include "inferlab/experiment.h"

namespace inferlab {

// rules = [ { match = "layers.0.*", layers = "first:2" | [0, 3] | 5, method = "int8" |
// { name = "int4", group_size = 32 } }, ... ]: each rule needs a method and match and/or layers.
std::vector<QuantRule> parse_quantization_rules(const experiment_parse::Ctx& c, const toml::node& n);

// After `quantization = node` was applied to s.quantization (whose plugin was `before`): a
// table's `rules` replace the stack's; naming another plugin (or a bare string) without rules
// drops the inherited ones; a table of parameters for the same plugin keeps them.
void apply_quantization_rules(const experiment_parse::Ctx& c, const toml::node& node, const std::string& before,
                              Stack& s);

}  // namespace inferlab
