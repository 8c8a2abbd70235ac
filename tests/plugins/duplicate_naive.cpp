// Claims the name attention/naive a second time.
#include "test_plugin.h"

namespace {
inferlab::PluginDescriptor describe() {
  using namespace inferlab::test_plugins;
  inferlab::PluginDescriptor d = descriptor(inferlab::PluginKind::kAttention, "naive", "duplicate name for registry tests");
  d.devices[inferlab::DeviceKind::kCpu] = [](const inferlab::PluginContext&) { return std::make_unique<NoAttention>(); };
  return d;
}
}  // namespace
INFERLAB_PLUGIN(describe)
