// What the int4 group strategies share. CalibratedInt4Quantization: the base of the calibrated
// ones (quantization/gptq, quantization/awq), which keep quantization/int4's group format, give
// plain round-to-nearest codes to a linear without calibration, keep a skipped classifier in
// fp32 and place each linear on the strategy's device (a CUDA subclass overrides place*). And the
// descriptor parts gptq and awq share with quantization/int4.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "inferlab/plugin/plugin.h"
#include "inferlab/plugin/quantization.h"
#include "plugins/common/quantization/int4_linear.h"

namespace inferlab {

class CalibratedInt4Quantization : public Quantization {
 public:
  // Throws Error unless group_size is a multiple of 8 in [8, 4096]; `who` names the strategy.
  CalibratedInt4Quantization(int group_size, Int4Activations activations, bool skip_classifier, const std::string& who);
  using Quantization::make_linear;
  // Without calibration: plain round-to-nearest int4 (quantization/int4's layer).
  std::unique_ptr<Linear> make_linear(const std::string& name, std::vector<float> weight, int out, int in) override;
  // The skipped classifier in fp32; the method's layer where calib has what it reads
  // (calibrated()); else plain round-to-nearest int4.
  std::unique_ptr<Linear> make_linear(const std::string& name, std::vector<float> weight, int out, int in,
                                      const LinearCalibration* calib) override;

  // quantization/int4's format (int4_arithmetic); a skipped classifier is fp32.
  LinearArithmetic arithmetic(const std::string& name, const ModelConfig&) const override {
    if (skip_classifier_ && name == "classifier") return {true, true, false, 0};
    return int4_arithmetic(activations_);
  }

 protected:
  // Whether calib holds what the method reads (else the linear gets round-to-nearest codes).
  virtual bool calibrated(const LinearCalibration& calib) const = 0;
  // The method's layer for W [out, in] from calib, placed on the strategy's device.
  virtual std::unique_ptr<Linear> make_calibrated(const std::string& name, const std::vector<float>& weight, int out,
                                                  int in, const LinearCalibration& calib) = 0;
  // The int4 linears as they run on the strategy's device: on the CPU, as built.
  virtual std::unique_ptr<Linear> place(std::unique_ptr<Int4Linear> linear) { return linear; }
  // A skipped classifier as it runs on the strategy's device: on the CPU, a FloatLinear.
  virtual std::unique_ptr<Linear> place_float(std::vector<float> weight, int out, int in);

 private:
  int group_size_;
  Int4Activations activations_;
  bool skip_classifier_;
};

// The descriptor's supports() of the int4 group strategies (int4, gptq, awq): group_size a
// multiple of 8, and of 32 with activations = "int8" or "int16".
std::vector<std::string> int4_group_reasons(const SupportQuery& q);
// What their CUDA implementations refuse besides: activations = "int16" (a CPU kernel).
std::vector<std::string> int4_cuda_reasons(const SupportQuery& q);

// The `skip_classifier` parameter (default false) of the int4 group strategies.
ParamSpec skip_classifier_param();
// The `activations` parameter ("auto", "fp32", "int16", "int8"; default "auto") of gptq and awq.
ParamSpec calibrated_int4_activations_param();

}  // namespace inferlab
