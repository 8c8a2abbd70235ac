// The fp32 linear on a CUDA device (float_linear_cuda.cpp, compiled only in a CUDA build): the
// weights in device memory, cuBLAS Sgemm; and the no-quantization strategy whose linears run
// there. quantization/none's descriptor enters FloatCudaQuantization under kCuda; the CUDA
// quantizations (int4, gptq, awq, smoothquant) place a skipped classifier as a FloatCudaLinear.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "plugins/common/quantization/float_linear.h"

namespace inferlab {

class FloatCudaLinear final : public Linear {
 public:
  // weight: [out, in], uploaded to `device` (a CUDA device); the host copy is dropped.
  FloatCudaLinear(const std::vector<float>& weight, int out, int in, Device& device);
  // y[n, out] = x[n, in] · W^T with x and y in device memory (cuBLAS Sgemm).
  void forward(const float* x, float* y, int n, Device& device) const override;
  // 4 bytes per weight.
  std::uint64_t weight_bytes() const override;
  // The row copied back from device memory.
  void dequantize_row(int row, float* out) const override;

 private:
  Device& device_;        // the CUDA device holding weight_
  Buffer weight_;         // [out, in] in CUDA device memory
};

// NoQuantization whose linears run on `device` (a CUDA device).
class FloatCudaQuantization final : public NoQuantization {
 public:
  explicit FloatCudaQuantization(Device& device) : device_(device) {}
  using Quantization::make_linear;
  std::unique_ptr<Linear> make_linear(const std::string& name, std::vector<float> weight, int out,
                                      int in) override;

 private:
  Device& device_;
};

}  // namespace inferlab
