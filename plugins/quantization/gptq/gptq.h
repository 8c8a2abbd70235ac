// GPTQ (Frantar et al. 2022): int4 group-wise weights chosen column by column with second-order
// error feedback from the Hessian of the layer's calibration inputs, stored in the int4 group
// format (kernels/ref/matmul_int4.h) and run by the same kernel as quantization/int4.
#pragma once
#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "inferlab/plugin/quantization.h"
#include "plugins/common/quantization/int4_linear.h"

namespace inferlab::plugins {

struct GptqOptions {
  int group_size = 64;    // input channels per scale (multiple of 8)
  double damp = 0.01;     // λ = damp · mean(diag H) added to the diagonal
  bool act_order = false; // quantize columns in order of decreasing H_ii (static groups)
  int block_size = 128;   // columns per lazy batch update (rounded up to a multiple of group_size)
  bool int8_activations = false;  // W4A8: the linears quantise activations per 32-block (group_size % 32 == 0)
};

// What GPTQ derives from H alone (shared by every linear reading the same input): dead inputs,
// the column order and U, the upper Cholesky factor of the dampened, permuted H⁻¹.
struct GptqFactor {
  std::vector<bool> dead;  // [in] H_ii == 0
  std::vector<int> perm;   // [in] column order
  std::vector<double> u;   // [in, in] row-major, upper triangular
  int in = 0;
};
GptqFactor gptq_factor(const double* hessian, int in, const GptqOptions& options);

// The int4 group codes of W [out, in] by GPTQ against H = Σ x xᵀ [in, in] (row-major, double).
// Asymmetric min/max grids (the rule of ref::quantize_int4_groups), computed from the weights as
// updated when the group's first column is reached (with act_order: from the original weights,
// "static groups", so groups stay contiguous in storage).
std::unique_ptr<Int4Linear> gptq_quantize(const std::vector<float>& weight, int out, int in, const double* hessian,
                                          const GptqOptions& options);
std::unique_ptr<Int4Linear> gptq_quantize(const std::vector<float>& weight, int out, const GptqFactor& factor,
                                          const GptqOptions& options);

// The strategy on the CPU; GptqCudaQuantization (gptq_cuda.h) places its linears on a GPU.
class GptqQuantization : public Quantization {
 public:
  GptqQuantization(const GptqOptions& options, bool skip_classifier);
  using Quantization::make_linear;
  // Without calibration: plain round-to-nearest in the same format (quantization/int4's).
  std::unique_ptr<Linear> make_linear(const std::string& name, std::vector<float> weight, int out, int in) override;
  std::unique_ptr<Linear> make_linear(const std::string& name, std::vector<float> weight, int out, int in,
                                      const LinearCalibration* calib) override;
  CalibrationNeeds calibration_needs() const override;

  // quantization/int4's weight-only format: nibbles unpacked, offset and scaled (3 ops per
  // weight) for a float multiply; a skipped classifier is fp32.
  LinearArithmetic arithmetic(const std::string& name, const ModelConfig&) const override {
    if (skip_classifier_ && name == "classifier") return {true, true, false, 0};
    return {true, false, false, 3};
  }

 protected:
  // The linear as it runs on the strategy's device: on the CPU, as built.
  virtual std::unique_ptr<Linear> place(std::unique_ptr<Int4Linear> linear) { return linear; }
  // A skipped classifier as it runs on the strategy's device: on the CPU, a FloatLinear.
  virtual std::unique_ptr<Linear> place_float(std::vector<float> weight, int out, int in);

 private:
  GptqOptions options_;
  bool skip_classifier_;
  // Factors of the last Hessians seen (wq/wk/wv and w1/w3 share theirs).
  struct CachedFactor {
    const LinearCalibration* calib;
    std::array<double, 3> key;
    GptqFactor factor;
  };
  std::vector<CachedFactor> factors_;
};

}  // namespace inferlab::plugins
