// Plugin descriptor for quantization/f16: IEEE binary16 weights (1-5-10 bits, range ±65504)
// (plugins/common/quantization/half_linear.h; the descriptor shared with bf16: half_plugin.h).
#include "inferlab/plugin/plugin.h"
#include "plugins/common/quantization/half_plugin.h"

namespace {

inferlab::PluginDescriptor describe() {
  using namespace inferlab;
  return half_plugin_descriptor(
      {"f16", "IEEE binary16 weights (1-5-10 bits, range ±65504), fp32 activations; CPU widening dot kernel, CUDA tensor-core GEMM",
       cpu::HalfFormat::kF16, HalfAmx::kSplit,
       "split: weights as two bf16 terms (exact), activations as two bf16 terms, fp32 sums (within the "
       "format's CPU bound); bf16: weights and activations rounded once to bf16 (one product; 2^-8 per operand: outside f16's 2^-11); off: the fp32 panels always"});
}

}  // namespace

INFERLAB_PLUGIN(describe)
