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
  // The kernel kernels/cuda/linear_plan.h picks for n rows: fp32 activations — the 128-bit GEMV
  // (decode) or bf16 tensor cores (prefill) of int4_mma.cu where the groups allow, else
  // quant_linear.cu; int8 activations (quantised on the GPU per 32-block) — the 128-bit __dp4a
  // GEMV or s8 tensor cores of int8_mma.cu, else quant_act.cu.
  void forward(const float* x, float* y, int n, Device& device) const override;
  // forward on x ⊙ inv_scale (inv_scale: device [in], or null for x itself): AWQ's s⁻¹, folded
  // into the activation quantisation when activations are int8, else applied into the workspace.
  void forward_smoothed(const float* x, const float* inv_scale, float* y, int n, Device& device) const;
  // With int8 activations ([device] fuse = true): the 32-blocks the fused RMSNorm / SwiGLU made
  // (device memory), straight into the __dp4a GEMV; the same y as forward.
  bool reads_act_blocks() const override { return host_.reads_act_blocks(); }
  void forward_act_blocks(const std::int8_t* xq, const float* xs, float* y, int n, Device& device) const override;
  std::uint64_t weight_bytes() const override { return host_.weight_bytes(); }
  void dequantize_row(int row, float* out) const override { host_.dequantize_row(row, out); }

 private:
  // Uploads rows: host's codes in the row format, rebuilt once where host holds CPU panels.
  Int4CudaLinear(const Int4Linear& host, const Int4Rows& rows, Device& device);
  cuda::Int4Weights weights() const;  // the device arrays, as the kernels take them
  std::unique_ptr<Int4Linear> owned_;  // null for a view
  const Int4Linear& host_;
  Buffer device_packed_, device_scale_, device_zero_;
};

}  // namespace inferlab
