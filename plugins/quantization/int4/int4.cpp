#include "int4.h"

#include "inferlab/float_linear.h"
#include "inferlab/error.h"

namespace inferlab::plugins {

Int4Quantization::Int4Quantization(int group_size, bool symmetric, bool skip_classifier, bool int8_activations,
                                   Device* device)
    : group_size_(group_size), symmetric_(symmetric), skip_classifier_(skip_classifier),
      int8_activations_(int8_activations), device_(device) {
  check_int4_group_size(group_size, "int4");
  check(!int8_activations || group_size % 32 == 0,
        "quantization 'int4': activations = \"int8\" needs group_size a multiple of 32, got " +
            std::to_string(group_size));
}

std::unique_ptr<Linear> Int4Quantization::make_linear(const std::string& name,
                                                      std::vector<float> weight, int out, int in) {
  if (skip_classifier_ && name == "classifier")
    return std::make_unique<FloatLinear>(std::move(weight), out, in, device_);
  auto linear = std::make_unique<Int4Linear>(weight, out, in, group_size_, symmetric_);
  linear->set_int8_activations(int8_activations_);
  linear->place_on(device_);
  weight.clear();  // consumed: release the fp32 copy before the next layer is built
  weight.shrink_to_fit();
  return linear;
}

}  // namespace inferlab::plugins
