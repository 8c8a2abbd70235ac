// GPTQ on a CUDA device: each linear's codes uploaded into core's Int4CudaLinear.
#include "gptq_cuda.h"

#include "plugins/common/quantization/float_linear_cuda.h"
#include "plugins/common/quantization/int4_linear_cuda.h"

namespace inferlab::plugins {

std::unique_ptr<Linear> GptqCudaQuantization::place(std::unique_ptr<Int4Linear> linear) {
  return std::make_unique<Int4CudaLinear>(std::move(linear), device_);
}

std::unique_ptr<Linear> GptqCudaQuantization::place_float(std::vector<float> weight, int out, int in) {
  return std::make_unique<FloatCudaLinear>(weight, out, in, device_);
}

}  // namespace inferlab::plugins
