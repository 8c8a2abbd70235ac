// AWQ on a CUDA device: uploading s⁻¹ and the int4 layer, and the forward there.
#include "awq_cuda.h"

#include "inferlab/device/cuda_device.h"
#include "inferlab/device/device_upload.h"
#include "plugins/common/quantization/float_linear_cuda.h"

namespace inferlab::plugins {

AwqCudaLinear::AwqCudaLinear(std::unique_ptr<AwqLinear> host, Device& device)
    : Linear(host->out_features(), host->in_features()),
      host_(std::move(host)),
      device_inv_scale_(upload_to(device, host_->inv_scale())),
      q_(host_->int4(), device) {}

std::unique_ptr<Linear> AwqCudaQuantization::place(std::unique_ptr<Int4Linear> linear) {
  return std::make_unique<Int4CudaLinear>(std::move(linear), device_);
}

std::unique_ptr<Linear> AwqCudaQuantization::place(std::unique_ptr<AwqLinear> linear) {
  return std::make_unique<AwqCudaLinear>(std::move(linear), device_);
}

void AwqCudaLinear::forward(const float* x, float* y, int n, Device& device) const {
  // s⁻¹ goes in with x: scaling into the workspace first and then quantising the activations
  // into the same workspace would alias (the int8-activation path writes xq there).
  (void)cuda_device(device, "quantization 'awq'");
  q_.forward_smoothed(x, device_inv_scale_.as<float>(), y, n, device);
}

std::unique_ptr<Linear> AwqCudaQuantization::place_float(std::vector<float> weight, int out, int in) {
  return std::make_unique<FloatCudaLinear>(weight, out, in, device_);
}

}  // namespace inferlab::plugins
