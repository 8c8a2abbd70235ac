// A variant's quantization as one strategy: its plugin alone, or, with per-layer rules
// (quantization_rules.h), a RuledQuantization over its plugin and the rules' plugins. Every
// place that builds or sizes a variant's model (cells, the baseline's quality reference,
// calibration needs, the memory estimate) makes it here.
#pragma once
#include <map>
#include <memory>
#include <string>

#include "inferlab/runner.h"

namespace inferlab {

// weights: the run's weights, for strategies that run the checkpoint's own blocks
// (quantization/gguf; Registry::create_quantization); null when planning.
std::shared_ptr<Quantization> make_variant_quantization(const Registry& registry, const ResolvedVariant& v,
                                                        Device& device, const ModelWeights* weights = nullptr);

// Planning of a variant's rules against the model it runs (`model`, on `device`): fills
// v.rule_params and v.rule_assignment. Throws Error at the rule's file:line for a method the
// registry does not know or whose parameters are wrong, a bad layer selector (an index or N
// beyond the model's layers), a rule that selects no linear of the model or only linears an
// earlier rule took, a method that cannot run here (device, its own check, calibration without
// a [calibration] section or on a substituted model), a group_size wider than a selected
// linear's rows, and for rules on a simulated run (which builds no linears).
void plan_quantization_rules(const ExperimentSpec& spec, const Registry& registry, const ModelConfig& model,
                             DeviceKind device, ResolvedVariant& v);

// Refuses (at `where`) a `group_size` parameter wider than the rows (input channels) of any
// of `linears`: the whole row would be one partial group.
void check_group_size_fits(const Params& params, const std::vector<LinearSlot>& linears, const std::string& where);

// Linears per method after the rules (a method named by several rules, or by a rule and the
// variant, summed); without rules every linear is the variant's method's.
std::map<std::string, std::size_t> linears_per_method(const ResolvedVariant& v);

// The manifest's "quantization_rules" of a variant: each rule (match, layers, method, resolved
// parameters) with the linears it took, and how many linears the variant's own method builds.
std::string quantization_rules_json(const ResolvedVariant& v);

}  // namespace inferlab
