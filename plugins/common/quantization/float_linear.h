// The fp32 linear (weights kept as floats: on the CPU repacked once into the panels of
// kernels/cpu/gemm_panels_f32.h, which serve decode rows and prefill batches alike; on the
// CUDA device cuBLAS Sgemm with the weights in device memory) and the
// no-quantization strategy built from it: the baseline every quantization strategy is compared
// against, and the linear strategies fall back to for layers they leave in float
// (quantization/int4's fp32 classifier). The plugin quantization/none exposes NoQuantization.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "inferlab/plugin/quantization.h"
#include "kernels/cpu/gemm_panels_f32.h"

namespace inferlab {

class FloatLinear : public Linear {
 public:
  // weight: [out, in], taken over. `device`: where forward will run; a CUDA device gets the
  // weights uploaded (and the host copy dropped), nullptr or the CPU keeps them on the host.
  FloatLinear(std::vector<float> weight, int out, int in, Device* device = nullptr);
  // y[n, out] = x[n, in] · W^T, on the device the weights were built for (Error otherwise).
  void forward(const float* x, float* y, int n, Device& device) const override;
  // On the CPU, a group of FloatLinears with host panels runs as one cpu::gemm_panels_f32_group
  // (x packed once); any other group (a CUDA device, another kind): false.
  bool try_forward_group(std::span<const GroupMember> group, const float* x, int n, Device& device) const override;
  // 4 bytes per weight.
  std::uint64_t weight_bytes() const override;
  // A copy of the row (from device memory when the weights live on a CUDA device).
  void dequantize_row(int row, float* out) const override;

 private:
  Device* cuda_ = nullptr;       // the CUDA device holding device_weight_, or null
  cpu::PackedPanelsF32 panels_;  // [out, in] in panels, on the host (empty on CUDA)
  Buffer device_weight_;         // [out, in] in CUDA device memory (empty on the CPU)
};

class NoQuantization : public Quantization {
 public:
  // device: where the linears run (see FloatLinear); nullptr = the host.
  explicit NoQuantization(Device* device = nullptr) : device_(device) {}
  using Quantization::make_linear;  // the overload taking calibration stays visible
  std::unique_ptr<Linear> make_linear(const std::string& name, std::vector<float> weight, int out,
                                      int in) override;

  // The model's own weights (a simulated GPU serves them in bf16).
  LinearArithmetic arithmetic(const std::string&, const ModelConfig&) const override { return {true, true, false, 0}; }

 private:
  Device* device_;
};

}  // namespace inferlab
