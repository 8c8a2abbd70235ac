// The half-precision linears, the "FP16 baseline" of issue 7: weights stored as IEEE f16 or
// bfloat16 (2 bytes each, rounded to nearest even from the fp32 checkpoint), activations fp32
// at the interface. CPU: the packed-panel GEMM of kernels/cpu/gemm_panels_half (weights kept
// only as half-precision panels, widened to fp32 vector by vector inside the micro-kernel). The
// CUDA counterparts (HalfCudaLinear, HalfCudaQuantization) are in half_linear_cuda.h. The
// plugins quantization/f16 and quantization/bf16 expose both.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "inferlab/plugin/quantization.h"
#include "kernels/cpu/gemm_amx_bf16.h"
#include "kernels/cpu/gemm_panels_half.h"
#include "kernels/cpu/linear_plan.h"

namespace inferlab {

// "f16" or "bf16".
const char* half_format_name(cpu::HalfFormat format);

// CPU prefill on the AMX bf16 tiles (kernels/cpu/gemm_amx_bf16.h), from amx_bf16_min_rows rows
// (kernels/cpu/linear_plan.h) where the tiles run (fewer rows, INFERLAB_AMX=0, no AMX, or the kernel refusing the tile state: the panels).
//  kSplit: weights exact (f16 as two bf16 terms), x as two bf16 terms (about 2^-16): within the
//          format's CPU bound; kBf16: weights and x rounded once to bf16 (2^-8 each: within
//          bf16's two-operand bound, outside f16's); kOff: the fp32 panels always.
enum class HalfAmx { kOff, kBf16, kSplit };
// "off", "bf16", "split"; half_amx_from_name throws inferlab::Error naming the allowed values.
const char* half_amx_name(HalfAmx mode);
HalfAmx half_amx_from_name(const std::string& name);

class HalfLinear : public Linear {
 public:
  // weight: [out, in] fp32, rounded to `format`. `device`: where forward runs, a CPU device
  // (Error otherwise; HalfCudaLinear runs on a GPU).
  HalfLinear(const std::vector<float>& weight, int out, int in, cpu::HalfFormat format, Device& device,
             HalfAmx amx = HalfAmx::kOff);
  // y[n, out] = x[n, in] · W_half^T, x fp32 (AMX modes: see HalfAmx).
  void forward(const float* x, float* y, int n, Device& device) const override;
  std::uint64_t weight_bytes() const override;  // 2 bytes per weight
  // The row widened to fp32.
  void dequantize_row(int row, float* out) const override;
  cpu::HalfFormat format() const { return format_; }
  // Whether a forward of n rows runs on the AMX tiles now (cpu_kernel: the plan's kAmxBf16).
  bool uses_amx(int n) const;
  std::string cpu_kernel(int rows) const override { return cpu::cpu_kernel_info(plan(rows)).name; }
  cpu::CpuKernel plan(int rows) const;
  // The stored weights widened back to fp32 [out, in] (tests).
  std::vector<float> dequantized() const;

 private:
  cpu::HalfFormat format_;
  cpu::PackedPanelsHalf panels_;  // [out, in] in panels on the host
  // With AMX: the same weights as B tiles (a second copy: 2 more bytes per weight and term).
  cpu::PackedAmxBf16 amx_;
  int amx_x_terms_ = 1;
};

// The weight rounded to `format`: [out, in] row-major half bits (HalfLinear, HalfCudaLinear).
// Throws Error when weight does not hold out*in values.
std::vector<std::uint16_t> round_to_half(const std::vector<float>& weight, int out, int in, cpu::HalfFormat format);

// The strategy on the CPU; HalfCudaQuantization (half_linear_cuda.h) on a GPU.
class HalfQuantization : public Quantization {
 public:
  HalfQuantization(cpu::HalfFormat format, Device& device, HalfAmx amx = HalfAmx::kOff)
      : format_(format), device_(device), amx_(amx) {}
  using Quantization::make_linear;
  std::unique_ptr<Linear> make_linear(const std::string& name, std::vector<float> weight, int out,
                                      int in) override;

  // Two bytes per weight (planned_bytes), multiplied at the float tensor rate as they are.
  LinearArithmetic arithmetic(const std::string&, const ModelConfig&) const override { return {true, false, false, 0}; }

 protected:
  cpu::HalfFormat format_;
  Device& device_;

 private:
  HalfAmx amx_;
};

}  // namespace inferlab
