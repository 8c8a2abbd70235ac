#include "inferlab/variant_quantization.h"

#include <map>
#include <set>
#include <utility>

#include "inferlab/error.h"
#include "inferlab/report.h"

namespace inferlab {

std::shared_ptr<Quantization> make_variant_quantization(const Registry& registry, const ResolvedVariant& v,
                                                        Device& device, const ModelWeights* weights) {
  auto own = registry.create_quantization(v.stack.quantization.name, v.quantization, device, weights);
  const auto& rules = v.stack.quantization_rules;
  if (rules.empty()) return own;
  check(v.rule_params.size() == rules.size() && v.rule_assignment.by_rule.size() == rules.size(),
        "variant '" + v.name + "': quantization rules were not planned (plan_quantization_rules)");
  std::vector<std::shared_ptr<Quantization>> strategies;
  for (std::size_t r = 0; r < rules.size(); ++r)
    strategies.push_back(registry.create_quantization(rules[r].method, v.rule_params[r], device, weights));
  return std::make_shared<RuledQuantization>(std::move(own), std::move(strategies), v.rule_assignment);
}

void check_group_size_fits(const Params& params, const std::vector<LinearSlot>& linears, const std::string& where) {
  const auto it = params.values().find("group_size");
  const auto* group = it == params.values().end() ? nullptr : std::get_if<std::int64_t>(&it->second);
  if (group == nullptr) return;
  for (const LinearSlot& l : linears)
    if (*group > l.in)
      throw Error(where + ": group_size = " + std::to_string(*group) + " is wider than the rows of " + l.name + " (" +
                  std::to_string(l.in) + " input channels), which would be one partial group; allowed: group_size <= " +
                  std::to_string(l.in));
}

namespace {

std::string describe_linears(const ModelConfig& model) {
  return "the model's linears are layers.0.wq .. layers." + std::to_string(model.n_layers - 1) +
         ".{wq,wk,wv,wo,w1,w2,w3} and classifier (the token embedding is a gather, stored fp32, and no rule selects it)";
}

void check_selector(const LayerSelector& sel, const ModelConfig& model, const std::string& where) {
  const int n = model.n_layers;
  const std::string allowed = "; allowed: layer indices 0.." + std::to_string(n - 1) + ", \"first:N\" or \"last:N\" with N in 1.." +
                              std::to_string(n);
  for (int l : sel.layers)
    if (l >= n) throw Error(where + ": layers selects layer " + std::to_string(l) + ", but the model has " + std::to_string(n) + " layers" + allowed);
  if (sel.count > n)
    throw Error(where + ": layers = " + sel.toml() + " asks for more layers than the model's " + std::to_string(n) + allowed);
}

}  // namespace

void plan_quantization_rules(const ExperimentSpec& spec, const Registry& registry, const ModelConfig& model,
                             DeviceKind device, ResolvedVariant& v) {
  const auto& rules = v.stack.quantization_rules;
  v.rule_params.clear();
  const std::vector<LinearSlot> linears = model_linears(model);
  v.rule_assignment = assign_rules(rules, model);
  std::set<std::string> ruled;
  CpuDevice host(1);
  for (std::size_t r = 0; r < rules.size(); ++r) {
    const QuantRule& rule = rules[r];
    const std::string where = rule.where + ": variant '" + v.name + "': quantization rule " + std::to_string(r + 1);
    if (device == DeviceKind::kSim)
      throw Error(where + ": a simulated run (device kind \"sim\") builds no linears, so per-layer rules would be "
                          "ignored; allowed: rules on a cpu or cuda run");
    v.rule_params.push_back(registry.resolve(PluginKind::kQuantization, rule.method, rule.params, where));
    check_selector(rule.layers, model, where);
    std::vector<LinearSlot> taken;
    bool selects_any = false;
    for (const LinearSlot& l : linears) {
      if (!rule_selects(rule, l, model.n_layers)) continue;
      selects_any = true;
      if (ruled.insert(l.name).second) taken.push_back(l);
    }
    if (!selects_any) throw Error(where + ": selects no linear of the model; " + describe_linears(model));
    if (taken.empty())
      throw Error(where + ": every linear it selects is taken by an earlier rule (the first matching rule wins); "
                          "allowed: reorder the rules or drop this one");
    SupportQuery q{model, device, v.stack.kv.format, v.rule_params.back()};
    const auto reasons = registry.check_support(PluginKind::kQuantization, rule.method, q);
    if (!reasons.empty()) {
      std::string all;
      for (const auto& reason : reasons) all += (all.empty() ? "" : "; ") + reason;
      throw Error(where + ": quantization '" + rule.method + "' cannot run this: " + all);
    }
    check_group_size_fits(v.rule_params.back(), taken, where + ": quantization '" + rule.method + "'");
    std::shared_ptr<Quantization> strategy;
    try {  // a constructor's check gets the rule's location
      strategy = registry.create_quantization(rule.method, v.rule_params.back(), host);
    } catch (const Error& e) {
      throw Error(where + ": quantization '" + rule.method + "' cannot run this: " + e.what());
    }
    if (strategy->calibration_needs().any() && v.model)
      throw Error(where + ": quantization '" + rule.method + "' calibrates on the baseline model's activations, which "
                          "do not fit the variant's substituted model; allowed: a method without calibration");
    if (strategy->calibration_needs().any() && !spec.calibration.enabled)
      throw Error(where + ": quantization '" + rule.method + "' calibrates on the float model's activations and needs "
                          "a [calibration] section (text, tokens, seq_len, seed)");
  }
}

std::map<std::string, std::size_t> linears_per_method(const ResolvedVariant& v) {
  const auto& rules = v.stack.quantization_rules;
  std::map<std::string, std::size_t> per_method{
      {v.stack.quantization.name, static_cast<std::size_t>(v.rule_assignment.unruled)}};
  for (std::size_t r = 0; r < rules.size() && r < v.rule_assignment.by_rule.size(); ++r)
    per_method[rules[r].method] += v.rule_assignment.by_rule[r].size();
  return per_method;
}

std::string quantization_rules_json(const ResolvedVariant& v) {
  const auto& rules = v.stack.quantization_rules;
  std::string out = "{\"method\": " + json_quote(v.stack.quantization.name) + ", \"linears_per_method\": {";
  for (const auto& [method, n] : linears_per_method(v))
    out += std::string(out.back() == '{' ? "" : ", ") + json_quote(method) + ": " + std::to_string(n);
  out += "}, \"rules\": [";
  for (std::size_t r = 0; r < rules.size(); ++r) {
    const QuantRule& rule = rules[r];
    out += std::string(r ? ", " : "") + "{\"match\": " + json_quote(rule.match) + ", \"layers\": " +
           (rule.layers.kind == LayerSelector::Kind::kAny ? "null" : rule.layers.toml()) + ", \"method\": " + json_quote(rule.method) + ", \"params\": {";
    if (r < v.rule_params.size()) {
      bool first = true;
      for (const auto& [k, p] : v.rule_params[r].values()) {
        const auto* text = std::get_if<std::string>(&p);  // numbers and booleans are JSON as written
        out += std::string(first ? "" : ", ") + json_quote(k) + ": " + (text ? json_quote(*text) : param_value_to_string(p));
        first = false;
      }
    }
    out += "}, \"linears\": [";
    if (r < v.rule_assignment.by_rule.size())
      for (std::size_t i = 0; i < v.rule_assignment.by_rule[r].size(); ++i)
        out += std::string(i ? ", " : "") + json_quote(v.rule_assignment.by_rule[r][i]);
    out += "]}";
  }
  return out + "]}";
}

}  // namespace inferlab
