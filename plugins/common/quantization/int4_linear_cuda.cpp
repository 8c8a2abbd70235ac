// Int4Linear's CUDA half: uploading the codes and the forward on a CUDA device.
#include "inferlab/device_upload.h"
#include "inferlab/error.h"
#include "kernels/ref/matmul_int8.h"
#include "plugins/common/quantization/int4_linear.h"
#if INFERLAB_HAVE_CUDA
#include "inferlab/cuda_device.h"
#include "kernels/cuda/quant_linear.h"
#endif

namespace inferlab {

void Int4Linear::place_on(Device* device) {
  if (device == nullptr || device->kind() != DeviceKind::kCuda) return;
  device_packed_ = upload_to(*device, packed_);
  device_scale_ = upload_to(*device, scale_);
  device_zero_ = upload_to(*device, zero_);
}

void Int4Linear::forward_cuda(const float* x, float* y, int n, Device& device) const {
#if INFERLAB_HAVE_CUDA
  check(device_packed_.data() != nullptr, "int4 linear: built for the host, asked to run on cuda (place_on not called)");
  CudaDevice& cuda = cuda_device(device, "int4 linear");
  const cuda::Int4Weights w{device_packed_.as<std::uint8_t>(), device_scale_.as<float>(),
                            zero_.empty() ? nullptr : device_zero_.as<std::uint8_t>(), group_size_};
  const int in = in_features();
  if (!int8_activations_) {
    cuda::int4_linear(x, w, y, n, out_features(), in, cuda.stream());
    return;
  }
  // Workspace: xq [n, in] int8, then xs [n, act_blocks(in)] fp32 (256-byte aligned).
  const std::size_t xq_bytes = (static_cast<std::size_t>(n) * in + 255) / 256 * 256;
  char* ws = static_cast<char*>(
      cuda.workspace(xq_bytes + static_cast<std::size_t>(n) * ref::act_blocks(in) * sizeof(float)));
  auto* xq = reinterpret_cast<std::int8_t*>(ws);
  auto* xs = reinterpret_cast<float*>(ws + xq_bytes);
  cuda::quantize_activations(x, nullptr, n, in, ref::kActBlock, xq, xs, cuda.stream());
  cuda::int4_act_linear(xq, xs, w, y, n, out_features(), in, cuda.stream());
#else
  (void)x, (void)y, (void)n;
  throw Error(std::string("int4 linear: this build has no CUDA, asked to run on ") + device_kind_name(device.kind()));
#endif
}

}  // namespace inferlab
