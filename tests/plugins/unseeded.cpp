// A decoding strategy that draws its tokens from std::random_device instead of the engine's
// seeded Rng: `run --check-determinism` must catch it.
#include <random>

#include "test_plugin.h"

namespace {
class UnseededDecoder final : public inferlab::Decoder {
 public:
  void accept(std::span<const int>, std::span<const int>, const float*, int vocab, inferlab::Rng&,
              std::vector<int>& out) override {
    out.push_back(static_cast<int>(device_() % static_cast<unsigned>(vocab)));
  }

 private:
  std::random_device device_;
};
inferlab::PluginDescriptor describe() {
  inferlab::PluginDescriptor d = inferlab::test_plugins::descriptor(
      inferlab::PluginKind::kDecoding, "unseeded", "uniform tokens from an unseeded source (determinism tests)");
  d.devices[inferlab::DeviceKind::kCpu] = [](const inferlab::PluginContext&) { return std::make_unique<UnseededDecoder>(); };
  return d;
}
}  // namespace
INFERLAB_PLUGIN(describe)
