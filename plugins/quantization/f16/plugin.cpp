// Plugin descriptor for quantization/f16: IEEE binary16 weights (1-5-10 bits, range ±65504) (inferlab/half_linear.h).
#include "inferlab/half_linear.h"
#include "inferlab/plugin.h"

namespace {

inferlab::PluginDescriptor describe() {
  using namespace inferlab;
  PluginDescriptor d;
  d.kind = PluginKind::kQuantization;
  d.name = "f16";
  d.version = "1.0.0";
  d.summary = "IEEE binary16 weights (1-5-10 bits, range ±65504), fp32 activations; CPU widening dot kernel, CUDA tensor-core GEMM";
  d.devices = {DeviceKind::kCpu, DeviceKind::kCuda};
  d.make_quantization = [](const PluginContext& ctx) -> std::unique_ptr<Quantization> {
    return std::make_unique<HalfQuantization>(cpu::HalfFormat::kF16, ctx.device);
  };
  return d;
}

}  // namespace

INFERLAB_PLUGIN(describe)
