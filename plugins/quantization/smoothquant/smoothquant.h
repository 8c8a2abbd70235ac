// SmoothQuant (Xiao et al. 2022) W8A8: per-input-channel smoothing s moves activation outliers
// into the weights (x ⊙ s⁻¹ and W diag(s)), then int8 weights (one scale per output channel) and
// int8 activations (one scale per token, computed on the fly), multiplied int8 × int8 → int32.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "inferlab/plugin/quantization.h"
#include "kernels/cpu/gemm_panels_f32.h"
#include "kernels/cpu/gemm_panels_int8.h"
#include "kernels/cpu/gemm_w8_int16.h"
#include "kernels/cpu/linear_plan.h"

namespace inferlab::plugins {

// y = dequant(int8(x ⊙ s⁻¹) · int8(W diag(s))ᵀ), or, when `quantize` is false, the smoothing
// transform alone in fp32: y = (x ⊙ s⁻¹) · (W diag(s))ᵀ.
class W8A8Linear : public Linear {
 public:
  // weight [out, in]; smooth: s [in] (all ones = no smoothing).
  W8A8Linear(const std::vector<float>& weight, int out, int in, std::vector<float> smooth, bool quantize);
  // On the CPU (CUDA: W8A8CudaLinear).
  void forward(const float* x, float* y, int n, Device& device) const override;
  // With AVX-512 VNNI (or AVX2 and in not a multiple of 32): the int8 codes move into the packed
  // panels of kernels/cpu/gemm_panels_int8.h (the row-major copy is released), and forward runs
  // gemm_panels_int8_per_token — bit-identical to the plain loop it replaces; on AVX2 builds
  // without AVX-512 (in a multiple of 32, at most 65536) into kernels/cpu/gemm_w8_int16.h's
  // panels instead, forward widening the int8 codes for gemm_w8_int16_per_token (the same bits). With quantize false the fp32 W diag(s) moves into gemm_panels_f32's panels (a forward
  // before this packs them per call).
  void pack_for_host();
  // int8: out·in codes + 4·out scales (+ 4·in for s⁻¹ when smoothing); fp32 (quantize false):
  // 4·out·in (+ 4·in).
  std::uint64_t weight_bytes() const override;
  // The plan's kernel (kernels/cpu/linear_plan.h): per-token W8A8, or fp32 panels (quantize false).
  std::string cpu_kernel(int rows) const override { return cpu::cpu_kernel_info(plan(rows)).name; }
  cpu::CpuKernel plan(int rows) const;
  // The row of the weights forward multiplies x by: (W diag(s))_q[row, :] ⊙ s⁻¹ (the int8 codes
  // times their scale, or the fp32 W diag(s) when quantize is false).
  void dequantize_row(int row, float* out) const override;
  const std::vector<float>& smooth() const { return inv_smooth_; }
  bool quantize() const { return quantize_; }
  // Row-major codes and their scales (empty codes once packed); W diag(s) when quantize is false
  // (empty once packed).
  const std::vector<std::int8_t>& codes() const { return q_; }
  const std::vector<float>& scales() const { return w_scale_; }
  const std::vector<float>& smoothed() const { return w_smoothed_; }

 private:
  bool quantize_;
  std::vector<float> inv_smooth_;     // [in] s⁻¹; empty when s = 1
  std::vector<std::int8_t> q_;        // [out, in] int8(W diag(s)) (released once packed)
  cpu::PackedPanelsInt8 panels_;      // the same codes and scales in VNNI panels (pack_for_host)
  cpu::PackedW8Int16 i16_;            // or in the int16 panels (AVX2 without AVX-512: pack_for_host)
  std::vector<float> w_scale_;        // [out]
  std::vector<float> w_smoothed_;     // [out, in] fp32 W diag(s) (quantize false only; released once packed)
  cpu::PackedPanelsF32 f32_;          // the same in fp32 panels (quantize false, pack_for_host)
};

// s_j = (max|X_j| / max|W_j|)^α over calibration inputs X and the weight column W_{:, j}; 1 where
// either is 0.
std::vector<float> smoothing_scales(const std::vector<float>& weight, int out, int in,
                                    const std::vector<float>& act_max_abs, double alpha);

// The strategy on the CPU; SmoothQuantCudaQuantization (smoothquant_cuda.h) places its linears on
// a GPU.
class SmoothQuantQuantization : public Quantization {
 public:
  SmoothQuantQuantization(double alpha, bool quantize, bool skip_classifier);
  using Quantization::make_linear;
  // Without calibration: no smoothing (plain W8A8).
  std::unique_ptr<Linear> make_linear(const std::string& name, std::vector<float> weight, int out, int in) override;
  std::unique_ptr<Linear> make_linear(const std::string& name, std::vector<float> weight, int out, int in,
                                      const LinearCalibration* calib) override;
  CalibrationNeeds calibration_needs() const override;

  // W8A8 on int8 tensor cores; without quantize (smoothing only) or for a skipped classifier,
  // fp32 weights.
  LinearArithmetic arithmetic(const std::string& name, const ModelConfig&) const override {
    if (!quantize_ || (skip_classifier_ && name == "classifier")) return {true, true, false, 0};
    return {true, false, true, 0};
  }

 protected:
  // The linear as it runs on the strategy's device: on the CPU packed (pack_for_host).
  virtual std::unique_ptr<Linear> place(std::unique_ptr<W8A8Linear> linear);
  // A skipped classifier as it runs on the strategy's device: on the CPU, a FloatLinear.
  virtual std::unique_ptr<Linear> place_float(std::vector<float> weight, int out, int in);

 private:
  double alpha_;
  bool quantize_, skip_classifier_;
};

}  // namespace inferlab::plugins
