#include "inferlab/plugin.h"

namespace inferlab {

const char* plugin_kind_name(PluginKind kind) {
  switch (kind) {
    case PluginKind::kAttention: return "attention";
    case PluginKind::kQuantization: return "quantization";
    case PluginKind::kScheduling: return "scheduling";
    case PluginKind::kDecoding: return "decoding";
  }
  return "?";
}

bool parse_plugin_kind(const std::string& text, PluginKind& kind) {
  if (text == "attention") kind = PluginKind::kAttention;
  else if (text == "quantization") kind = PluginKind::kQuantization;
  else if (text == "scheduling" || text == "scheduler") kind = PluginKind::kScheduling;
  else if (text == "decoding" || text == "decoder") kind = PluginKind::kDecoding;
  else return false;
  return true;
}

}  // namespace inferlab
