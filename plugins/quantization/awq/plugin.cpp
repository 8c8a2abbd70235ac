// Plugin descriptor for quantization/awq.
#include "awq.h"
#include "awq_cuda.h"
#include "inferlab/plugin/plugin.h"

namespace {

inferlab::plugins::AwqOptions awq_options(const inferlab::Params& p) {
  inferlab::plugins::AwqOptions o;
  o.group_size = static_cast<int>(p.get_int("group_size"));
  o.grid = static_cast<int>(p.get_int("grid"));
  o.samples = static_cast<int>(p.get_int("samples"));
  o.activations = inferlab::int4_activations(p.get_string("activations"), o.group_size);
  return o;
}

inferlab::PluginDescriptor describe() {
  using namespace inferlab;
  using namespace inferlab::plugins;
  PluginDescriptor d;
  d.kind = PluginKind::kQuantization;
  d.name = "awq";
  d.version = "1.0.0";
  d.summary =
      "AWQ (Lin et al. 2023): per-input-channel scales mean|x|^alpha from [calibration] activations, alpha "
      "grid-searched per linear on calibration rows, then int4 group-wise; int8-block (W4A8, default where "
      "group_size % 32 == 0), fp32 or int16 activations; fp32 KV";
  d.params = {
      {"group_size", ParamType::kInt, std::int64_t{64}, 8.0, 4096.0, {},
       "Input channels per scale (a multiple of 8; AWQ's usual choice is 128)"},
      {"grid", ParamType::kInt, std::int64_t{20}, 1.0, 1000.0, {}, "alpha is searched over {0, 1/grid, ..., 1}"},
      {"samples", ParamType::kInt, std::int64_t{64}, 1.0, 65536.0, {},
       "Calibration rows (sampled with the [calibration] seed) the output error is measured on"},
      skip_classifier_param(),
      calibrated_int4_activations_param(),
  };
  d.supports = int4_group_reasons;
  d.devices[DeviceKind::kCpu] = [](const PluginContext& ctx) -> std::unique_ptr<Quantization> {
    return std::make_unique<AwqQuantization>(awq_options(ctx.params), ctx.params.get_bool("skip_classifier"));
  };
#if INFERLAB_HAVE_CUDA
  d.devices[DeviceKind::kCuda] = {[](const PluginContext& ctx) {  // awq_cuda.cpp
     return std::make_unique<AwqCudaQuantization>(awq_options(ctx.params), ctx.params.get_bool("skip_classifier"),
                                                  ctx.device);
   },
                                   int4_cuda_reasons};
#endif
  return d;
}

}  // namespace

INFERLAB_PLUGIN(describe)
