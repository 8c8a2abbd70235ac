// Per-layer quantization policies (mixed precision): an ordered list of rules, each selecting
// linears by a glob over their canonical names and/or a layer selector and naming the
// quantization plugin (with its parameters) that builds them. The first rule that selects a
// linear decides; linears no rule selects get the variant's own method. The rules are written
// in the experiment as `quantization = { name = ..., rules = [ ... ] }` (docs/experiment-format.md),
// parsed with their file:line (parse_quantization_rules, experiment_parse.h), planned against the
// variant's model (plan_quantization_rules) and built (make_variant_quantization), all in
// quantization_rules.cpp.
//
// Canonical linear names (the ones Model builds and calibration records): "layers.L.wq",
// "layers.L.wk", "layers.L.wv", "layers.L.wo", "layers.L.w1", "layers.L.w2", "layers.L.w3" for
// L = 0 .. n_layers-1, and "classifier" (the LM head; with a tied classifier it is a quantized
// copy of the embedding). The token embedding is a gather, not a linear: it stays fp32 and no
// rule can select it.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "inferlab/model/model_config.h"
#include "inferlab/plugin/params.h"
#include "inferlab/plugin/quantization.h"

namespace inferlab {

struct ExperimentSpec;
struct ModelWeights;
struct ResolvedVariant;
class Registry;

// Which transformer layers a rule selects: every layer (unset), an index list, the first N or
// the last N. The classifier belongs to no layer, so a rule with a layer selector never takes it.
struct LayerSelector {
  enum class Kind { kAny, kList, kFirst, kLast };
  Kind kind = Kind::kAny;
  std::vector<int> layers;  // kList, ascending without repeats
  int count = 0;            // kFirst / kLast
  bool selects(int layer, int n_layers) const;
  // As written in TOML: [0, 3], "first:2", "last:1" ("" for kAny).
  std::string toml() const;
};

struct QuantRule {
  std::string match;      // glob over canonical names ('*' any run, '?' one char); "" = any name
  LayerSelector layers;
  std::string method;     // a quantization plugin, loaded by the registry (out-of-tree ones too)
  std::map<std::string, ParamValue> params;  // the method's parameters, as given
  std::string where;      // "file:line:col" of the rule
};

// '*' matches any run of characters (dots included), '?' exactly one; everything else itself.
bool glob_match(const std::string& pattern, const std::string& name);

// One linear of a model, in the order Model builds them.
struct LinearSlot {
  std::string name;  // canonical name
  int layer;         // -1 for the classifier
  int out, in;       // weight [out, in]
};
std::vector<LinearSlot> model_linears(const ModelConfig& model);

// Whether `rule` selects `slot` in a model of n_layers layers (pattern and selector both hold).
bool rule_selects(const QuantRule& rule, const LinearSlot& slot, int n_layers);

// Which rule each linear of a model falls under (first match wins), fixed at planning so that
// the manifest reports exactly what runs.
struct RuleAssignment {
  std::vector<std::vector<std::string>> by_rule;  // [rule] canonical names it took, build order
  int unruled = 0;                                // linears left to the variant's own method
  std::uint64_t linears() const;                  // every linear of the model
};
RuleAssignment assign_rules(const std::vector<QuantRule>& rules, const ModelConfig& model);

// The variant's Quantization with rules: make_linear hands each linear to the strategy of the
// rule the assignment gave it (with its calibration statistics, when that strategy asked), or
// to `fallback`. calibration_needs() is the union over all strategies.
class RuledQuantization : public Quantization {
 public:
  // strategies[r] builds the linears of assignment.by_rule[r].
  RuledQuantization(std::shared_ptr<Quantization> fallback, std::vector<std::shared_ptr<Quantization>> strategies,
                    const RuleAssignment& assignment);
  std::unique_ptr<Linear> make_linear(const std::string& name, std::vector<float> weight, int out, int in) override;
  std::unique_ptr<Linear> make_linear(const std::string& name, std::vector<float> weight, int out, int in,
                                      const LinearCalibration* calib) override;
  CalibrationNeeds calibration_needs() const override;
  bool needs_values(const std::string& name) const override { return strategy_for(name).needs_values(name); }
  std::uint64_t planned_bytes(const std::string& name, int out, int in, const ModelConfig& model) override {
    return strategy_for(name).planned_bytes(name, out, in, model);
  }
  LinearArithmetic arithmetic(const std::string& name, const ModelConfig& model) const override {
    return strategy_for(name).arithmetic(name, model);
  }
  // The strategy that builds linear `name`.
  Quantization& strategy_for(const std::string& name) const;

 private:
  std::shared_ptr<Quantization> fallback_;
  std::vector<std::shared_ptr<Quantization>> strategies_;
  std::map<std::string, std::size_t> rule_of_;  // canonical name → index into strategies_
};

// A variant's quantization as one strategy: its plugin alone, or, with rules, a RuledQuantization
// over its plugin and the rules' plugins. Every place that builds or sizes a variant's model
// (cells, the baseline's quality reference, calibration needs, the memory estimate) makes it here.
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
