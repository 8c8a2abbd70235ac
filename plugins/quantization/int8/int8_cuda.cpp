// Int8Linear's CUDA half: uploading q and scale, and the forward on a CUDA device.
#include "inferlab/device_upload.h"
#include "inferlab/error.h"
#include "int8.h"
#include "kernels/ref/matmul_int8.h"
#if INFERLAB_HAVE_CUDA
#include "inferlab/cuda_device.h"
#include "kernels/cuda/quant_linear.h"
#endif

namespace inferlab::plugins {

void Int8Linear::place_on(Device* device) {
  if (device == nullptr || device->kind() == DeviceKind::kCpu) {
    pack_for_host();
    return;
  }
  if (device->kind() != DeviceKind::kCuda) return;
  device_q_ = upload_to(*device, q_);
  device_scale_ = upload_to(*device, scale_);
}

void Int8Linear::forward_cuda(const float* x, float* y, int n, Device& device) const {
#if INFERLAB_HAVE_CUDA
  check(device_q_.data() != nullptr, "quantization 'int8': linear built for the host, asked to run on cuda");
  CudaDevice& cuda = cuda_device(device, "quantization 'int8'");
  const cuda::Int8Weights w{device_q_.as<std::int8_t>(), device_scale_.as<float>()};
  const int in = in_features();
  if (!int8_activations_) {
    cuda::int8_linear(x, w, y, n, out_features(), in, cuda.stream());
    return;
  }
  // Workspace: xq [n, in] int8, then xs [n, act_blocks(in)] fp32 (256-byte aligned).
  const std::size_t xq_bytes = (static_cast<std::size_t>(n) * in + 255) / 256 * 256;
  char* ws = static_cast<char*>(
      cuda.workspace(xq_bytes + static_cast<std::size_t>(n) * ref::act_blocks(in) * sizeof(float)));
  auto* xq = reinterpret_cast<std::int8_t*>(ws);
  auto* xs = reinterpret_cast<float*>(ws + xq_bytes);
  cuda::quantize_activations(x, nullptr, n, in, ref::kActBlock, xq, xs, cuda.stream());
  cuda::int8_act_linear(xq, xs, ref::kActBlock, w, y, n, out_features(), in, cuda.stream());
#else
  (void)x, (void)y, (void)n;
  throw Error(std::string("quantization 'int8': this build has no CUDA, asked to run on ") +
              device_kind_name(device.kind()));
#endif
}

}  // namespace inferlab::plugins
