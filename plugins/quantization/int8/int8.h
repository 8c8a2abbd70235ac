// Weight-only int8 quantization, per output channel, symmetric (the LLM.int8()/
// TensorRT-LLM "W8A16" scheme without outlier decomposition): each row of W gets
// scale = max|w_row| / 127 and q = round(w / scale); activations and the KV cache stay fp32.
// Weight memory falls about 4x, which is what a bandwidth-bound decode step pays for.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "inferlab/quantization.h"

namespace inferlab::plugins {

class Int8Linear : public Linear {
 public:
  // weight: [out, in] fp32, quantized here (kernels/ref/matmul_int8.h defines the format).
  Int8Linear(const std::vector<float>& weight, int out, int in);
  // y[n, out] = x[n, in] · (scale ⊙ Q)^T through kernels/cpu/matmul_int8.
  void forward(const float* x, float* y, int n, Device& device) const override;
  // out*in bytes of int8 plus 4*out bytes of scales.
  std::uint64_t weight_bytes() const override;

  const std::vector<std::int8_t>& q() const { return q_; }
  const std::vector<float>& scale() const { return scale_; }

 private:
  std::vector<std::int8_t> q_;  // [out, in]
  std::vector<float> scale_;    // [out]
};

class Int8Quantization : public Quantization {
 public:
  using Quantization::make_linear;  // the overload taking calibration stays visible
  std::unique_ptr<Linear> make_linear(const std::string& name, std::vector<float> weight, int out,
                                      int in) override;
};

}  // namespace inferlab::plugins
