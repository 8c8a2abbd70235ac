// SmoothQuant on a CUDA device (smoothquant_cuda.cpp, compiled only in a CUDA build): the
// descriptor's device map enters SmoothQuantCudaQuantization under kCuda.
#pragma once
#include <cstdint>
#include <memory>

#include "inferlab/device/device.h"
#include "kernels/cuda/gemm_lt.h"
#include "smoothquant.h"

namespace inferlab::plugins {

// A W8A8Linear's weights and s⁻¹ in GPU memory (the host copy stays, for dequantize_row).
class W8A8CudaLinear final : public Linear {
 public:
  // Uploads host's codes, scales, s⁻¹ and (quantize false) W diag(s) to `device` (a CUDA device);
  // lt: the quantization's cuBLASLt handle and workspace, shared by its linears.
  W8A8CudaLinear(std::unique_ptr<W8A8Linear> host, Device& device, std::shared_ptr<cuda::GemmLt> lt);
  // x ⊙ s⁻¹ quantised per token on the GPU, then the kernel kernels/cuda/linear_plan.h picks for n
  // rows: int8_mma.cu's 128-bit __dp4a GEMV (decode), cuBLASLt int8 → int32 on IMMA tensor cores
  // plus the scale epilogue (prefill; s8 mma.sync where in or out is not a multiple of 4);
  // quantize false: x ⊙ s⁻¹ then cuBLAS Sgemm.
  void forward(const float* x, float* y, int n, Device& device) const override;
  std::uint64_t weight_bytes() const override { return host_->weight_bytes(); }
  void dequantize_row(int row, float* out) const override { host_->dequantize_row(row, out); }

 private:
  std::unique_ptr<W8A8Linear> host_;
  std::shared_ptr<cuda::GemmLt> lt_;
  // [in] s⁻¹ (empty without smoothing), [out, in] codes, [out] scales, [out, in] fp32 W diag(s).
  Buffer device_inv_smooth_, device_q_, device_w_scale_, device_w_smoothed_;
};

// SmoothQuantQuantization whose linears run on `device`.
class SmoothQuantCudaQuantization final : public SmoothQuantQuantization {
 public:
  SmoothQuantCudaQuantization(double alpha, bool quantize, bool skip_classifier, Device& device)
      : SmoothQuantQuantization(alpha, quantize, skip_classifier), device_(device) {}

 protected:
  std::unique_ptr<Linear> place(std::unique_ptr<W8A8Linear> linear) override;
  std::unique_ptr<Linear> place_float(std::vector<float> weight, int out, int in) override;

 private:
  Device& device_;
  std::shared_ptr<cuda::GemmLt> lt_;  // created with the first int8 linear
};

}  // namespace inferlab::plugins
