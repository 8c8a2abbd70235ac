// Plugin descriptor for quantization/bf16: bfloat16 weights (1-8-7 bits, fp32's range) (inferlab/half_linear.h).
#include "inferlab/half_linear.h"
#include "inferlab/plugin.h"

namespace {

inferlab::PluginDescriptor describe() {
  using namespace inferlab;
  PluginDescriptor d;
  d.kind = PluginKind::kQuantization;
  d.name = "bf16";
  d.version = "1.0.0";
  d.summary = "bfloat16 weights (1-8-7 bits, fp32's range), fp32 activations; CPU widening dot kernel, CUDA tensor-core GEMM";
  d.devices = {DeviceKind::kCpu, DeviceKind::kCuda};
  d.make_quantization = [](const PluginContext& ctx) -> std::unique_ptr<Quantization> {
    return std::make_unique<HalfQuantization>(cpu::HalfFormat::kBF16, ctx.device);
  };
  return d;
}

}  // namespace

INFERLAB_PLUGIN(describe)
