// The fp32 linear on the CPU (weights repacked once into the panels of
// kernels/cpu/gemm_panels_f32.h, which serve decode rows and prefill batches alike) and the
// no-quantization strategy built from it: the baseline every quantization strategy is compared
// against, and the linear strategies fall back to for layers they leave in float
// (quantization/int4's fp32 classifier). The CUDA counterparts, FloatCudaLinear and
// FloatCudaQuantization, are in float_linear_cuda.h. The plugin quantization/none exposes both.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "inferlab/plugin/quantization.h"
#include "kernels/cpu/gemm_panels_f32.h"
#include "kernels/cpu/linear_plan.h"

namespace inferlab {

class FloatLinear : public Linear {
 public:
  // weight: [out, in], taken over (repacked into host panels).
  FloatLinear(std::vector<float> weight, int out, int in);
  // y[n, out] = x[n, in] · W^T on a CPU device (Error on any other).
  void forward(const float* x, float* y, int n, Device& device) const override;
  // On the CPU, a group of FloatLinears runs as one cpu::gemm_panels_f32_group (x packed once);
  // a group holding another linear, or another device: false.
  bool try_forward_group(std::span<const GroupMember> group, const float* x, int n, Device& device) const override;
  // 4 bytes per weight.
  std::uint64_t weight_bytes() const override;
  std::string cpu_kernel(int) const override { return cpu::cpu_kernel_info(cpu::CpuKernel::kPanelsF32).name; }
  // A copy of the row.
  void dequantize_row(int row, float* out) const override;

 private:
  cpu::PackedPanelsF32 panels_;  // [out, in] in panels, on the host
};

class NoQuantization : public Quantization {
 public:
  // The linears run on the CPU (FloatCudaQuantization: on a GPU).
  using Quantization::make_linear;  // the overload taking calibration stays visible
  std::unique_ptr<Linear> make_linear(const std::string& name, std::vector<float> weight, int out,
                                      int in) override;

  // The model's own weights (a simulated GPU serves them in bf16).
  LinearArithmetic arithmetic(const std::string&, const ModelConfig&) const override { return {true, true, false, 0}; }
};

}  // namespace inferlab
