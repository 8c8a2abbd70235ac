// Plugin descriptor for quantization/int4.
#include "inferlab/plugin/plugin.h"
#include "plugins/common/quantization/int4_strategy.h"
#include "int4.h"
#include "int4_cuda.h"

namespace {

inferlab::PluginDescriptor describe() {
  using namespace inferlab;
  using namespace inferlab::plugins;
  PluginDescriptor d;
  d.kind = PluginKind::kQuantization;
  d.name = "int4";
  d.version = "1.0.0";
  d.summary =
      "int4 weights, group-wise fp32 scales (GPTQ/AWQ/Q4 storage, round-to-nearest, no calibration); fp32 "
      "activations, int16 blocks (W4A16 in integers) or int8 blocks (W4A8: groups of 32 then stored as Q4_0/Q4_1 blocks with fp16 scales)";
  d.params = {
      {"group_size", ParamType::kInt, std::int64_t{32}, 8.0, 4096.0, {},
       "Input channels per scale (a multiple of 8); a partial last group is fine"},
      {"symmetric", ParamType::kBool, false, std::nullopt, std::nullopt, {},
       "true: scale = max|w|/7, q in [-7, 7]; false: min/max range with a 4-bit zero point"},
      skip_classifier_param(),
      {"activations", ParamType::kString, std::string("auto"), std::nullopt, std::nullopt, {"auto", "fp32", "int16", "int8"},
       "auto (default): int8 where group_size is a multiple of 32, else fp32; fp32: weight-only, exact fp32 "
       "activations; int16: 16-bit activations, int16 per 32-block (W4A16 in integers, error below fp16's; CPU; "
       "group_size a multiple of 32); int8: "
       "activations quantised per 32-block on the fly (W4A8, group_size a multiple of 32; groups of 32 on AVX-512 "
       "VNNI builds are stored as Q4_0/Q4_1 blocks with fp16 scales)"},
      {"q4_blocks", ParamType::kBool, true, std::nullopt, std::nullopt, {},
       "With int8 activations and group_size 32 on AVX-512 VNNI builds: true stores Q4_0/Q4_1 blocks with "
       "fp16 scales (cpu::gemm_gguf); false keeps the fp32-scale format (matmul_int4_act). No effect otherwise"},
  };
  d.supports = int4_group_reasons;
  d.devices[DeviceKind::kCpu] = [](const PluginContext& ctx) -> std::unique_ptr<Quantization> {
    return std::make_unique<Int4Quantization>(static_cast<int>(ctx.params.get_int("group_size")),
                                              ctx.params.get_bool("symmetric"),
                                              ctx.params.get_bool("skip_classifier"),
                                              int4_activations(ctx.params.get_string("activations"),
                                                                    static_cast<int>(ctx.params.get_int("group_size"))),
                                              ctx.params.get_bool("q4_blocks"));
  };
#if INFERLAB_HAVE_CUDA
  d.devices[DeviceKind::kCuda] = {[](const PluginContext& ctx) {  // int4_cuda.cpp
                                     const auto group_size = static_cast<int>(ctx.params.get_int("group_size"));
                                     return std::make_unique<Int4CudaQuantization>(
                                         group_size, ctx.params.get_bool("symmetric"),
                                         ctx.params.get_bool("skip_classifier"),
                                         int4_activations(ctx.params.get_string("activations"), group_size),
                                         ctx.device);
                                   },
                                   [](const SupportQuery& q) {  // q4_blocks picks CPU panels only
                                     std::vector<std::string> reasons = int4_cuda_reasons(q);
                                     if (!q.params.get_bool("q4_blocks"))
                                       reasons.push_back("q4_blocks = false changes only the CPU kernels (allowed on "
                                                         "cuda: q4_blocks = true)");
                                     return reasons;
                                   }};
#endif
  return d;
}

}  // namespace

INFERLAB_PLUGIN(describe)
