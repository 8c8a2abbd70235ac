#include "inferlab/float_linear.h"

#include "inferlab/error.h"
#include "kernels/cpu/matmul.h"

namespace inferlab {

FloatLinear::FloatLinear(std::vector<float> weight, int out, int in)
    : Linear(out, in), weight_(std::move(weight)) {
  check(out > 0 && in > 0 && weight_.size() == static_cast<std::size_t>(out) * in,
        "quantization 'none': weight holds " + std::to_string(weight_.size()) +
            " values, expected out*in = " + std::to_string(out) + "*" + std::to_string(in));
}

void FloatLinear::forward(const float* x, float* y, int n, Device& device) const {
  cpu::matmul_f32(x, weight_.data(), y, n, out_features(), in_features(), cpu_pool(device, "fp32 linear"));
}

std::uint64_t FloatLinear::weight_bytes() const {
  return static_cast<std::uint64_t>(weight_.size()) * sizeof(float);
}

std::unique_ptr<Linear> NoQuantization::make_linear(const std::string& name,
                                                    std::vector<float> weight, int out, int in) {
  (void)name;
  return std::make_unique<FloatLinear>(std::move(weight), out, in);
}

}  // namespace inferlab
