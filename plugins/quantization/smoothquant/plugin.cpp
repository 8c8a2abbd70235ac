// Plugin descriptor for quantization/smoothquant.
#include "inferlab/plugin/plugin.h"
#include "smoothquant.h"
#include "smoothquant_cuda.h"

namespace {

inferlab::PluginDescriptor describe() {
  using namespace inferlab;
  using namespace inferlab::plugins;
  PluginDescriptor d;
  d.kind = PluginKind::kQuantization;
  d.name = "smoothquant";
  d.version = "1.0.0";
  d.summary =
      "SmoothQuant W8A8 (Xiao et al. 2022): smoothing s = (max|x| / max|w|)^alpha from [calibration], int8 weights "
      "per output channel, int8 activations per token (dynamic), int8 x int8 -> int32; fp32 KV";
  d.params = {
      {"alpha", ParamType::kFloat, 0.5, 0.0, 1.0, {}, "Migration strength: 0 = no smoothing (plain W8A8)"},
      {"quantize", ParamType::kBool, true, std::nullopt, std::nullopt, {},
       "false: the smoothing transform alone, in fp32 (a check that it preserves the function)"},
      {"skip_classifier", ParamType::kBool, false, std::nullopt, std::nullopt, {},
       "Keep the 'classifier' (LM head) in fp32"},
  };
  d.devices[DeviceKind::kCpu] = [](const PluginContext& ctx) -> std::unique_ptr<Quantization> {
    return std::make_unique<SmoothQuantQuantization>(ctx.params.get_float("alpha"), ctx.params.get_bool("quantize"),
                                                     ctx.params.get_bool("skip_classifier"));
  };
#if INFERLAB_HAVE_CUDA
  d.devices[DeviceKind::kCuda] = [](const PluginContext& ctx) {  // smoothquant_cuda.cpp
    return std::make_unique<SmoothQuantCudaQuantization>(ctx.params.get_float("alpha"), ctx.params.get_bool("quantize"),
                                                         ctx.params.get_bool("skip_classifier"), ctx.device);
  };
#endif
  return d;
}

}  // namespace

INFERLAB_PLUGIN(describe)
