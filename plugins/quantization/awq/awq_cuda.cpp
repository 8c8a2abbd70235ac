// AwqLinear's CUDA half: s⁻¹ on the device, and x ⊙ s⁻¹ before the int4 kernel.
#include "awq.h"
#include "inferlab/device_upload.h"
#include "inferlab/error.h"
#if INFERLAB_HAVE_CUDA
#include "inferlab/cuda_device.h"
#include "kernels/cuda/quant_linear.h"
#endif

namespace inferlab::plugins {

void AwqLinear::place_on(Device* device) {
  if (device == nullptr || device->kind() != DeviceKind::kCuda) return;
  device_inv_scale_ = upload_to(*device, inv_scale_);
  q_->place_on(device);
}

void AwqLinear::forward_cuda(const float* x, float* y, int n, Device& device) const {
#if INFERLAB_HAVE_CUDA
  check(device_inv_scale_.data() != nullptr, "quantization 'awq': linear built for the host, asked to run on cuda");
  CudaDevice& cuda = cuda_device(device, "quantization 'awq'");
  // [n, in] x ⊙ s⁻¹ in the workspace; the int4 weight-only kernel that follows uses none.
  auto* scaled = static_cast<float*>(cuda.workspace(static_cast<std::size_t>(n) * in_features() * sizeof(float)));
  cuda::scale_columns(x, device_inv_scale_.as<float>(), scaled, n, in_features(), cuda.stream());
  q_->forward(scaled, y, n, device);
#else
  (void)x, (void)y, (void)n;
  throw Error(std::string("quantization 'awq': this build has no CUDA, asked to run on ") +
              device_kind_name(device.kind()));
#endif
}

}  // namespace inferlab::plugins
