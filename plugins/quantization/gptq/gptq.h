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
#include "plugins/common/quantization/int4_strategy.h"
#include "plugins/common/quantization/int4_linear.h"

namespace inferlab::plugins {

struct GptqOptions {
  int group_size = 64;    // input channels per scale (multiple of 8)
  double damp = 0.01;     // λ = damp · mean(diag H) added to the diagonal
  bool act_order = false; // quantize columns in order of decreasing H_ii (static groups)
  int block_size = 128;   // columns per lazy batch update (rounded up to a multiple of group_size)
  // fp32 (weight-only), int16 (W4A16, 32-blocks) or int8 (W4A8: the linears quantise activations per 32-block, group_size % 32 == 0)
  Int4Activations activations = Int4Activations::kFp32;
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

// The strategy on the CPU; GptqCudaQuantization (gptq_cuda.h) places its linears on a GPU. Without
// a Hessian (or for a skipped classifier) the shared CalibratedInt4Quantization path.
class GptqQuantization : public CalibratedInt4Quantization {
 public:
  GptqQuantization(const GptqOptions& options, bool skip_classifier);
  CalibrationNeeds calibration_needs() const override;

 protected:
  bool calibrated(const LinearCalibration& calib) const override { return !calib.hessian.empty(); }
  std::unique_ptr<Linear> make_calibrated(const std::string& name, const std::vector<float>& weight, int out, int in,
                                          const LinearCalibration& calib) override;

 private:
  GptqOptions options_;
  // Factors of the last Hessians seen (wq/wk/wv and w1/w3 share theirs).
  struct CachedFactor {
    const LinearCalibration* calib;
    std::array<double, 3> key;
    GptqFactor factor;
  };
  std::vector<CachedFactor> factors_;
};

}  // namespace inferlab::plugins
