// Plugin descriptor for quantization/f16: IEEE binary16 weights (1-5-10 bits, range ±65504)
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
  d.name = "f16";
  d.version = "1.0.0";
  d.summary = "IEEE binary16 weights (1-5-10 bits, range ±65504), fp32 activations; CPU widening dot kernel, CUDA tensor-core GEMM";
  d.params = {{"amx", ParamType::kString, std::string("split"), std::nullopt, std::nullopt, {"split", "bf16", "off"},
               "CPU prefill (16 rows and more) on the AMX bf16 tiles where they run (fewer rows, INFERLAB_AMX=0 "
               "or no AMX: the fp32 panels). split: weights as two bf16 terms (exact), activations as two bf16 terms, fp32 sums (within the "
               "format's CPU bound); bf16: weights and activations rounded once to bf16 (one product; 2^-8 per operand: outside f16's 2^-11); off: the fp32 panels always"}};
  d.devices[DeviceKind::kCpu] = [](const PluginContext& ctx) -> std::unique_ptr<Quantization> {
    return std::make_unique<HalfQuantization>(cpu::HalfFormat::kF16, ctx.device,
                                              half_amx_from_name(ctx.params.get_string("amx")));
  };
#if INFERLAB_HAVE_CUDA
  d.devices[DeviceKind::kCuda] = {[](const PluginContext& ctx) -> std::unique_ptr<Quantization> {
                                     return std::make_unique<HalfCudaQuantization>(cpu::HalfFormat::kF16, ctx.device);
                                   },
                                   [](const SupportQuery& q) {  // amx picks CPU kernels only
                                     std::vector<std::string> reasons;
                                     if (q.params.get_string("amx") != "split")
                                       reasons.push_back("amx = \"" + q.params.get_string("amx") +
                                                         "\" changes only the CPU kernels (allowed on cuda: amx = \"split\")");
                                     return reasons;
                                   }};
#endif
  return d;
}

}  // namespace

INFERLAB_PLUGIN(describe)
