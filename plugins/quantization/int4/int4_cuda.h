// int4 on a CUDA device (int4_cuda.cpp, compiled only in a CUDA build): the descriptor's device
// map enters Int4CudaQuantization under kCuda.
#pragma once
#include <memory>

#include "int4.h"

namespace inferlab::plugins {

// Int4Quantization whose linears run on `device` as core's Int4CudaLinear (never as the CPU's
// Q4 panels).
class Int4CudaQuantization final : public Int4Quantization {
 public:
  Int4CudaQuantization(int group_size, bool symmetric, bool skip_classifier, Int4Activations activations,
                       Device& device)
      : Int4Quantization(group_size, symmetric, skip_classifier, activations, /*q4_blocks=*/false),
        device_(device) {}

 protected:
  std::unique_ptr<Linear> place(std::unique_ptr<Int4Linear> linear) override;
  std::unique_ptr<Linear> place_float(std::vector<float> weight, int out, int in) override;

 private:
  Device& device_;
};

}  // namespace inferlab::plugins
