// Plugin descriptor for quantization/gguf.
#include "gguf_linear.h"
#include "inferlab/plugin.h"

namespace {

inferlab::PluginDescriptor describe() {
  using namespace inferlab;
  using namespace inferlab::plugins;
  PluginDescriptor d;
  d.kind = PluginKind::kQuantization;
  d.name = "gguf";
  d.version = "1.0.0";
  d.summary = "a GGUF checkpoint's own Q8_0/Q4_0/Q4_1/Q4_K/Q5_K/Q6_K blocks run natively (float tensors fp32); "
              "fp32 or int8-block activations";
  d.params = {{"activations", ParamType::kString, std::string("fp32"), std::nullopt, std::nullopt, {"fp32", "int8"},
               "fp32: codes widened to float against fp32 activations (the dequantised model's results up to "
               "rounding); int8: activations quantised per 32-block, integer dot products (llama.cpp's arithmetic)"}};
  d.devices = {DeviceKind::kCpu};
  d.supports = [](const SupportQuery& q) { return gguf_strategy_problems(q.model); };
  d.make_quantization = [](const PluginContext& ctx) -> std::unique_ptr<Quantization> {
    return std::make_unique<GgufQuantization>(ctx.weights, ctx.params.get_string("activations") == "int8");
  };
  return d;
}

}  // namespace

INFERLAB_PLUGIN(describe)
