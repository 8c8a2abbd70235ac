// Weight-only int4 with group-wise scales (the storage format of GPTQ/AWQ checkpoints and of
// llama.cpp's Q4 family, with plain round-to-nearest instead of their calibration): each row of
// W is cut into groups of `group_size` input channels, each group gets an fp32 scale (and, when
// asymmetric, a 4-bit zero point), codes are packed two per byte. Activations and the KV cache
// stay fp32. Format: kernels/ref/matmul_int4.h; with int8 activations and groups of 32 on
// AVX-512 VNNI builds, GGML Q4_0 / Q4_1 blocks with fp16 scales (q4_panel_linear.h).
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "inferlab/plugin/quantization.h"
#include "plugins/common/quantization/int4_linear.h"

namespace inferlab::plugins {

// The linear itself lives in plugins/common/quantization/int4_linear.h, shared with gptq and awq.
using inferlab::Int4Linear;

// The strategy on the CPU; Int4CudaQuantization (int4_cuda.h) places its linears on a GPU.
class Int4Quantization : public Quantization {
 public:
  using Quantization::make_linear;  // the overload taking calibration stays visible
  // skip_classifier: the "classifier" tensor stays fp32 (quantization 'none's FloatLinear).
  // activations: kInt8 is dynamic W4A8, kInt16 W4A16 in int16 blocks (group_size must be a
  // multiple of 32 for both), kFp32 weight-only (Int4Linear::set_activations).
  // q4_blocks: with int8 activations, store groups of 32 as Q4_0/Q4_1 panels where the build
  // allows (make_linear); false keeps the fp32-scale format and matmul_int4_act there too.
  Int4Quantization(int group_size, bool symmetric, bool skip_classifier,
                   Int4Activations activations = Int4Activations::kFp32, bool q4_blocks = true);
  // With q4_blocks, int8 activations, groups of 32, in a multiple of 32 and a build with
  // cpu::gemm_gguf (AVX-512 VNNI): a Q4PanelLinear (Q4_0 blocks when symmetric, Q4_1 otherwise;
  // fp16 scales, q4_panel_linear.h), unless a scale does not fit in fp16. Otherwise an Int4Linear.
  std::unique_ptr<Linear> make_linear(const std::string& name, std::vector<float> weight, int out,
                                      int in) override;
  // True when a linear of `in` input channels would be built as a Q4PanelLinear.
  bool packs_q4_panels(int in) const;

  // int4_arithmetic (int4_linear.h); a skipped classifier is fp32.
  LinearArithmetic arithmetic(const std::string& name, const ModelConfig&) const override {
    if (skip_classifier_ && name == "classifier") return {true, true, false, 0};
    return int4_arithmetic(activations_);
  }

 protected:
  // The linear as it runs on the strategy's device: on the CPU, as built.
  virtual std::unique_ptr<Linear> place(std::unique_ptr<Int4Linear> linear) { return linear; }
  // A skipped classifier as it runs on the strategy's device: on the CPU, a FloatLinear.
  virtual std::unique_ptr<Linear> place_float(std::vector<float> weight, int out, int in);

 private:
  int group_size_;
  bool symmetric_, skip_classifier_;
  Int4Activations activations_;
  bool q4_blocks_;
};

}  // namespace inferlab::plugins
