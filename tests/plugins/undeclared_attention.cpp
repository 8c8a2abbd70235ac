// An attention strategy that does not declare its memory traffic (Attention::traffic): the
// simulator cannot charge it, so `validate` must refuse it on [device] kind = "sim".
#include "test_plugin.h"

namespace {
inferlab::PluginDescriptor describe() {
  using namespace inferlab::test_plugins;
  inferlab::PluginDescriptor d = descriptor(inferlab::PluginKind::kAttention, "undeclared_attention",
                                            "declares no memory traffic (simulator refusal tests)");
  d.devices[inferlab::DeviceKind::kCpu] = [](const inferlab::PluginContext&) { return std::make_unique<NoAttention>(); };
  return d;
}
}  // namespace
INFERLAB_PLUGIN(describe)
