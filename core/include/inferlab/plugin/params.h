// Typed plugin parameters: each plugin declares ParamSpecs; the registry checks the values a
// TOML gives against them (unknown name, wrong type, out of range) before construction.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace inferlab {

enum class ParamType { kInt, kFloat, kBool, kString };
const char* param_type_name(ParamType type);

using ParamValue = std::variant<std::int64_t, double, bool, std::string>;
std::string param_value_to_string(const ParamValue& value);

struct ParamSpec;
// "[1, 4096]", "[0, inf]": the declared range of a numeric parameter.
std::string param_range_text(const ParamSpec& spec);

struct ParamSpec {
  std::string name;
  ParamType type = ParamType::kInt;
  ParamValue default_value;
  std::optional<double> min, max;    // inclusive range for kInt / kFloat
  std::vector<std::string> choices;  // allowed values for kString (empty = any)
  std::string doc;
  // A file (kString): Registry::resolve turns a relative value into the file found by
  // resolve_data_path (the TOML's folder, the working directory, the source tree, the data
  // root; its error lists each place tried). "" and the values in `names` (e.g. model presets)
  // are not paths and stay as given.
  bool path = false;
  std::vector<std::string> names;
};

// Resolved parameter values: every declared parameter present, typed as declared.
class Params {
 public:
  Params() = default;
  explicit Params(std::map<std::string, ParamValue> values) : values_(std::move(values)) {}
  std::int64_t get_int(const std::string& name) const;
  double get_float(const std::string& name) const;
  bool get_bool(const std::string& name) const;
  const std::string& get_string(const std::string& name) const;
  const std::map<std::string, ParamValue>& values() const { return values_; }

 private:
  const ParamValue& at(const std::string& name) const;
  std::map<std::string, ParamValue> values_;
};

// Checks `given` against `specs` and fills defaults. `where` prefixes every error (e.g.
// "exp.toml:12:3: attention 'flash'"). Ints are accepted where floats are declared.
Params resolve_params(const std::vector<ParamSpec>& specs,
                      const std::map<std::string, ParamValue>& given, const std::string& where);

}  // namespace inferlab
