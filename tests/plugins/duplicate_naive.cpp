// Claims the name attention/naive a second time.
#include "inferlab/plugin/plugin.h"

namespace {
class NoAttention final : public inferlab::Attention {
 public:
  void forward(const inferlab::AttentionBatch&, const inferlab::KvLayerView&, const float*, float*,
               inferlab::Device&) override {}
};
inferlab::PluginDescriptor describe() {
  inferlab::PluginDescriptor d;
  d.kind = inferlab::PluginKind::kAttention;
  d.name = "naive";
  d.version = "0.0.1";
  d.summary = "duplicate name for registry tests";
  d.devices[inferlab::DeviceKind::kCpu] = [](const inferlab::PluginContext&) { return std::make_unique<NoAttention>(); };
  return d;
}
}  // namespace
INFERLAB_PLUGIN(describe)
