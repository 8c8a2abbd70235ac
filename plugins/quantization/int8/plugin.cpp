// Plugin descriptor for quantization/int8.
#include "inferlab/plugin/plugin.h"
#include "int8.h"
#include "int8_cuda.h"

namespace {

inferlab::PluginDescriptor describe() {
  using namespace inferlab;
  using namespace inferlab::plugins;
  PluginDescriptor d;
  d.kind = PluginKind::kQuantization;
  d.name = "int8";
  d.version = "1.0.0";
  d.summary = "int8 weights, symmetric per output channel; fp32 activations (W8A16) or int8 blocks of 32 (dynamic W8A8); fp32 KV cache";
  d.params = {{"activations", ParamType::kString, std::string("fp32"), std::nullopt, std::nullopt, {"fp32", "int8"},
               "fp32: weight-only; int8: activations quantised per 32-block on the fly, integer dot products"}};
  d.devices[DeviceKind::kCpu] = [](const PluginContext& ctx) -> std::unique_ptr<Quantization> {
    return std::make_unique<Int8Quantization>(ctx.params.get_string("activations") == "int8");
  };
#if INFERLAB_HAVE_CUDA
  d.devices[DeviceKind::kCuda] = [](const PluginContext& ctx) {  // int8_cuda.cpp
    return std::make_unique<Int8CudaQuantization>(ctx.params.get_string("activations") == "int8", ctx.device);
  };
#endif
  return d;
}

}  // namespace

INFERLAB_PLUGIN(describe)
