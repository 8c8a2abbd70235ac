// AWQ (Lin et al. 2023): activation-aware int4 weights. Input channel i of a linear is scaled by
// s_i = mean|x_i|^α before group-wise int4 round-to-nearest and the activation by 1/s_i, with α
// chosen per linear on a grid in [0, 1] to minimise the output error on calibration rows.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "inferlab/plugin/quantization.h"
#include "plugins/common/quantization/int4_strategy.h"
#include "plugins/common/quantization/int4_linear.h"

namespace inferlab::plugins {

struct AwqOptions {
  int group_size = 64;  // input channels per int4 scale (multiple of 8)
  int grid = 20;        // α ∈ {0, 1/grid, …, 1}
  int samples = 64;     // calibration rows the output error is measured on
  // fp32 (weight-only), int16 (W4A16, 32-blocks) or int8 (W4A8: the int4 layer quantises (x ⊙ s⁻¹) per 32-block, group_size % 32 == 0)
  Int4Activations activations = Int4Activations::kFp32;
};

// y = (x ⊙ s⁻¹) · Q(W diag(s))ᵀ: the per-channel scale applied to the activation inside the
// layer (mathematically the same as folding s⁻¹ into the preceding RMSNorm or linear).
class AwqLinear : public Linear {
 public:
  AwqLinear(std::unique_ptr<Int4Linear> q, std::vector<float> inv_scale, double alpha);
  // On the CPU (CUDA: AwqCudaLinear).
  void forward(const float* x, float* y, int n, Device& device) const override;
  // The int4 layer plus 4 bytes per input channel for s⁻¹.
  std::uint64_t weight_bytes() const override;
  // The row of dequantized(): Q(W diag(s))[row, :] ⊙ s⁻¹.
  void dequantize_row(int row, float* out) const override;
  double alpha() const { return alpha_; }
  const Int4Linear& int4() const { return *q_; }                 // Q(W diag(s))
  const std::vector<float>& inv_scale() const { return inv_scale_; }  // [in] s⁻¹
  // Effective weights Q(W diag(s)) diag(s)⁻¹, [out, in].
  std::vector<float> dequantized() const;

 private:
  std::unique_ptr<Int4Linear> q_;
  std::vector<float> inv_scale_;          // [in]
  double alpha_;
};

struct AwqSearch {
  double alpha = 0;
  double error = 0;      // ‖X_s (W − Ŵ)ᵀ‖_F² at the chosen α
  double rtn_error = 0;  // the same at α = 0 (plain round-to-nearest)
};

// Chooses α for W [out, in] on the calibration rows `x` [rows, in] with per-channel magnitudes
// mean_abs [in]; returns the layer and what the search saw.
std::unique_ptr<AwqLinear> awq_quantize(const std::vector<float>& weight, int out, int in,
                                        const std::vector<float>& mean_abs, const std::vector<float>& x, int rows,
                                        const AwqOptions& options, AwqSearch* search = nullptr);

// The strategy on the CPU; AwqCudaQuantization (awq_cuda.h) places its linears on a GPU. Without
// calibration (or for a skipped classifier) the shared CalibratedInt4Quantization path.
class AwqQuantization : public CalibratedInt4Quantization {
 public:
  AwqQuantization(const AwqOptions& options, bool skip_classifier);
  CalibrationNeeds calibration_needs() const override;

 protected:
  bool calibrated(const LinearCalibration& calib) const override;
  std::unique_ptr<Linear> make_calibrated(const std::string& name, const std::vector<float>& weight, int out, int in,
                                          const LinearCalibration& calib) override;
  using CalibratedInt4Quantization::place;
  // An AwqLinear as it runs on the strategy's device: on the CPU, as built.
  virtual std::unique_ptr<Linear> place(std::unique_ptr<AwqLinear> linear) { return linear; }

 private:
  AwqOptions options_;
};

}  // namespace inferlab::plugins
