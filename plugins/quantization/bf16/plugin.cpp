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
  d.params = {
      {"kv", ParamType::kString, std::string("f32"), std::nullopt, std::nullopt, {"f32", "int8"},
       "KV cache format: f32, or int8 with one fp32 scale per (token, KV head)"},
  };
  d.make_quantization = [](const PluginContext& ctx) -> std::unique_ptr<Quantization> {
    return std::make_unique<HalfQuantization>(cpu::HalfFormat::kBF16, ctx.device,
                                              ctx.params.get_string("kv") == "int8" ? KvDtype::kInt8 : KvDtype::kF32);
  };
  return d;
}

}  // namespace

INFERLAB_PLUGIN(describe)
