// Finds, loads and checks strategy plugins (Boost.DLL), and creates strategies from them.
// Libraries stay loaded while the registry or any object created from them lives.
#pragma once
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "inferlab/plugin/plugin.h"

namespace inferlab {

struct PluginLoadRecord {
  std::string path;
  bool ok = false;
  std::string message;  // "attention/flash 1.0.0" or the reason it was refused
};

class Registry {
 public:
  // Scans every directory (non-recursively) for lib*.so. A library that fails to load, has a
  // mismatched ABI or a duplicate name is recorded in load_log() and skipped; it becomes an
  // error only when a run names it (see require_clean).
  explicit Registry(const std::vector<std::string>& search_path);
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // INFERLAB_PLUGIN_PATH (':'-separated), then the inferlab/ folder beside libinferlab_core
  // (build/lib/inferlab in the build tree, <prefix>/lib/inferlab when installed).
  static std::vector<std::string> default_search_path();

  const std::vector<PluginLoadRecord>& load_log() const { return log_; }
  // The library file that registered `d` (a descriptor from list() or find()).
  const std::string& library_path(const PluginDescriptor& d) const;
  std::vector<const PluginDescriptor*> list() const;
  std::vector<const PluginDescriptor*> list(PluginKind kind) const;
  // Throws Error naming the available plugins of that kind and the closest match.
  const PluginDescriptor& find(PluginKind kind, const std::string& name,
                               const std::string& where = "") const;
  // Resolved, type-checked parameters for that plugin (throws Error listing allowed ones).
  // Path parameters (ParamSpec::path) become the file found by resolve_data_path, searched
  // first in base_dir (the experiment's folder; "" = none).
  Params resolve(PluginKind kind, const std::string& name,
                 const std::map<std::string, ParamValue>& given, const std::string& where,
                 const std::string& base_dir = "") const;
  // Reasons the plugin cannot run here (device, KV dtype, its own supports()).
  std::vector<std::string> check_support(PluginKind kind, const std::string& name,
                                         const SupportQuery& query) const;

  // Each returned object keeps its library loaded and runs on `device` (refused with an Error
  // when the plugin does not list the device's kind).
  std::shared_ptr<Attention> create_attention(const std::string& name, const Params& params, Device& device) const;
  // A quantization strategy that runs the checkpoint's own blocks (ModelWeights::source_blocks)
  // gets the weights the model will be built from; null when planning or for a draft model.
  std::shared_ptr<Quantization> create_quantization(const std::string& name, const Params& params, Device& device,
                                                    const ModelWeights* weights = nullptr) const;
  std::shared_ptr<Scheduler> create_scheduler(const std::string& name, const Params& params, Device& device) const;
  // A decoder that drafts with a second model gets the run's float weights and attention.
  std::shared_ptr<Decoder> create_decoder(const std::string& name, const Params& params, Device& device,
                                          const ModelWeights* weights = nullptr, Attention* attention = nullptr) const;

 private:
  struct Entry;
  const Entry& entry(PluginKind kind, const std::string& name, const std::string& where) const;
  void load_library(const std::string& path);
  std::vector<std::unique_ptr<Entry>> entries_;
  std::vector<PluginLoadRecord> log_;
};

// Edit distance, for "did you mean" suggestions.
std::size_t edit_distance(const std::string& a, const std::string& b);

}  // namespace inferlab
