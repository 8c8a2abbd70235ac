// No quantization: linears keep their fp32 weights and run the fp32 matmul kernel. The
// baseline every quantization strategy is compared against.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "inferlab/quantization.h"

namespace inferlab::plugins {

class FloatLinear : public Linear {
 public:
  // weight: [out, in], taken over.
  FloatLinear(std::vector<float> weight, int out, int in);
  // y[n, out] = x[n, in] · W^T.
  void forward(const float* x, float* y, int n, ThreadPool& pool) const override;
  // 4 bytes per weight.
  std::uint64_t weight_bytes() const override;

 private:
  std::vector<float> weight_;  // [out, in]
};

class NoQuantization : public Quantization {
 public:
  std::unique_ptr<Linear> make_linear(const std::string& name, std::vector<float> weight, int out,
                                      int in) override;
};

}  // namespace inferlab::plugins
