#include "int4.h"

#include "inferlab/float_linear.h"
#include "inferlab/error.h"

namespace inferlab::plugins {

Int4Quantization::Int4Quantization(int group_size, bool symmetric, bool skip_classifier)
    : group_size_(group_size), symmetric_(symmetric), skip_classifier_(skip_classifier) {
  check_int4_group_size(group_size, "int4");
}

std::unique_ptr<Linear> Int4Quantization::make_linear(const std::string& name,
                                                      std::vector<float> weight, int out, int in) {
  if (skip_classifier_ && name == "classifier")
    return std::make_unique<FloatLinear>(std::move(weight), out, in);
  auto linear = std::make_unique<Int4Linear>(weight, out, in, group_size_, symmetric_);
  weight.clear();  // consumed: release the fp32 copy before the next layer is built
  weight.shrink_to_fit();
  return linear;
}

}  // namespace inferlab::plugins
