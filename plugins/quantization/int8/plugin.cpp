// Plugin descriptor for quantization/int8.
#include "inferlab/plugin/plugin.h"
#include "int8.h"
#include "int8_cuda.h"

namespace {

inferlab::PluginDescriptor describe() {
  using namespace inferlab;
  using namespace inferlab::plugins;
  PluginDescriptor d;
  d.kind = PluginKind::kQuantization;
  d.name = "int8";
  d.version = "1.0.0";
  d.summary =
      "int8 weights, symmetric per output channel; fp32 activations or int16 blocks of 32 (W8A16), or int8 blocks "
      "of 32 (dynamic W8A8); fp32 KV cache";
  d.params = {{"activations", ParamType::kString, std::string("auto"), std::nullopt, std::nullopt,
               {"auto", "fp32", "int16", "int8"},
               "auto (default): int16 on CPU builds with AVX2 or AVX-512 (the faster kernel there), fp32 on the "
               "portable build and on cuda; fp32: weight-only, exact fp32 activations; int16: 16-bit activations, int16 per 32-block "
               "(W8A16 in integers, error below fp16's; CPU; linears whose input is not a multiple of 32 keep fp32); "
               "int8: activations quantised per 32-block on the fly, integer dot products (W8A8)"}};
  d.devices[DeviceKind::kCpu] = [](const PluginContext& ctx) -> std::unique_ptr<Quantization> {
    return std::make_unique<Int8Quantization>(int8_cpu_activations(ctx.params.get_string("activations")));
  };
#if INFERLAB_HAVE_CUDA
  d.devices[DeviceKind::kCuda] = {[](const PluginContext& ctx) {  // int8_cuda.cpp: auto is fp32 there
                                     const std::string a = ctx.params.get_string("activations");
                                     return std::make_unique<Int8CudaQuantization>(
                                         a == "int8" ? Int8Activations::kInt8 : Int8Activations::kFp32, ctx.device);
                                   },
                                   [](const SupportQuery& q) {
                                     std::vector<std::string> reasons;
                                     if (q.params.get_string("activations") == "int16")
                                       reasons.push_back(
                                           "activations = \"int16\" is a CPU kernel (allowed on cuda: auto, fp32, int8)");
                                     return reasons;
                                   }};
#endif
  return d;
}

}  // namespace

INFERLAB_PLUGIN(describe)
