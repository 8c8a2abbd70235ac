// A plugin named on the command line with its parameters, "NAME[:KEY=VALUE...]":
// "int4:group_size=32:activations=int8" is the plugin int4 with two parameters (inferlab bench's
// --quantization / --attention entries; perplexity's and generate's --quantization).
#pragma once
#include <map>
#include <string>

#include "inferlab/plugin/plugin.h"
#include "inferlab/plugin/registry.h"

namespace inferlab::cli {

struct PluginSpec {
  std::string name;
  std::map<std::string, ParamValue> params;
};

// Each value is read as the type the plugin declares for that key (Registry::resolve then checks
// ranges and choices); an unknown plugin or key, a repeated key, a missing '=' or an unreadable
// value is an Error starting with `flag` (e.g. "bench: --quantization") and saying what is allowed.
PluginSpec parse_plugin_spec(const Registry& reg, PluginKind kind, const std::string& text, const std::string& flag);

}  // namespace inferlab::cli
