// Plugin descriptor for quantization/bf16: bfloat16 weights (1-8-7 bits, fp32's range)
// (plugins/common/quantization/half_linear.h).
#include "inferlab/plugin/plugin.h"
#include "plugins/common/quantization/half_linear.h"
#if INFERLAB_HAVE_CUDA
#include "plugins/common/quantization/half_linear_cuda.h"
#endif

namespace {

inferlab::PluginDescriptor describe() {
  using namespace inferlab;
  PluginDescriptor d;
  d.kind = PluginKind::kQuantization;
  d.name = "bf16";
  d.version = "1.0.0";
  d.summary = "bfloat16 weights (1-8-7 bits, fp32's range), fp32 activations; CPU widening dot kernel, CUDA tensor-core GEMM";
  d.params = {{"amx", ParamType::kString, std::string("bf16"), std::nullopt, std::nullopt, {"split", "bf16", "off"},
               "CPU prefill (16 rows and more) on the AMX bf16 tiles where they run (fewer rows, INFERLAB_AMX=0 "
               "or no AMX: the fp32 panels). bf16 (default): activations rounded once to bf16, one product, fp32 sums "
               "(both operands bf16: the two-operand bound 2·2^-8 of Σ|x·w|, as on CUDA); split: activations as two "
               "bf16 terms (weights only rounded: 2^-8, at about half the speed); off: the fp32 panels always"}};
  d.devices[DeviceKind::kCpu] = [](const PluginContext& ctx) -> std::unique_ptr<Quantization> {
    return std::make_unique<HalfQuantization>(cpu::HalfFormat::kBF16, ctx.device,
                                              half_amx_from_name(ctx.params.get_string("amx")));
  };
#if INFERLAB_HAVE_CUDA
  d.devices[DeviceKind::kCuda] = {[](const PluginContext& ctx) -> std::unique_ptr<Quantization> {
                                     return std::make_unique<HalfCudaQuantization>(cpu::HalfFormat::kBF16, ctx.device);
                                   },
                                   [](const SupportQuery& q) {  // amx picks CPU kernels only
                                     std::vector<std::string> reasons;
                                     if (q.params.get_string("amx") != "bf16")
                                       reasons.push_back("amx = \"" + q.params.get_string("amx") +
                                                         "\" changes only the CPU kernels (allowed on cuda: amx = \"bf16\")");
                                     return reasons;
                                   }};
#endif
  return d;
}

}  // namespace

INFERLAB_PLUGIN(describe)
