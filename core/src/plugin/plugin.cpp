#include "inferlab/plugin/plugin.h"

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

const DeviceImpl* PluginDescriptor::implementation(DeviceKind device) const {
  if (auto it = devices.find(device); it != devices.end()) return &it->second;
  // The simulator runs none of the strategy's ops: the host implementation answers what it
  // declares (traffic, arithmetic, bytes).
  if (device == DeviceKind::kSim)
    if (auto it = devices.find(DeviceKind::kCpu); it != devices.end()) return &it->second;
  return nullptr;
}

std::string PluginDescriptor::device_names() const {
  std::string out;
  for (const auto& [kind, impl] : devices) out += (out.empty() ? "" : ", ") + std::string(device_kind_name(kind));
  return out.empty() ? "(none)" : out;
}

std::map<DeviceKind, DeviceImpl> any_device(DeviceImpl impl) {
  return {{DeviceKind::kCpu, impl}, {DeviceKind::kCuda, impl}, {DeviceKind::kSim, impl}};
}

}  // namespace inferlab
