// Plugin descriptor for quantization/gptq.
#include "gptq.h"
#include "gptq_cuda.h"
#include "inferlab/plugin/plugin.h"

namespace {

inferlab::plugins::GptqOptions gptq_options(const inferlab::Params& p) {
  inferlab::plugins::GptqOptions o;
  o.group_size = static_cast<int>(p.get_int("group_size"));
  o.damp = p.get_float("damp");
  o.act_order = p.get_bool("act_order");
  o.block_size = static_cast<int>(p.get_int("block_size"));
  o.activations = inferlab::int4_activations(p.get_string("activations"), o.group_size);
  return o;
}

inferlab::PluginDescriptor describe() {
  using namespace inferlab;
  using namespace inferlab::plugins;
  PluginDescriptor d;
  d.kind = PluginKind::kQuantization;
  d.name = "gptq";
  d.version = "1.0.0";
  d.summary =
      "GPTQ (Frantar et al. 2022): int4 group-wise weights chosen column by column with Hessian error "
      "feedback from [calibration] activations; the int4 group format and kernels; int8-block (W4A8, default "
      "where group_size % 32 == 0) or fp32 activations; fp32 KV";
  d.params = {
      {"group_size", ParamType::kInt, std::int64_t{64}, 8.0, 4096.0, {},
       "Input channels per scale (a multiple of 8; 32, 64, 128 are the usual choices)"},
      {"damp", ParamType::kFloat, 0.01, 1e-6, 1.0, {}, "Dampening: damp * mean(diag H) is added to H's diagonal"},
      {"act_order", ParamType::kBool, false, std::nullopt, std::nullopt, {},
       "Quantize columns by decreasing H_ii (group grids fixed up front: 'static groups')"},
      {"block_size", ParamType::kInt, std::int64_t{128}, 8.0, 4096.0, {},
       "Columns per lazy batch update (rounded up to whole groups); changes speed, not results"},
      skip_classifier_param(),
      calibrated_int4_activations_param(),
  };
  d.supports = int4_group_reasons;
  d.devices[DeviceKind::kCpu] = [](const PluginContext& ctx) -> std::unique_ptr<Quantization> {
    return std::make_unique<GptqQuantization>(gptq_options(ctx.params), ctx.params.get_bool("skip_classifier"));
  };
#if INFERLAB_HAVE_CUDA
  d.devices[DeviceKind::kCuda] = {[](const PluginContext& ctx) {  // gptq_cuda.cpp
     return std::make_unique<GptqCudaQuantization>(gptq_options(ctx.params), ctx.params.get_bool("skip_classifier"),
                                                   ctx.device);
   },
                                   int4_cuda_reasons};
#endif
  return d;
}

}  // namespace

INFERLAB_PLUGIN(describe)
