// An attention strategy that does not declare its memory traffic (Attention::traffic): the
// simulator cannot charge it, so `validate` must refuse it on [device] kind = "sim".
#include "inferlab/plugin/plugin.h"

namespace {
class UndeclaredAttention final : public inferlab::Attention {
 public:
  void forward(const inferlab::AttentionBatch&, const inferlab::KvLayerView&, const float*, float*,
               inferlab::Device&) override {}
};
inferlab::PluginDescriptor describe() {
  inferlab::PluginDescriptor d;
  d.kind = inferlab::PluginKind::kAttention;
  d.name = "undeclared_attention";
  d.version = "0.0.1";
  d.summary = "declares no memory traffic (simulator refusal tests)";
  d.devices[inferlab::DeviceKind::kCpu] = [](const inferlab::PluginContext&) { return std::make_unique<UndeclaredAttention>(); };
  return d;
}
}  // namespace
INFERLAB_PLUGIN(describe)
