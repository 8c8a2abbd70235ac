// Plugin descriptor for quantization/bf16: bfloat16 weights (1-8-7 bits, fp32's range)
// (plugins/common/quantization/half_linear.h; the descriptor shared with f16: half_plugin.h).
#include "inferlab/plugin/plugin.h"
#include "plugins/common/quantization/half_plugin.h"

namespace {

inferlab::PluginDescriptor describe() {
  using namespace inferlab;
  return half_plugin_descriptor(
      {"bf16", "bfloat16 weights (1-8-7 bits, fp32's range), fp32 activations; CPU widening dot kernel, CUDA tensor-core GEMM",
       cpu::HalfFormat::kBF16, HalfAmx::kBf16,
       "bf16 (default): activations rounded once to bf16, one product, fp32 sums "
       "(both operands bf16: the two-operand bound 2·2^-8 of Σ|x·w|, as on CUDA); split: activations as two "
       "bf16 terms (weights only rounded: 2^-8, at about half the speed); off: the fp32 panels always"});
}

}  // namespace

INFERLAB_PLUGIN(describe)
