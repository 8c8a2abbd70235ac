// The small TOML helpers an experiment file's parsers share (internal to core/src/experiment*.cpp):
// node locations for errors, key checks, typed getters that name the key and what is allowed.
#pragma once
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "inferlab/experiment/tomlpp.h"

#include "experiment/experiment_override.h"
#include "inferlab/error.h"
#include "inferlab/experiment/experiment.h"
#include "inferlab/experiment/input_checks.h"
#include "inferlab/plugin/params.h"

namespace inferlab::experiment_parse {

// Locates nodes for error messages: "file:line:col", or "file (--set key)" for overrides.
struct Ctx {
  std::string file;
  // Where the nodes of a table built in code came from: toml++ copies no source region, so a
  // [sweep] value copied into a table would otherwise read as a --set value.
  std::string copied_at;
  std::string at(const toml::node& n) const { return at(n.source()); }
  std::string at(const toml::key& k) const { return at(k.source()); }
  std::string at(const toml::source_region& src) const {
    if (src.begin.line == 0 && !copied_at.empty()) return copied_at;
    if (src.begin.line == 0 || (src.path && *src.path == kOverrideSource)) return file + " (--set)";
    return file + ":" + std::to_string(src.begin.line) + ":" + std::to_string(src.begin.column);
  }
};

inline std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items) out += (out.empty() ? "" : ", ") + s;
  return out;
}

inline void check_keys(const Ctx& c, const toml::table& t, const std::string& section,
                const std::vector<std::string>& allowed) {
  for (auto&& [k, v] : t) {
    bool ok = false;
    for (const auto& a : allowed) ok = ok || a == k.str();
    (void)v;
    if (!ok) throw Error(c.at(k) + ": unknown key '" + quote_input(k.str()) + "' in " + section + "; allowed: " + join(allowed));
  }
}

inline const char* type_name(const toml::node& n) {
  switch (n.type()) {
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    default: return "a date/time";
  }
}

inline std::string get_string(const Ctx& c, const toml::node& n, const std::string& key) {
  if (auto s = n.as_string()) return s->get();
  throw Error(c.at(n) + ": '" + key + "' must be a string, got " + type_name(n));
}
inline std::int64_t get_int(const Ctx& c, const toml::node& n, const std::string& key, std::int64_t lo,
                     std::int64_t hi) {
  auto i = n.as_integer();
  if (!i) throw Error(c.at(n) + ": '" + key + "' must be an integer, got " + type_name(n));
  if (i->get() < lo || i->get() > hi)
    throw Error(c.at(n) + ": '" + key + "' = " + std::to_string(i->get()) + " is out of range [" +
                std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return i->get();
}
// A number in [lo, hi] (hi = infinity: no upper bound; NaN and infinities are refused).
inline double get_float(const Ctx& c, const toml::node& n, const std::string& key, double lo,
                        double hi = std::numeric_limits<double>::max()) {
  double d;
  if (auto f = n.as_floating_point()) d = f->get();
  else if (auto i = n.as_integer()) d = static_cast<double>(i->get());
  else throw Error(c.at(n) + ": '" + key + "' must be a number, got " + type_name(n));
  if (!(d >= lo && d <= hi)) {
    std::ostringstream os;  // to_string would print 1e-9 as 0.000000, contradicting a rejected 0
    os << c.at(n) << ": '" << key << "' = " << d << " is out of range; allowed: ";
    if (hi == std::numeric_limits<double>::max()) os << ">= " << lo;
    else os << lo << " .. " << hi;
    throw Error(os.str());
  }
  return d;
}
inline const toml::table& get_table(const Ctx& c, const toml::node& n, const std::string& key) {
  if (auto t = n.as_table()) return *t;
  throw Error(c.at(n) + ": '" + key + "' must be a table, got " + type_name(n));
}

// An array of numbers >= 0, e.g. class_mix = [0.2, 0.8].
inline std::vector<double> get_float_list(const Ctx& c, const toml::node& n, const std::string& key) {
  const auto* arr = n.as_array();
  if (!arr) throw Error(c.at(n) + ": " + key + " must be an array of numbers >= 0, e.g. [0.2, 0.8]");
  std::vector<double> out;
  for (const toml::node& e : *arr) out.push_back(get_float(c, e, key, 0.0));
  return out;
}

// Experiment, variant and sweep names name folders or sit beside them in results: a name is a
// name, never a path (1 to 128 letters, digits and - _ . + =, not . or ..).
bool is_safe_name(const std::string& name);
// Throws, at `where`, naming `what` (the key) and the allowed set, unless is_safe_name(name).
void check_name(const std::string& where, const std::string& what, const std::string& name);

// A plugin parameter's value: a string, number or boolean.
inline ParamValue to_param(const Ctx& c, const toml::node& n, const std::string& key) {
  if (auto i = n.as_integer()) return i->get();
  if (auto f = n.as_floating_point()) return f->get();
  if (auto b = n.as_boolean()) return b->get();
  if (auto s = n.as_string()) return s->get();
  throw Error(c.at(n) + ": parameter '" + quote_input(key) + "' must be a string, number or boolean, got " + type_name(n));
}

}  // namespace inferlab::experiment_parse

namespace inferlab {

// The `rules` of a quantization choice (defined with the rest of the per-layer rules in
// quantization_rules.cpp; the model-dependent checks are at planning, plan_quantization_rules).
// rules = [ { match = "layers.0.*", layers = "first:2" | [0, 3] | 5, method = "int8" |
// { name = "int4", group_size = 32 } }, ... ]: each rule needs a method and match and/or layers.
std::vector<QuantRule> parse_quantization_rules(const experiment_parse::Ctx& c, const toml::node& n);

// After `quantization = node` was applied to s.quantization (whose plugin was `before`): a
// table's `rules` replace the stack's; naming another plugin (or a bare string) without rules
// drops the inherited ones; a table of parameters for the same plugin keeps them.
void apply_quantization_rules(const experiment_parse::Ctx& c, const toml::node& node, const std::string& before,
                              Stack& s);

}  // namespace inferlab
