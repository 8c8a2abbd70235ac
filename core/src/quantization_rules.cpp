// Per-layer quantization policies: rule selection, the assignment of linears to rules and the
// Quantization that routes each linear to its rule's strategy (see quantization_rules.h).
#include "inferlab/quantization_rules.h"

#include <algorithm>

#include "inferlab/calibration.h"
#include "inferlab/error.h"

namespace inferlab {

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

}  // namespace inferlab
