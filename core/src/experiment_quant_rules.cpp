#include "experiment_quant_rules.h"

#include <algorithm>

#include "inferlab/experiment_keys.h"

namespace inferlab {

using namespace experiment_parse;

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

}  // namespace inferlab
