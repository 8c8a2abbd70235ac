// parse_plugin_spec (plugin_spec.h): "NAME[:KEY=VALUE...]" into a plugin name and typed parameters.
#include "plugin_spec.h"

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <vector>

#include "inferlab/error.h"

namespace inferlab::cli {

PluginSpec parse_plugin_spec(const Registry& reg, PluginKind kind, const std::string& text, const std::string& flag) {
  std::vector<std::string> parts;
  std::stringstream ss(text);
  for (std::string x; std::getline(ss, x, ':');) parts.push_back(x);
  if (!text.empty() && text.back() == ':') parts.emplace_back();
  PluginSpec spec{parts.empty() ? text : parts[0], {}};
  const PluginDescriptor& d = reg.find(kind, spec.name, flag);
  std::string keys;
  for (const ParamSpec& p : d.params) keys += (keys.empty() ? "" : ", ") + p.name;
  const std::string where = flag + " " + text + ": ";
  for (std::size_t i = 1; i < parts.size(); ++i) {
    const std::string& kv = parts[i];
    const std::size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      throw Error(where + "'" + kv + "' is not KEY=VALUE; allowed: NAME[:KEY=VALUE...], here " + spec.name +
                  " with keys " + (keys.empty() ? "(none)" : keys));
    const std::string key = kv.substr(0, eq), value = kv.substr(eq + 1);
    auto it = std::find_if(d.params.begin(), d.params.end(), [&](const ParamSpec& p) { return p.name == key; });
    if (it == d.params.end())
      throw Error(where + "unknown parameter '" + key + "'; allowed: " + (keys.empty() ? "(none)" : keys));
    if (spec.params.count(key)) throw Error(where + "parameter '" + key + "' given twice; allowed: once each");
    const std::string bad = where + key + " = '" + value + "' is not of type " + param_type_name(it->type);
    switch (it->type) {
      case ParamType::kInt: {
        std::int64_t v = 0;
        const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
        if (value.empty() || ec != std::errc() || end != value.data() + value.size()) throw Error(bad);
        spec.params[key] = v;
        break;
      }
      case ParamType::kFloat: {
        char* end = nullptr;
        const double v = value.empty() ? 0.0 : std::strtod(value.c_str(), &end);
        if (value.empty() || end != value.c_str() + value.size()) throw Error(bad);
        spec.params[key] = v;
        break;
      }
      case ParamType::kBool:
        if (value != "true" && value != "false") throw Error(bad + "; allowed: true, false");
        spec.params[key] = value == "true";
        break;
      case ParamType::kString: spec.params[key] = value; break;
    }
  }
  return spec;
}

}  // namespace inferlab::cli
