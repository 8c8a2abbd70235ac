// The fp32 linear (weights kept as floats, the AVX2/AVX-512 matmul of kernels/cpu) and the
// no-quantization strategy built from it: the baseline every quantization strategy is compared
// against, and the linear strategies fall back to for layers they leave in float
// (quantization/int4's fp32 classifier). The plugin quantization/none exposes NoQuantization.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "inferlab/quantization.h"

namespace inferlab {

class FloatLinear : public Linear {
 public:
  // weight: [out, in], taken over.
  FloatLinear(std::vector<float> weight, int out, int in);
  // y[n, out] = x[n, in] · W^T.
  void forward(const float* x, float* y, int n, Device& device) const override;
  // 4 bytes per weight.
  std::uint64_t weight_bytes() const override;

 private:
  std::vector<float> weight_;  // [out, in]
};

class NoQuantization : public Quantization {
 public:
  using Quantization::make_linear;  // the overload taking calibration stays visible
  std::unique_ptr<Linear> make_linear(const std::string& name, std::vector<float> weight, int out,
                                      int in) override;
};

}  // namespace inferlab
