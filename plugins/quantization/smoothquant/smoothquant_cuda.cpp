// W8A8Linear's CUDA half: uploading the weights, and the forward on a CUDA device.
#include "inferlab/device_upload.h"
#include "inferlab/error.h"
#include "smoothquant.h"
#if INFERLAB_HAVE_CUDA
#include "inferlab/cuda_device.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/quant_linear.h"
#endif

namespace inferlab::plugins {

void W8A8Linear::place_on(Device* device) {
  if (device == nullptr || device->kind() == DeviceKind::kCpu) {
    pack_for_host();
    return;
  }
  if (device->kind() != DeviceKind::kCuda) return;
  device_inv_smooth_ = upload_to(*device, inv_smooth_);
  device_q_ = upload_to(*device, q_);
  device_w_scale_ = upload_to(*device, w_scale_);
  device_w_smoothed_ = upload_to(*device, w_smoothed_);
  on_cuda_ = true;
}

void W8A8Linear::forward_cuda(const float* x, float* y, int n, Device& device) const {
#if INFERLAB_HAVE_CUDA
  check(on_cuda_, "quantization 'smoothquant': linear built for the host, asked to run on cuda");
  CudaDevice& cuda = cuda_device(device, "quantization 'smoothquant'");
  const int in = in_features(), out = out_features();
  const float* inv_smooth = inv_smooth_.empty() ? nullptr : device_inv_smooth_.as<float>();
  if (!quantize_) {
    // [n, in] x ⊙ s⁻¹ in the workspace (x itself when there is no smoothing), then Sgemm.
    const float* xs = x;
    if (inv_smooth != nullptr) {
      auto* scaled = static_cast<float*>(cuda.workspace(static_cast<std::size_t>(n) * in * sizeof(float)));
      cuda::scale_columns(x, inv_smooth, scaled, n, in, cuda.stream());
      xs = scaled;
    }
    cuda::gemm_f32(cuda.cublas(), xs, device_w_smoothed_.as<float>(), y, n, out, in);
    return;
  }
  // Workspace: xq [n, in] int8, then one scale per token [n] fp32 (256-byte aligned).
  const std::size_t xq_bytes = (static_cast<std::size_t>(n) * in + 255) / 256 * 256;
  char* ws = static_cast<char*>(cuda.workspace(xq_bytes + static_cast<std::size_t>(n) * sizeof(float)));
  auto* xq = reinterpret_cast<std::int8_t*>(ws);
  auto* x_scale = reinterpret_cast<float*>(ws + xq_bytes);
  // Per-token scale (block = in) of x ⊙ s⁻¹, then int8 × int8 → int32 per (token, output).
  cuda::quantize_activations(x, inv_smooth, n, in, in, xq, x_scale, cuda.stream());
  cuda::int8_act_linear(xq, x_scale, in, cuda::Int8Weights{device_q_.as<std::int8_t>(), device_w_scale_.as<float>()},
                        y, n, out, in, cuda.stream());
#else
  (void)x, (void)y, (void)n;
  throw Error(std::string("quantization 'smoothquant': this build has no CUDA, asked to run on ") +
              device_kind_name(device.kind()));
#endif
}

}  // namespace inferlab::plugins
