// Plugin descriptor for quantization/gguf.
#include "gguf_cuda.h"
#include "gguf_cuda_support.h"
#include "gguf_linear.h"
#include "inferlab/plugin/plugin.h"

namespace {

inferlab::PluginDescriptor describe() {
  using namespace inferlab;
  using namespace inferlab::plugins;
  PluginDescriptor d;
  d.kind = PluginKind::kQuantization;
  d.name = "gguf";
  d.version = "1.0.0";
  d.summary = "a GGUF checkpoint's own Q8_0/Q4_0/Q4_1/Q5_0/Q5_1/IQ4_NL/Q2_K-Q6_K/IQ4_XS blocks run natively "
              "(float tensors fp32); "
              "fp32 or int8-block activations; on cuda Q8_0/Q4_0/Q4_1/Q4_K/Q6_K (dp4a GEMV, f16 tensor-core prefill)";
  d.params = {{"activations", ParamType::kString, std::string("int8"), std::nullopt, std::nullopt, {"fp32", "int8"},
               "int8 (default): activations quantised per 32-block, integer dot products (llama.cpp's arithmetic, "
               "the fast path); fp32: codes widened to float against fp32 activations (the dequantised model's "
               "results up to rounding; 3-6x slower decode)"},
              {"unpack", ParamType::kBool, true, std::nullopt, std::nullopt, {},
               "with activations = int8: prefill unpacks each packed panel's codes once per thread before its token "
               "tiles pass (false: the tiles read the packed panels, as batched decode does); same results, so "
               "the gain is one variant key"},
              {"transcode", ParamType::kBool, true, std::nullopt, std::nullopt, {},
               "with activations = int8: Q5_0 and IQ4_NL blocks (w = d c, c fitting int8) run as Q8_0 panels, the "
               "same integer dot products at 34 bytes per 32 weights (the file's 22 / 18); false: the file's "
               "bytes on the row kernels"}};
  d.supports = [](const SupportQuery& q) {
    std::vector<std::string> problems = gguf_strategy_problems(q.model);
    if (!q.params.get_bool("unpack") && q.params.get_string("activations") != "int8")
      problems.push_back("unpack = false changes only the packed panels of activations = \"int8\" (allowed with "
                         "activations = \"fp32\": unpack = true)");
    if (!q.params.get_bool("transcode") && q.params.get_string("activations") != "int8")
      problems.push_back("transcode = false changes only the panels of activations = \"int8\" (allowed with "
                         "activations = \"fp32\": transcode = true)");
    return problems;
  };
  d.devices[DeviceKind::kCpu] = [](const PluginContext& ctx) -> std::unique_ptr<Quantization> {
    return std::make_unique<GgufQuantization>(ctx.weights, ctx.params.get_string("activations") == "int8",
                                              ctx.params.get_bool("unpack"), ctx.params.get_bool("transcode"));
  };
#if INFERLAB_HAVE_CUDA
  d.devices[DeviceKind::kCuda] = DeviceImpl(  // gguf_cuda.cpp: Q8_0, Q4_0, Q4_1, Q4_K, Q6_K and float tensors
      [](const PluginContext& ctx) -> std::unique_ptr<Quantization> {
        return std::make_unique<GgufCudaQuantization>(ctx.weights, ctx.device);
      },
      [](const SupportQuery& q) { return gguf_cuda_problems(q.model, q.params); });
#endif
  return d;
}

}  // namespace

INFERLAB_PLUGIN(describe)
