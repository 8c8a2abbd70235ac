#include "inferlab/plugin/registry.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <set>

#include <boost/dll/runtime_symbol_info.hpp>
#include <boost/dll/shared_library.hpp>

#include "inferlab/error.h"
#include "inferlab/experiment/input_checks.h"
#include "inferlab/experiment/experiment.h"
#include "inferlab/support/log.h"

namespace inferlab {

namespace fs = std::filesystem;

struct Registry::Entry {
  std::shared_ptr<boost::dll::shared_library> lib;
  const PluginDescriptor* desc = nullptr;
  std::string path;
  std::vector<std::string> duplicate_paths;  // other libraries claiming the same kind/name
};

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diag = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      std::size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

std::vector<std::string> Registry::default_search_path() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("INFERLAB_PLUGIN_PATH"); env && *env) {
    std::string s = env;
    std::size_t start = 0;
    while (start <= s.size()) {
      std::size_t end = s.find(':', start);
      if (end == std::string::npos) end = s.size();
      if (end > start) dirs.push_back(s.substr(start, end - start));
      start = end + 1;
    }
  }
  // The built-in plugins sit in inferlab/ beside libinferlab_core: <build>/lib/inferlab in the
  // build tree, <prefix>/lib/inferlab once installed. Located from the library itself, not the
  // executable, so the CLI, the tests and any program linking the core agree, and an installed
  // copy never also loads the build tree's plugins (they would be duplicates).
  std::error_code ec;
  auto core = boost::dll::this_line_location(ec);
  if (!ec) dirs.push_back((fs::path(core).parent_path() / "inferlab").string());
  return dirs;
}

Registry::Registry(const std::vector<std::string>& search_path) {
  std::set<std::string> seen_dirs, seen_libs;
  for (const auto& dir : search_path) {
    std::error_code ec;
    fs::path canon = fs::weakly_canonical(dir, ec);
    // An entry that is a file is that library alone (test_conformance's plugins under test).
    if (!ec && fs::is_regular_file(canon)) {
      if (seen_libs.insert(canon.string()).second) load_library(canon.string());
      continue;
    }
    if (ec || !fs::is_directory(canon)) {
      log::debug("plugin search path entry not a directory: " + dir);
      continue;
    }
    if (!seen_dirs.insert(canon.string()).second) continue;
    std::vector<fs::path> libs;
    for (const auto& f : fs::directory_iterator(canon, ec)) {
      const auto name = f.path().filename().string();
      if (f.is_regular_file() && name.rfind("lib", 0) == 0 && f.path().extension() == ".so")
        libs.push_back(f.path());
    }
    std::sort(libs.begin(), libs.end());
    for (const auto& lib : libs)
      if (seen_libs.insert(lib.string()).second) load_library(lib.string());
  }
}

Registry::~Registry() = default;

void Registry::load_library(const std::string& path) {
  PluginLoadRecord rec{path, false, ""};
  try {
    auto lib = std::make_shared<boost::dll::shared_library>(fs::path(path),
                                                            boost::dll::load_mode::rtld_local);
    if (!lib->has("inferlab_plugin_abi") || !lib->has("inferlab_plugin_descriptor")) {
      rec.message = "not an inferlab plugin (no inferlab_plugin_abi/inferlab_plugin_descriptor symbol)";
    } else {
      int abi = lib->get_alias<int()>("inferlab_plugin_abi")();
      if (abi != kPluginAbiVersion) {
        rec.message = "ABI version " + std::to_string(abi) + " does not match this build's " +
                      std::to_string(kPluginAbiVersion) + "; rebuild the plugin against this inferlab";
      } else {
        const PluginDescriptor* d =
            lib->get_alias<const PluginDescriptor*()>("inferlab_plugin_descriptor")();
        std::string label = std::string(plugin_kind_name(d->kind)) + "/" + d->name;
        auto dup = std::find_if(entries_.begin(), entries_.end(), [&](const auto& e) {
          return e->desc->kind == d->kind && e->desc->name == d->name;
        });
        if (dup != entries_.end()) {
          (*dup)->duplicate_paths.push_back(path);
          rec.message = "duplicate name " + label + " (already provided by " + (*dup)->path + ")";
        } else {
          auto e = std::make_unique<Entry>();
          e->lib = std::move(lib);
          e->desc = d;
          e->path = path;
          entries_.push_back(std::move(e));
          rec.ok = true;
          rec.message = label + " " + d->version;
        }
      }
    }
  } catch (const std::exception& ex) {
    rec.message = std::string("failed to load: ") + ex.what();
  }
  log::debug("plugin " + path + ": " + rec.message);
  if (!rec.ok) log::warn("plugin " + path + " skipped: " + rec.message);
  log_.push_back(std::move(rec));
}

std::vector<const PluginDescriptor*> Registry::list() const {
  std::vector<const PluginDescriptor*> out;
  for (const auto& e : entries_) out.push_back(e->desc);
  std::sort(out.begin(), out.end(), [](auto a, auto b) {
    return std::tie(a->kind, a->name) < std::tie(b->kind, b->name);
  });
  return out;
}

std::vector<const PluginDescriptor*> Registry::list(PluginKind kind) const {
  auto all = list();
  std::erase_if(all, [&](auto d) { return d->kind != kind; });
  return all;
}

const Registry::Entry& Registry::entry(PluginKind kind, const std::string& name,
                                       const std::string& where) const {
  const std::string prefix = where.empty() ? "" : where + ": ";
  for (const auto& e : entries_) {
    if (e->desc->kind != kind || e->desc->name != name) continue;
    if (!e->duplicate_paths.empty())
      throw Error(prefix + plugin_kind_name(kind) + " plugin '" + name +
                  "' is provided by more than one library: " + e->path + " and " +
                  e->duplicate_paths.front() + "; remove one from the plugin path");
    return *e;
  }
  std::string available, closest;
  std::size_t best = std::string::npos;
  for (const auto* d : list(kind)) {
    available += (available.empty() ? "" : ", ") + d->name;
    std::size_t dist = edit_distance(name, d->name);
    if (dist < best) best = dist, closest = d->name;
  }
  std::string msg = prefix + "unknown " + plugin_kind_name(kind) + " plugin '" + quote_input(name) + "'; available: " +
                    (available.empty() ? "(none found)" : available);
  if (!closest.empty() && best <= std::max<std::size_t>(2, name.size() / 2))
    msg += "; did you mean '" + closest + "'?";
  for (const auto& rec : log_)
    if (!rec.ok && rec.path.find(name) != std::string::npos)
      msg += "; note: " + rec.path + " was skipped: " + rec.message;
  throw Error(msg);
}

const PluginDescriptor& Registry::find(PluginKind kind, const std::string& name,
                                       const std::string& where) const {
  return *entry(kind, name, where).desc;
}

const std::string& Registry::library_path(const PluginDescriptor& d) const {
  for (const auto& e : entries_)
    if (e->desc == &d) return e->path;
  throw Error(std::string("Registry::library_path: ") + plugin_kind_name(d.kind) + " '" + d.name + "' is not registered here");
}

Params Registry::resolve(PluginKind kind, const std::string& name,
                         const std::map<std::string, ParamValue>& given,
                         const std::string& where, const std::string& base_dir) const {
  const auto& d = find(kind, name, where);
  std::string w = (where.empty() ? "" : where + ": ") + plugin_kind_name(kind) + " '" + name + "'";
  Params resolved = resolve_params(d.params, given, w);
  std::map<std::string, ParamValue> values = resolved.values();
  bool changed = false;
  for (const ParamSpec& spec : d.params) {
    if (!spec.path || spec.type != ParamType::kString) continue;
    std::string& value = std::get<std::string>(values.at(spec.name));
    if (value.empty() || std::find(spec.names.begin(), spec.names.end(), value) != spec.names.end()) continue;
    value = resolve_data_path(value, base_dir, w + ": " + spec.name);
    changed = true;
  }
  return changed ? Params(std::move(values)) : resolved;
}

std::vector<std::string> Registry::check_support(PluginKind kind, const std::string& name,
                                                 const SupportQuery& query) const {
  const auto& d = find(kind, name);
  std::vector<std::string> reasons;
  const DeviceImpl* impl = d.implementation(query.device);
  if (impl == nullptr)
    reasons.push_back(std::string("does not run on device '") + device_kind_name(query.device) + "' (it runs on: " +
                      d.device_names() + ")");
  const std::vector<KvDtype>& kv_dtypes = impl != nullptr && !impl->kv_dtypes.empty() ? impl->kv_dtypes : d.kv_dtypes;
  if (kind == PluginKind::kAttention)
    for (KvDtype side : {query.kv_format.keys, query.kv_format.values})
      if (std::find(kv_dtypes.begin(), kv_dtypes.end(), side) == kv_dtypes.end()) {
        reasons.push_back(std::string("cannot read KV cache stored as ") + kv_dtype_name(side) + " (KV format '" +
                          query.kv_format.name() + "')" + (impl != nullptr && !impl->kv_dtypes.empty() ? " on device '" + std::string(device_kind_name(query.device)) + "'" : ""));
        break;
      }
  for (const SupportCheck* check : {&d.supports, impl != nullptr ? &impl->supports : nullptr})
    if (check != nullptr && *check) {
      auto more = (*check)(query);
      reasons.insert(reasons.end(), more.begin(), more.end());
    }
  return reasons;
}

namespace {

// The implementation of `desc` for the device the object will run on; throws Error naming the
// plugin and the devices it has when there is none.
const DeviceImpl& implementation_for(const PluginDescriptor& desc, const Device& device, const std::string& label) {
  const DeviceImpl* impl = desc.implementation(device.kind());
  if (impl == nullptr)
    throw Error(label + " does not run on device '" + device_kind_name(device.kind()) + "' (it runs on: " +
                desc.device_names() + ")");
  return *impl;
}

template <typename T, typename Make>
std::shared_ptr<T> hold(const std::shared_ptr<boost::dll::shared_library>& lib, const Make& make,
                        const PluginContext& ctx, const std::string& label) {
  if (!make) throw Error(label + " has no factory for its kind on device '" + device_kind_name(ctx.device.kind()) + "'");
  std::unique_ptr<T> obj = make(ctx);
  if (!obj) throw Error(label + " factory returned nothing");
  // The deleter keeps the library loaded until the object (and its vtable) is gone.
  return std::shared_ptr<T>(obj.release(), [lib](T* p) { delete p; });
}

}  // namespace

std::shared_ptr<Attention> Registry::create_attention(const std::string& name, const Params& params, Device& device) const {
  const auto& e = entry(PluginKind::kAttention, name, "");
  const std::string label = "attention/" + name;
  return hold<Attention>(e.lib, implementation_for(*e.desc, device, label).make_attention,
                         PluginContext{params, device, nullptr, nullptr, this}, label);
}
std::shared_ptr<Quantization> Registry::create_quantization(const std::string& name, const Params& params, Device& device,
                                                            const ModelWeights* weights) const {
  const auto& e = entry(PluginKind::kQuantization, name, "");
  const std::string label = "quantization/" + name;
  return hold<Quantization>(e.lib, implementation_for(*e.desc, device, label).make_quantization,
                            PluginContext{params, device, weights, nullptr, this}, label);
}
std::shared_ptr<Scheduler> Registry::create_scheduler(const std::string& name, const Params& params, Device& device) const {
  const auto& e = entry(PluginKind::kScheduling, name, "");
  const std::string label = "scheduling/" + name;
  return hold<Scheduler>(e.lib, implementation_for(*e.desc, device, label).make_scheduler,
                         PluginContext{params, device, nullptr, nullptr, this}, label);
}
std::shared_ptr<Decoder> Registry::create_decoder(const std::string& name, const Params& params, Device& device,
                                                  const ModelWeights* weights, Attention* attention) const {
  const auto& e = entry(PluginKind::kDecoding, name, "");
  const std::string label = "decoding/" + name;
  return hold<Decoder>(e.lib, implementation_for(*e.desc, device, label).make_decoder,
                       PluginContext{params, device, weights, attention, this}, label);
}

}  // namespace inferlab
