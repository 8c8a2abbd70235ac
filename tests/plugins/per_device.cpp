// An attention strategy with a different implementation per device kind, for the registry's
// choice: each one says which it is through traffic().score_bytes (cpu 1, cuda 2, sim 3), and
// the cuda one reads only f32 KV (the CPU one f32 and int8).
#include "inferlab/plugin/plugin.h"

namespace {
class Marked final : public inferlab::Attention {
 public:
  explicit Marked(double mark) : mark_(mark) {}
  void forward(const inferlab::AttentionBatch&, const inferlab::KvLayerView&, const float*, float*,
               inferlab::Device&) override {}
  inferlab::AttentionTraffic traffic(int) const override { return {true, mark_, 0}; }

 private:
  double mark_;
};
inferlab::DeviceImpl marked(double mark) {
  return [mark](const inferlab::PluginContext&) { return std::make_unique<Marked>(mark); };
}
inferlab::PluginDescriptor describe() {
  using inferlab::DeviceKind;
  inferlab::PluginDescriptor d;
  d.kind = inferlab::PluginKind::kAttention;
  d.name = "per_device";
  d.version = "0.0.1";
  d.summary = "one implementation per device kind (registry tests)";
  d.kv_dtypes = {inferlab::KvDtype::kF32, inferlab::KvDtype::kInt8};
  d.devices = {{DeviceKind::kCpu, marked(1)}, {DeviceKind::kCuda, marked(2)}, {DeviceKind::kSim, marked(3)}};
  d.devices.at(DeviceKind::kCuda).kv_dtypes = {inferlab::KvDtype::kF32};
  d.devices.at(DeviceKind::kCuda).supports = [](const inferlab::SupportQuery& q) {
    std::vector<std::string> reasons;
    if (q.model.n_heads > 64) reasons.push_back("cuda: at most 64 heads");
    return reasons;
  };
  return d;
}
}  // namespace
INFERLAB_PLUGIN(describe)
