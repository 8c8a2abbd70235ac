// Per-layer quantization policies (see inferlab/experiment/quantization_rules.h), in the order a rule
// travels: parsed from the experiment's TOML with its file:line, the linears it selects, planned
// against the variant's model (plan_experiment), built as the Quantization that routes each
// linear to its rule's strategy, and reported in the manifest.
#include "inferlab/experiment/quantization_rules.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "experiment/experiment_parse.h"
#include "inferlab/model/calibration.h"
#include "inferlab/error.h"
#include "inferlab/experiment/experiment_keys.h"
#include "inferlab/results/report.h"
#include "inferlab/run/runner.h"

namespace inferlab {

// ---- The rules of a quantization table, as written (experiment_parse.h) ----

using namespace experiment_parse;  // Ctx, check_keys, get_* (experiment_parse.h)

namespace {

constexpr const char* kSelectorForms = "an index, an array of indices [0, 3], \"first:N\" or \"last:N\" (N >= 1)";
constexpr int kMaxLayer = 1 << 20;

LayerSelector parse_layers(const Ctx& c, const toml::node& n) {
  LayerSelector sel;
  if (n.as_integer()) {
    sel.kind = LayerSelector::Kind::kList;
    sel.layers.push_back(static_cast<int>(get_int(c, n, "layers", 0, kMaxLayer)));
    return sel;
  }
  if (const auto* arr = n.as_array()) {
    if (arr->empty()) throw Error(c.at(n) + ": rule 'layers' is an empty array; allowed: " + kSelectorForms);
    sel.kind = LayerSelector::Kind::kList;
    for (const toml::node& e : *arr) sel.layers.push_back(static_cast<int>(get_int(c, e, "layers", 0, kMaxLayer)));
    std::sort(sel.layers.begin(), sel.layers.end());  // ascending, once each (selects() searches it)
    sel.layers.erase(std::unique(sel.layers.begin(), sel.layers.end()), sel.layers.end());
    return sel;
  }
  const auto* s = n.as_string();
  const std::string text = s ? s->get() : "";
  const auto colon = text.find(':');
  const std::string head = text.substr(0, colon == std::string::npos ? 0 : colon);
  const std::string digits = colon == std::string::npos ? "" : text.substr(colon + 1);
  long count = 0;
  bool ok = (head == "first" || head == "last") && !digits.empty() && digits.size() <= 7 &&
            digits.find_first_not_of("0123456789") == std::string::npos;
  if (ok) count = std::stol(digits);
  if (!ok || count < 1)
    throw Error(c.at(n) + ": rule 'layers' = " + (s ? "\"" + text + "\"" : std::string(type_name(n))) +
                "; allowed: " + kSelectorForms);
  sel.kind = head == "first" ? LayerSelector::Kind::kFirst : LayerSelector::Kind::kLast;
  sel.count = static_cast<int>(count);
  return sel;
}

QuantRule parse_rule(const Ctx& c, const toml::node& n) {
  const auto& t = get_table(c, n, "rules[]");
  check_keys(c, t, "a quantization rule", experiment_keys("rule"));
  QuantRule r;
  r.where = c.at(n);
  if (auto v = t.get("match")) {
    r.match = get_string(c, *v, "match");
    if (r.match.empty())
      throw Error(c.at(*v) + ": rule 'match' is empty; allowed: a glob over linear names, e.g. \"layers.0.*\", \"*.w2\"");
  }
  if (auto v = t.get("layers")) r.layers = parse_layers(c, *v);
  if (r.match.empty() && r.layers.kind == LayerSelector::Kind::kAny)
    throw Error(r.where + ": a quantization rule selects linears by 'match' (a glob over names such as "
                          "\"layers.3.wq\") and/or 'layers'; this one has neither");
  const toml::node* m = t.get("method");
  if (!m)
    throw Error(r.where + ": a quantization rule needs 'method' (a quantization plugin: \"int8\", or "
                          "{ name = \"int4\", group_size = 32 })");
  if (auto s = m->as_string()) {
    r.method = s->get();
  } else {
    const auto& mt = get_table(c, *m, "method");
    const toml::node* name = mt.get("name");
    if (!name) throw Error(c.at(*m) + ": rule 'method' table needs 'name' (the quantization plugin)");
    r.method = get_string(c, *name, "method.name");
    for (auto&& [k, v] : mt)
      if (k.str() != "name") r.params[std::string(k.str())] = to_param(c, v, std::string(k.str()));
  }
  if (r.method.empty()) throw Error(c.at(*m) + ": rule 'method' is empty; allowed: a quantization plugin's name");
  return r;
}

}  // namespace

std::vector<QuantRule> parse_quantization_rules(const Ctx& c, const toml::node& n) {
  const auto* arr = n.as_array();
  if (!arr)
    throw Error(c.at(n) + ": quantization 'rules' must be an array of tables, e.g. [ { match = \"layers.0.*\", "
                          "method = \"none\" } ], got " + type_name(n));
  std::vector<QuantRule> rules;
  for (const toml::node& e : *arr) rules.push_back(parse_rule(c, e));
  return rules;
}

void apply_quantization_rules(const Ctx& c, const toml::node& node, const std::string& before, Stack& s) {
  const auto* t = node.as_table();
  if (t != nullptr && t->get("rules") != nullptr) s.quantization_rules = parse_quantization_rules(c, *t->get("rules"));
  else if (t == nullptr || s.quantization.name != before) s.quantization_rules.clear();
}

// ---- Which linears a rule selects ----

bool LayerSelector::selects(int layer, int n_layers) const {
  switch (kind) {
    case Kind::kAny: return true;
    case Kind::kList: return layer >= 0 && std::binary_search(layers.begin(), layers.end(), layer);
    case Kind::kFirst: return layer >= 0 && layer < count;
    case Kind::kLast: return layer >= 0 && layer >= n_layers - count;
  }
  return false;
}

std::string LayerSelector::toml() const {
  switch (kind) {
    case Kind::kAny: return "";
    case Kind::kFirst: return "\"first:" + std::to_string(count) + "\"";
    case Kind::kLast: return "\"last:" + std::to_string(count) + "\"";
    case Kind::kList: {
      std::string s = "[";
      for (std::size_t i = 0; i < layers.size(); ++i) s += (i ? ", " : "") + std::to_string(layers[i]);
      return s + "]";
    }
  }
  return "";
}

bool glob_match(const std::string& pattern, const std::string& name) {
  // Iterative matching with one backtrack point (the last '*'): linear in practice.
  std::size_t p = 0, n = 0, star = std::string::npos, resume = 0;
  while (n < name.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == name[n])) {
      ++p, ++n;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = n;
    } else if (star != std::string::npos) {
      p = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

std::vector<LinearSlot> model_linears(const ModelConfig& c) {
  std::vector<LinearSlot> out;
  const int d = c.dim, h = c.hidden_dim, kv = c.kv_dim();
  for (int l = 0; l < c.n_layers; ++l) {
    const std::string p = "layers." + std::to_string(l) + ".";
    // The order and shapes of Model's constructor.
    out.push_back({p + "wq", l, d, d});
    out.push_back({p + "wk", l, kv, d});
    out.push_back({p + "wv", l, kv, d});
    out.push_back({p + "wo", l, d, d});
    out.push_back({p + "w1", l, h, d});
    out.push_back({p + "w2", l, d, h});
    out.push_back({p + "w3", l, h, d});
  }
  out.push_back({"classifier", -1, c.vocab_size, d});
  // A separate classifier leaves the embedding table its own linear (Model builds it last; the
  // lookup reads its rows through Linear::dequantize_row).
  if (!c.tied_classifier) out.push_back({"embedding", -1, c.vocab_size, d});
  return out;
}

bool rule_selects(const QuantRule& rule, const LinearSlot& slot, int n_layers) {
  if (!rule.match.empty() && !glob_match(rule.match, slot.name)) return false;
  if (rule.layers.kind == LayerSelector::Kind::kAny) return true;
  return slot.layer >= 0 && rule.layers.selects(slot.layer, n_layers);
}

std::uint64_t RuleAssignment::linears() const {
  std::uint64_t n = static_cast<std::uint64_t>(unruled);
  for (const auto& names : by_rule) n += names.size();
  return n;
}

RuleAssignment assign_rules(const std::vector<QuantRule>& rules, const ModelConfig& model) {
  RuleAssignment a;
  a.by_rule.resize(rules.size());
  for (const LinearSlot& slot : model_linears(model)) {
    std::size_t r = 0;
    while (r < rules.size() && !rule_selects(rules[r], slot, model.n_layers)) ++r;
    if (r < rules.size()) a.by_rule[r].push_back(slot.name);
    else ++a.unruled;
  }
  return a;
}

// ---- Planning: each rule checked against the variant's model ----

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

// ---- Building: the variant's Quantization ----

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

RuledQuantization::RuledQuantization(std::shared_ptr<Quantization> fallback,
                                     std::vector<std::shared_ptr<Quantization>> strategies,
                                     const RuleAssignment& assignment)
    : fallback_(std::move(fallback)), strategies_(std::move(strategies)) {
  check(fallback_ != nullptr && strategies_.size() == assignment.by_rule.size(),
        "quantization rules: one strategy per rule and a fallback are needed");
  for (std::size_t r = 0; r < assignment.by_rule.size(); ++r) {
    check(strategies_[r] != nullptr, "quantization rules: rule " + std::to_string(r + 1) + " has no strategy");
    for (const std::string& name : assignment.by_rule[r]) rule_of_.emplace(name, r);
  }
}

Quantization& RuledQuantization::strategy_for(const std::string& name) const {
  const auto it = rule_of_.find(name);
  return it == rule_of_.end() ? *fallback_ : *strategies_[it->second];
}

std::unique_ptr<Linear> RuledQuantization::make_linear(const std::string& name, std::vector<float> weight, int out,
                                                       int in) {
  return strategy_for(name).make_linear(name, std::move(weight), out, in);
}

std::unique_ptr<Linear> RuledQuantization::make_linear(const std::string& name, std::vector<float> weight, int out,
                                                       int in, const LinearCalibration* calib) {
  return strategy_for(name).make_linear(name, std::move(weight), out, in, calib);
}

CalibrationNeeds RuledQuantization::calibration_needs() const {
  CalibrationNeeds needs = fallback_->calibration_needs();
  for (const auto& s : strategies_) needs = merge_needs(needs, s->calibration_needs());
  return needs;
}

// ---- The manifest's record ----

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
