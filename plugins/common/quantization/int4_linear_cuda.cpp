// Int4CudaLinear: uploading an Int4Linear's codes and the forward on a CUDA device (a CUDA
// build's core only).
#if INFERLAB_HAVE_CUDA
#include "plugins/common/quantization/int4_linear_cuda.h"

#include "inferlab/device/cuda_device.h"
#include "inferlab/device/device_upload.h"
#include "kernels/cuda/linear_plan.h"
#include "kernels/cuda/quant_linear.h"
#include "kernels/cuda/tensor_core_linear.h"
#include "kernels/ref/matmul_int8.h"

namespace inferlab {

Int4CudaLinear::Int4CudaLinear(const Int4Linear& host, Device& device) : Int4CudaLinear(host, host.rows(), device) {}

Int4CudaLinear::Int4CudaLinear(const Int4Linear& host, const Int4Rows& rows, Device& device)
    : Linear(host.out_features(), host.in_features()),
      host_(host),
      device_packed_(upload_to(device, rows.packed)),
      device_scale_(upload_to(device, rows.scale)),
      device_zero_(upload_to(device, rows.zero)) {}

Int4CudaLinear::Int4CudaLinear(std::unique_ptr<Int4Linear> host, Device& device) : Int4CudaLinear(*host, device) {
  owned_ = std::move(host);
}

cuda::Int4Weights Int4CudaLinear::weights() const {
  return {device_packed_.as<std::uint8_t>(), device_scale_.as<float>(),
          host_.symmetric() ? nullptr : device_zero_.as<std::uint8_t>(), host_.group_size()};
}

void Int4CudaLinear::forward(const float* x, float* y, int n, Device& device) const {
  forward_smoothed(x, nullptr, y, n, device);
}

void Int4CudaLinear::forward_smoothed(const float* x, const float* inv_scale, float* y, int n, Device& device) const {
  CudaDevice& cuda = cuda_device(device, "int4 linear");
  const cuda::Int4Weights w = weights();
  const int in = in_features(), out = out_features();
  if (!host_.reads_act_blocks()) {
    if (inv_scale != nullptr) {  // [n, in] x ⊙ s⁻¹ in the workspace (the fp32 kernels use none)
      auto* scaled = static_cast<float*>(cuda.workspace(static_cast<std::size_t>(n) * in * sizeof(float)));
      cuda::scale_columns(x, inv_scale, scaled, n, in, cuda.stream());
      x = scaled;
    }
    switch (cuda::plan_int4_linear(n, in, host_.group_size())) {
      case cuda::LinearKernel::kGemv128: cuda::int4_linear_gemv128(x, w, y, n, out, in, cuda.stream()); return;
      case cuda::LinearKernel::kTensorCore: cuda::int4_linear_mma(x, w, y, n, out, in, cuda.stream()); return;
      default: cuda::int4_linear(x, w, y, n, out, in, cuda.stream()); return;  // GEMV / tiled fp32 by rows
    }
  }
  // Workspace: xq [n, in] int8, then xs [n, act_blocks(in)] fp32 (256-byte aligned); s⁻¹ is
  // applied inside the quantisation, so x is read once.
  const std::size_t xq_bytes = (static_cast<std::size_t>(n) * in + 255) / 256 * 256;
  char* ws = static_cast<char*>(
      cuda.workspace(xq_bytes + static_cast<std::size_t>(n) * ref::act_blocks(in) * sizeof(float)));
  auto* xq = reinterpret_cast<std::int8_t*>(ws);
  auto* xs = reinterpret_cast<float*>(ws + xq_bytes);
  cuda::quantize_activations(x, inv_scale, n, in, ref::kActBlock, xq, xs, cuda.stream());
  forward_act_blocks(xq, xs, y, n, device);
}

void Int4CudaLinear::forward_act_blocks(const std::int8_t* xq, const float* xs, float* y, int n,
                                        Device& device) const {
  if (!host_.reads_act_blocks()) Linear::forward_act_blocks(xq, xs, y, n, device);  // throws
  CudaDevice& cuda = cuda_device(device, "int4 linear");
  const cuda::Int4Weights w = weights();
  const int in = in_features(), out = out_features();
  switch (cuda::plan_int8_act_linear(n, out, in, ref::kActBlock, /*int4_weights=*/true, /*per_token_lt=*/false)) {
    case cuda::LinearKernel::kGemv128: cuda::int4_act_linear_gemv128(xq, xs, w, y, n, out, in, cuda.stream()); return;
    case cuda::LinearKernel::kTensorCore: cuda::int4_act_linear_mma(xq, xs, w, y, n, out, in, cuda.stream()); return;
    default: cuda::int4_act_linear(xq, xs, w, y, n, out, in, cuda.stream()); return;
  }
}

}  // namespace inferlab
#endif  // INFERLAB_HAVE_CUDA
