// AWQ on a CUDA device: uploading s⁻¹ and the int4 layer, and the forward there.
#include "awq_cuda.h"

#include "inferlab/device/cuda_device.h"
#include "inferlab/device/device_upload.h"
#include "kernels/cuda/quant_linear.h"
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
  CudaDevice& cuda = cuda_device(device, "quantization 'awq'");
  // [n, in] x ⊙ s⁻¹ in the workspace; the int4 weight-only kernel that follows uses none.
  auto* scaled = static_cast<float*>(cuda.workspace(static_cast<std::size_t>(n) * in_features() * sizeof(float)));
  cuda::scale_columns(x, device_inv_scale_.as<float>(), scaled, n, in_features(), cuda.stream());
  q_.forward(scaled, y, n, device);
}

std::unique_ptr<Linear> AwqCudaQuantization::place_float(std::vector<float> weight, int out, int in) {
  return std::make_unique<FloatCudaLinear>(weight, out, in, device_);
}

}  // namespace inferlab::plugins
