// The half-precision linear on a CUDA device (half_linear_cuda.cpp, compiled only in a CUDA
// build): weights rounded to f16 or bf16 in device memory, activations rounded to the same half
// type on the GPU, a cuBLASLt GEMM (kernels/cuda/gemm_lt.h: plans cached per shape, workspace
// allocated once) on tensor cores with fp32 accumulation and fp32 output. The
// descriptors of quantization/f16 and bf16 enter HalfCudaQuantization under kCuda.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/gemm_lt.h"
#include "plugins/common/quantization/half_linear.h"

namespace inferlab {

class HalfCudaLinear final : public Linear {
 public:
  // weight: [out, in] fp32, rounded to `format` and uploaded to `device` (a CUDA device); lt: the
  // quantization's cuBLASLt handle and workspace, shared by its linears.
  HalfCudaLinear(const std::vector<float>& weight, int out, int in, cpu::HalfFormat format, Device& device,
                 std::shared_ptr<cuda::GemmLt> lt);
  // y[n, out] = x[n, in] · W_half^T; x is rounded to the half type first (the tensor-core GEMM
  // multiplies halves), so results carry the activation rounding too.
  void forward(const float* x, float* y, int n, Device& device) const override;
  std::uint64_t weight_bytes() const override;  // 2 bytes per weight
  // The row read back from device memory, widened to fp32.
  void dequantize_row(int row, float* out) const override;

 private:
  cpu::HalfFormat format_;
  Device& device_;  // the CUDA device holding weight_
  std::shared_ptr<cuda::GemmLt> lt_;
  Buffer weight_;  // [out, in] row-major in CUDA device memory
};

// HalfQuantization whose linears run on `device` (a CUDA device; no AMX there).
class HalfCudaQuantization final : public HalfQuantization {
 public:
  HalfCudaQuantization(cpu::HalfFormat format, Device& device) : HalfQuantization(format, device) {}
  using Quantization::make_linear;
  std::unique_ptr<Linear> make_linear(const std::string& name, std::vector<float> weight, int out,
                                      int in) override;

 private:
  std::shared_ptr<cuda::GemmLt> lt_;  // created with the first linear
};

}  // namespace inferlab
