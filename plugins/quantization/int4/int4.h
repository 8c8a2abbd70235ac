// Weight-only int4 with group-wise scales (the storage format of GPTQ/AWQ checkpoints and of
// llama.cpp's Q4 family, with plain round-to-nearest instead of their calibration): each row of
// W is cut into groups of `group_size` input channels, each group gets an fp32 scale (and, when
// asymmetric, a 4-bit zero point), codes are packed two per byte. Activations and the KV cache
// stay fp32. Format: kernels/ref/matmul_int4.h.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "inferlab/quantization.h"

namespace inferlab::plugins {

class Int4Linear : public Linear {
 public:
  // weight: [out, in] fp32, quantized here. group_size: a multiple of 8 in [8, 4096].
  Int4Linear(const std::vector<float>& weight, int out, int in, int group_size, bool symmetric);
  // y[n, out] = x[n, in] · W_q^T through kernels/cpu/matmul_int4.
  void forward(const float* x, float* y, int n, Device& device) const override;
  // out*ceil(in/2) bytes of codes + 4 bytes of scale per group (+ 1 byte of zero point per
  // group when asymmetric).
  std::uint64_t weight_bytes() const override;

  int group_size() const { return group_size_; }
  int groups() const;  // per row: ceil(in / group_size)
  bool symmetric() const { return zero_.empty(); }
  const std::vector<float>& scale() const { return scale_; }  // [out, groups]
  // The weights the codes stand for, [out, in].
  std::vector<float> dequantized() const;

 private:
  int group_size_;
  std::vector<std::uint8_t> packed_;  // [out, ceil(in / 2)]
  std::vector<float> scale_;          // [out, groups]
  std::vector<std::uint8_t> zero_;    // [out, groups]; empty when symmetric
};

class Int4Quantization : public Quantization {
 public:
  // skip_classifier: the "classifier" tensor stays fp32 (quantization 'none's FloatLinear).
  Int4Quantization(int group_size, bool symmetric, bool skip_classifier);
  std::unique_ptr<Linear> make_linear(const std::string& name, std::vector<float> weight, int out,
                                      int in) override;

 private:
  int group_size_;
  bool symmetric_, skip_classifier_;
};

}  // namespace inferlab::plugins
