// Plugin descriptor for quantization/none.
#include "inferlab/plugin/plugin.h"
#include "plugins/common/quantization/float_linear.h"
#if INFERLAB_HAVE_CUDA
#include "plugins/common/quantization/float_linear_cuda.h"
#endif

namespace {

inferlab::PluginDescriptor describe() {
  using namespace inferlab;
  PluginDescriptor d;
  d.kind = PluginKind::kQuantization;
  d.name = "none";
  d.version = "1.0.0";
  d.summary = "No weight quantization: fp32 weights, fp32 matmul (the KV format is the variant's kv.dtype)";
  d.devices[DeviceKind::kCpu] = [](const PluginContext&) -> std::unique_ptr<Quantization> {
    return std::make_unique<NoQuantization>();
  };
#if INFERLAB_HAVE_CUDA
  d.devices[DeviceKind::kCuda] = [](const PluginContext& ctx) -> std::unique_ptr<Quantization> {
    return std::make_unique<FloatCudaQuantization>(ctx.device);
  };
#endif
  return d;
}

}  // namespace

INFERLAB_PLUGIN(describe)
