// int8 on a CUDA device (int8_cuda.cpp, compiled only in a CUDA build): the descriptor's device
// map enters Int8CudaQuantization under kCuda.
#pragma once
#include <cstdint>
#include <memory>

#include "inferlab/device/device.h"
#include "int8.h"

namespace inferlab::plugins {

// An Int8Linear's codes and scales in GPU memory (the host copy stays, for dequantize_row).
class Int8CudaLinear final : public Linear {
 public:
  // Uploads host's q and scale to `device` (a CUDA device).
  Int8CudaLinear(std::unique_ptr<Int8Linear> host, Device& device);
  // fp32 activations: a 128-bit GEMV up to 8 rows (quant_linear.cu's where in % 16 != 0), bf16
  // tensor-core tiles above (int4_mma.cu); with int8 activations the on-GPU activation blocks (per 32)
  // and the kernel kernels/cuda/linear_plan.h picks for n rows: int8_mma.cu's 128-bit __dp4a GEMV
  // (decode) or s8 tensor cores (prefill), quant_act.cu's GEMV for shapes they do not take.
  void forward(const float* x, float* y, int n, Device& device) const override;
  // With int8 activations ([device] fuse = true): the 32-blocks the fused RMSNorm / SwiGLU made
  // (device memory), straight into the __dp4a GEMV; the same y as forward.
  bool reads_act_blocks() const override { return int8_activations_; }
  void forward_act_blocks(const std::int8_t* xq, const float* xs, float* y, int n, Device& device) const override;
  std::uint64_t weight_bytes() const override { return host_->weight_bytes(); }
  void dequantize_row(int row, float* out) const override { host_->dequantize_row(row, out); }

 private:
  std::unique_ptr<Int8Linear> host_;
  bool int8_activations_;
  Buffer device_q_, device_scale_;  // [out, in] codes, [out] scales
};

// Int8Quantization whose linears run on `device`.
class Int8CudaQuantization final : public Int8Quantization {
 public:
  Int8CudaQuantization(Int8Activations activations, Device& device) : Int8Quantization(activations), device_(device) {}

 protected:
  std::unique_ptr<Linear> place(std::unique_ptr<Int8Linear> linear) override;

 private:
  Device& device_;
};

}  // namespace inferlab::plugins
