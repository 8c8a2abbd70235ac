#include "plugin_cases.h"

#include <cctype>
#include <cmath>
#include <filesystem>
#include <set>
#include <sstream>

#include "inferlab/error.h"
#include "model_fixtures.h"
#include "test_support.h"

namespace inferlab::testing {

void PrintTo(const PluginCase& c, std::ostream* os) {
  *os << plugin_kind_name(c.kind) << '/' << c.plugin << " on " << device_kind_name(c.device);
  for (const auto& [name, value] : c.given) *os << ", " << name << " = " << param_value_to_string(value);
}

namespace {

std::vector<std::string>& under_test() {
  static std::vector<std::string> libraries;
  return libraries;
}

}  // namespace

const std::set<std::string>& plugin_labels_under_test() {
  static const std::set<std::string> labels = [] {
    std::set<std::string> out;
    const Registry libs(under_test());
    for (const PluginDescriptor* d : libs.list()) out.insert(std::string(plugin_kind_name(d->kind)) + "/" + d->name);
    return out;
  }();
  return labels;
}

std::string set_plugins_under_test(const std::vector<std::string>& libraries) {
  under_test().clear();
  for (const std::string& lib : libraries) {
    std::error_code ec;
    const std::string canon = std::filesystem::weakly_canonical(lib, ec).string();
    if (ec || !std::filesystem::is_regular_file(canon)) return lib + ": no such file; allowed: a plugin library (lib*.so)";
    under_test().push_back(canon);
  }
  for (const PluginLoadRecord& r : conformance_registry().load_log())
    for (const std::string& lib : under_test())
      if (r.path == lib && !r.ok) return lib + ": not loaded as a plugin: " + r.message;
  for (const std::string& lib : under_test()) {
    bool loaded = false;
    for (const PluginLoadRecord& r : conformance_registry().load_log()) loaded = loaded || (r.path == lib && r.ok);
    if (!loaded) return lib + ": not loaded as a plugin";
  }
  return "";
}

const std::vector<std::string>& plugins_under_test() { return under_test(); }

std::string builtin_plugin_dir() { return Registry::default_search_path().back(); }

const Registry& conformance_registry() {
  // Named libraries first (one under test wins a name clash), then the built-ins; without any,
  // the registry's default path: $INFERLAB_PLUGIN_PATH's folders, then the built-ins.
  static const Registry registry([] {
    if (under_test().empty()) return Registry::default_search_path();
    std::vector<std::string> path = under_test();
    path.push_back(builtin_plugin_dir());
    return path;
  }());
  return registry;
}

namespace {

bool same_value(const ParamValue& a, const ParamValue& b) {
  if (a.index() == b.index()) return a == b;
  // A float parameter may declare an int-looking bound: compare numerically.
  auto num = [](const ParamValue& v) -> std::optional<double> {
    if (const auto* i = std::get_if<std::int64_t>(&v)) return static_cast<double>(*i);
    if (const auto* d = std::get_if<double>(&v)) return *d;
    return std::nullopt;
  };
  const auto x = num(a), y = num(b);
  return x && y && *x == *y;
}

// One parameter moved off its default: the values its declaration suggests.
std::vector<ParamValue> off_default_values(const ParamSpec& spec) {
  std::vector<ParamValue> values;
  auto add = [&](ParamValue v) {
    if (same_value(v, spec.default_value)) return;
    for (const ParamValue& w : values)
      if (same_value(v, w)) return;
    values.push_back(std::move(v));
  };
  switch (spec.type) {
    case ParamType::kInt:
      if (spec.min) add(static_cast<std::int64_t>(std::ceil(*spec.min)));
      if (spec.max) add(static_cast<std::int64_t>(std::floor(*spec.max)));
      break;
    case ParamType::kFloat:
      if (spec.min) add(*spec.min);
      if (spec.max) add(*spec.max);
      break;
    case ParamType::kBool:
      add(!std::get<bool>(spec.default_value));
      break;
    case ParamType::kString:
      for (const std::string& choice : spec.choices) add(choice);
      break;
  }
  return values;
}

std::string sanitize(const std::string& text) {
  std::string out;
  for (char ch : text) {
    if (std::isalnum(static_cast<unsigned char>(ch))) out += ch;
    else if (ch == '"') continue;
    else if (ch == '-') out += "m";
    else if (ch == '.') out += "p";
    else out += '_';
  }
  return out;
}

std::vector<PluginCase> cases(PluginKind kind, bool with_settings) {
  std::vector<PluginCase> out;
  for (const PluginDescriptor* d : conformance_registry().list(kind)) {
    if (!under_test().empty() && !plugin_labels_under_test().count(std::string(plugin_kind_name(kind)) + "/" + d->name)) continue;
    for (const auto& [device, impl] : d->devices) {
      if (device == DeviceKind::kSim) continue;  // runs no op: the simulator's own tests charge it
      PluginCase base;
      base.kind = kind;
      base.plugin = d->name;
      base.device = device;
      out.push_back(base);
      if (!with_settings) continue;
      for (const ParamSpec& spec : d->params) {
        for (ParamValue& value : off_default_values(spec)) {
          PluginCase c = base;
          c.setting = spec.name + "_" + param_value_to_string(value);
          c.given[spec.name] = std::move(value);
          out.push_back(std::move(c));
        }
      }
    }
  }
  return out;
}

}  // namespace

std::vector<PluginCase> plugin_cases(PluginKind kind) { return cases(kind, true); }
std::vector<PluginCase> default_plugin_cases(PluginKind kind) { return cases(kind, false); }

std::string case_name(const ::testing::TestParamInfo<PluginCase>& info) {
  const PluginCase& c = info.param;
  return sanitize(c.plugin + "_" + device_kind_name(c.device) + "_" + c.setting);
}

Params resolve_case(const PluginCase& c) {
  return conformance_registry().resolve(c.kind, c.plugin, c.given, "conformance");
}

std::vector<std::string> refusals(const PluginCase& c, const ModelConfig& model) {
  const Params params = resolve_case(c);
  SupportQuery query{model, c.device, KvDtype::kF32, params};
  return conformance_registry().check_support(c.kind, c.plugin, query);
}

std::shared_ptr<Attention> reference_attention_on(Device& device) {
  if (device.kind() == DeviceKind::kCpu) return std::make_shared<RefAttention>();
  const Registry& reg = conformance_registry();
  return reg.create_attention("naive", reg.resolve(PluginKind::kAttention, "naive", {}, "reference attention"), device);
}

std::unique_ptr<Device> open_device(DeviceKind kind, std::string& why) {
  try {
    return make_device(kind, 2);
  } catch (const Error& e) {
    why = std::string("no ") + device_kind_name(kind) + " device here: " + e.what();
    return nullptr;
  }
}

}  // namespace inferlab::testing
