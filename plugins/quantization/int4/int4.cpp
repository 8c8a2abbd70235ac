#include "int4.h"

#include "inferlab/error.h"
#include "plugins/common/quantization/float_linear.h"
#include "q4_panel_linear.h"

namespace inferlab::plugins {

Int4Quantization::Int4Quantization(int group_size, bool symmetric, bool skip_classifier, Int4Activations activations,
                                   bool q4_blocks)
    : group_size_(group_size), symmetric_(symmetric), skip_classifier_(skip_classifier), activations_(activations),
      q4_blocks_(q4_blocks) {
  check_int4_group_size(group_size, "int4");
  check_int4_activations(activations, group_size, "quantization 'int4'");
}

std::unique_ptr<Linear> Int4Quantization::make_linear(const std::string& name,
                                                      std::vector<float> weight, int out, int in) {
  if (skip_classifier_ && name == "classifier")
    return place_float(std::move(weight), out, in);
  if (packs_q4_panels(in)) {
    auto blocks = quantize_q4_blocks(weight, out, in, symmetric_);
    if (blocks) {
      weight.clear();  // consumed
      weight.shrink_to_fit();
      return std::make_unique<Q4PanelLinear>(symmetric_, *blocks, out, in);
    }
    // A scale beyond fp16 (or a non-finite weight): this layer keeps the fp32-scale format.
  }
  auto linear = std::make_unique<Int4Linear>(weight, out, in, group_size_, symmetric_);
  linear->set_activations(activations_);
  weight.clear();  // consumed: release the fp32 copy before the next layer is built
  weight.shrink_to_fit();
  return place(std::move(linear));
}

bool Int4Quantization::packs_q4_panels(int in) const {
  return q4_blocks_ && activations_ == Int4Activations::kInt8 && group_size_ == 32 && in % 32 == 0 && cpu::gemm_gguf_available();
}

std::unique_ptr<Linear> Int4Quantization::place_float(std::vector<float> weight, int out, int in) {
  return std::make_unique<FloatLinear>(std::move(weight), out, in);
}

}  // namespace inferlab::plugins
