// GPTQ on a CUDA device (gptq_cuda.cpp, compiled only in a CUDA build): the descriptor's device
// map enters GptqCudaQuantization under kCuda.
#pragma once
#include <memory>

#include "gptq.h"

namespace inferlab::plugins {

// GptqQuantization whose linears (calibrated on the host) run on `device` as core's
// Int4CudaLinear.
class GptqCudaQuantization final : public GptqQuantization {
 public:
  GptqCudaQuantization(const GptqOptions& options, bool skip_classifier, Device& device)
      : GptqQuantization(options, skip_classifier), device_(device) {}

 protected:
  std::unique_ptr<Linear> place(std::unique_ptr<Int4Linear> linear) override;
  std::unique_ptr<Linear> place_float(std::vector<float> weight, int out, int in) override;

 private:
  Device& device_;
};

}  // namespace inferlab::plugins
