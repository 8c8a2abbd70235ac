// Plugin descriptor for quantization/none.
#include "inferlab/plugin.h"
#include "inferlab/float_linear.h"

namespace {

inferlab::PluginDescriptor describe() {
  using namespace inferlab;
  PluginDescriptor d;
  d.kind = PluginKind::kQuantization;
  d.name = "none";
  d.version = "1.0.0";
  d.summary = "No weight quantization: fp32 weights, fp32 matmul; KV cache fp32 or int8 (per token-head scale)";
  d.devices = {DeviceKind::kCpu, DeviceKind::kCuda};
  d.params = {
      {"kv", ParamType::kString, std::string("f32"), std::nullopt, std::nullopt, {"f32", "int8"},
       "KV cache format: f32, or int8 with one fp32 scale per (token, KV head)"},
  };
  d.make_quantization = [](const PluginContext& ctx) -> std::unique_ptr<Quantization> {
    return std::make_unique<NoQuantization>(ctx.params.get_string("kv") == "int8" ? KvDtype::kInt8 : KvDtype::kF32,
                                            &ctx.device);
  };
  return d;
}

}  // namespace

INFERLAB_PLUGIN(describe)
