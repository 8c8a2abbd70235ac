// A quantization strategy that does not declare its arithmetic (Quantization::arithmetic): the
// simulator cannot charge it, so `validate` must refuse it on [device] kind = "sim".
#include "plugins/common/quantization/float_linear.h"
#include "test_plugin.h"

namespace {
class UndeclaredQuantization final : public inferlab::Quantization {
 public:
  using Quantization::make_linear;
  std::unique_ptr<inferlab::Linear> make_linear(const std::string& name, std::vector<float> weight, int out,
                                                int in) override {
    return inferlab::NoQuantization().make_linear(name, std::move(weight), out, in);
  }
};
inferlab::PluginDescriptor describe() {
  inferlab::PluginDescriptor d = inferlab::test_plugins::descriptor(
      inferlab::PluginKind::kQuantization, "undeclared_quantization", "declares no arithmetic (simulator refusal tests)");
  d.devices[inferlab::DeviceKind::kCpu] = [](const inferlab::PluginContext&) { return std::make_unique<UndeclaredQuantization>(); };
  return d;
}
}  // namespace
INFERLAB_PLUGIN(describe)
