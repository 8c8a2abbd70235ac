#include "inferlab/plugin/params.h"

#include <cmath>
#include <sstream>

#include "inferlab/error.h"
#include "inferlab/experiment/input_checks.h"

namespace inferlab {

const char* param_type_name(ParamType type) {
  switch (type) {
    case ParamType::kInt: return "int";
    case ParamType::kFloat: return "float";
    case ParamType::kBool: return "bool";
    case ParamType::kString: return "string";
  }
  return "?";
}

std::string param_value_to_string(const ParamValue& value) {
  std::ostringstream os;
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, bool>) {
          os << (v ? "true" : "false");
        } else if constexpr (std::is_same_v<T, std::string>) {
          os << '"' << v << '"';
        } else {
          os << v;
        }
      },
      value);
  return os.str();
}

const ParamValue& Params::at(const std::string& name) const {
  auto it = values_.find(name);
  if (it == values_.end()) throw Error("parameter '" + name + "' was not declared by the plugin");
  return it->second;
}

std::int64_t Params::get_int(const std::string& name) const {
  const auto& v = at(name);
  if (auto p = std::get_if<std::int64_t>(&v)) return *p;
  throw Error("parameter '" + name + "' is not an int");
}

double Params::get_float(const std::string& name) const {
  const auto& v = at(name);
  if (auto p = std::get_if<double>(&v)) return *p;
  if (auto p = std::get_if<std::int64_t>(&v)) return static_cast<double>(*p);
  throw Error("parameter '" + name + "' is not a float");
}

bool Params::get_bool(const std::string& name) const {
  const auto& v = at(name);
  if (auto p = std::get_if<bool>(&v)) return *p;
  throw Error("parameter '" + name + "' is not a bool");
}

const std::string& Params::get_string(const std::string& name) const {
  const auto& v = at(name);
  if (auto p = std::get_if<std::string>(&v)) return *p;
  throw Error("parameter '" + name + "' is not a string");
}

std::string param_range_text(const ParamSpec& s) {
  std::ostringstream os;
  os.precision(12);
  os << "[";
  if (s.min) os << *s.min; else os << "-inf";
  os << ", ";
  if (s.max) os << *s.max; else os << "inf";
  os << "]";
  return os.str();
}

namespace {

std::string allowed_list(const std::vector<ParamSpec>& specs) {
  if (specs.empty()) return "it takes no parameters";
  std::string out = "allowed: ";
  for (std::size_t i = 0; i < specs.size(); ++i) {
    if (i) out += ", ";
    out += specs[i].name + " (" + param_type_name(specs[i].type) + ")";
  }
  return out;
}

// Coerces `v` to the declared type or explains why not.
ParamValue coerce(const ParamSpec& spec, const ParamValue& v, const std::string& where) {
  const std::string head = where + ": parameter '" + spec.name + "' ";
  const std::string want = std::string("expects ") + param_type_name(spec.type) + ", got " +
                           param_value_to_string(v);
  switch (spec.type) {
    case ParamType::kInt: {
      if (auto p = std::get_if<std::int64_t>(&v)) {
        double d = static_cast<double>(*p);
        if ((spec.min && d < *spec.min) || (spec.max && d > *spec.max))
          throw Error(head + "= " + std::to_string(*p) + " is out of range " + param_range_text(spec));
        return *p;
      }
      throw Error(head + want);
    }
    case ParamType::kFloat: {
      double d;
      if (auto p = std::get_if<double>(&v)) d = *p;
      else if (auto q = std::get_if<std::int64_t>(&v)) d = static_cast<double>(*q);
      else throw Error(head + want);
      if (!std::isfinite(d) || (spec.min && d < *spec.min) || (spec.max && d > *spec.max))
        throw Error(head + "= " + param_value_to_string(d) + " is out of range " + param_range_text(spec));
      return d;
    }
    case ParamType::kBool:
      if (std::holds_alternative<bool>(v)) return v;
      throw Error(head + want);
    case ParamType::kString: {
      auto p = std::get_if<std::string>(&v);
      if (!p) throw Error(head + want);
      if (!spec.choices.empty()) {
        for (const auto& c : spec.choices)
          if (c == *p) return v;
        std::string list;
        for (const auto& c : spec.choices) list += (list.empty() ? "" : ", ") + c;
        throw Error(head + "= \"" + *p + "\" is not one of: " + list);
      }
      return v;
    }
  }
  return v;
}

}  // namespace

Params resolve_params(const std::vector<ParamSpec>& specs,
                      const std::map<std::string, ParamValue>& given, const std::string& where) {
  std::map<std::string, ParamValue> out;
  for (const auto& [name, value] : given) {
    const ParamSpec* spec = nullptr;
    for (const auto& s : specs)
      if (s.name == name) spec = &s;
    if (!spec) throw Error(where + ": unknown parameter '" + quote_input(name) + "'; " + allowed_list(specs));
    out[name] = coerce(*spec, value, where);
  }
  for (const auto& s : specs)
    if (!out.count(s.name)) out[s.name] = s.default_value;
  return Params(std::move(out));
}

}  // namespace inferlab
