// AWQ on a CUDA device (awq_cuda.cpp, compiled only in a CUDA build): the descriptor's device
// map enters AwqCudaQuantization under kCuda.
#pragma once
#include <cstdint>
#include <memory>

#include "awq.h"
#include "plugins/common/quantization/int4_linear_cuda.h"

namespace inferlab::plugins {

// An AwqLinear's s⁻¹ and int4 layer in GPU memory (the host copy stays, for dequantize_row).
class AwqCudaLinear final : public Linear {
 public:
  // Uploads host's s⁻¹ and int4 codes to `device` (a CUDA device).
  AwqCudaLinear(std::unique_ptr<AwqLinear> host, Device& device);
  // Int4CudaLinear::forward_smoothed with s⁻¹ (folded into the int8 activation quantisation).
  void forward(const float* x, float* y, int n, Device& device) const override;
  std::uint64_t weight_bytes() const override { return host_->weight_bytes(); }
  void dequantize_row(int row, float* out) const override { host_->dequantize_row(row, out); }

 private:
  std::unique_ptr<AwqLinear> host_;
  Buffer device_inv_scale_;  // [in]
  Int4CudaLinear q_;         // host_'s int4 layer on the GPU
};

// AwqQuantization whose linears (searched on the host) run on `device`.
class AwqCudaQuantization final : public AwqQuantization {
 public:
  AwqCudaQuantization(const AwqOptions& options, bool skip_classifier, Device& device)
      : AwqQuantization(options, skip_classifier), device_(device) {}

 protected:
  std::unique_ptr<Linear> place(std::unique_ptr<Int4Linear> linear) override;
  std::unique_ptr<Linear> place(std::unique_ptr<AwqLinear> linear) override;
  std::unique_ptr<Linear> place_float(std::vector<float> weight, int out, int in) override;

 private:
  Device& device_;
};

}  // namespace inferlab::plugins
