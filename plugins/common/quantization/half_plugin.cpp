// half_plugin_descriptor: quantization/f16 and bf16's shared descriptor.
#include "plugins/common/quantization/half_plugin.h"

#if INFERLAB_HAVE_CUDA
#include "plugins/common/quantization/half_linear_cuda.h"
#endif

namespace inferlab {

PluginDescriptor half_plugin_descriptor(const HalfPluginInfo& info) {
  PluginDescriptor d;
  d.kind = PluginKind::kQuantization;
  d.name = info.name;
  d.version = "1.0.0";
  d.summary = info.summary;
  d.params = {{"amx", ParamType::kString, std::string(half_amx_name(info.default_amx)), std::nullopt, std::nullopt,
               {"split", "bf16", "off"},
               "CPU prefill (16 rows and more; 24 with f16's split weights) on the AMX bf16 tiles where they run "
               "(fewer rows, INFERLAB_AMX=0 or no AMX: the fp32 panels). " + info.amx_doc}};
  const cpu::HalfFormat format = info.format;
  d.devices[DeviceKind::kCpu] = [format](const PluginContext& ctx) -> std::unique_ptr<Quantization> {
    return std::make_unique<HalfQuantization>(format, ctx.device, half_amx_from_name(ctx.params.get_string("amx")));
  };
#if INFERLAB_HAVE_CUDA
  const std::string cuda_amx = half_amx_name(info.default_amx);
  d.devices[DeviceKind::kCuda] = {[format](const PluginContext& ctx) -> std::unique_ptr<Quantization> {
                                    return std::make_unique<HalfCudaQuantization>(format, ctx.device);
                                  },
                                  [cuda_amx](const SupportQuery& q) {  // amx picks CPU kernels only
                                    std::vector<std::string> reasons;
                                    if (q.params.get_string("amx") != cuda_amx)
                                      reasons.push_back("amx = \"" + q.params.get_string("amx") +
                                                        "\" changes only the CPU kernels (allowed on cuda: amx = \"" +
                                                        cuda_amx + "\")");
                                    return reasons;
                                  }};
#endif
  return d;
}

}  // namespace inferlab
