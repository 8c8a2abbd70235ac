// The int4 group-wise linear on a CUDA device (core/src/int4_linear_cuda.cpp, compiled into a
// CUDA build's core): the codes, scales and zero points of an Int4Linear in GPU memory, for the
// CUDA implementations of quantization/int4, gptq and awq.
#pragma once
#include <cstdint>
#include <memory>

#include "kernels/cuda/quant_linear.h"
#include "plugins/common/quantization/int4_linear.h"

namespace inferlab {

class Int4CudaLinear final : public Linear {
 public:
  // Uploads host's codes, scales and zero points to `device` (a CUDA device) and keeps host (the
  // host copy serves dequantize_row).
  Int4CudaLinear(std::unique_ptr<Int4Linear> host, Device& device);
  // The same for a layer the caller keeps alive (an AWQ linear's int4 layer).
  Int4CudaLinear(const Int4Linear& host, Device& device);
  // kernels/cuda/quant_linear.cu (GEMV / fused GEMM) or, with int8 activations,
  // kernels/cuda/quant_act.cu (on-GPU activation blocks, __dp4a).
  void forward(const float* x, float* y, int n, Device& device) const override;
  // With int8 activations ([device] fuse = true): the 32-blocks the fused RMSNorm / SwiGLU made
  // (device memory), straight into the __dp4a GEMV; the same y as forward.
  bool reads_act_blocks() const override { return host_.reads_act_blocks(); }
  void forward_act_blocks(const std::int8_t* xq, const float* xs, float* y, int n, Device& device) const override;
  std::uint64_t weight_bytes() const override { return host_.weight_bytes(); }
  void dequantize_row(int row, float* out) const override { host_.dequantize_row(row, out); }

 private:
  cuda::Int4Weights weights() const;  // the device arrays, as the kernels take them
  std::unique_ptr<Int4Linear> owned_;  // null for a view
  const Int4Linear& host_;
  Buffer device_packed_, device_scale_, device_zero_;
};

}  // namespace inferlab
