// int8 on a CUDA device: uploading q and scale, and the forward there.
#include "int8_cuda.h"

#include "inferlab/device/cuda_device.h"
#include "inferlab/device/device_upload.h"
#include "kernels/cuda/linear_plan.h"
#include "kernels/cuda/quant_linear.h"
#include "kernels/cuda/tensor_core_linear.h"
#include "kernels/ref/matmul_int8.h"

namespace inferlab::plugins {

Int8CudaLinear::Int8CudaLinear(std::unique_ptr<Int8Linear> host, Device& device)
    : Linear(host->out_features(), host->in_features()),
      host_(std::move(host)),
      int8_activations_(host_->reads_act_blocks()),
      device_q_(upload_to(device, host_->q())),
      device_scale_(upload_to(device, host_->scale())) {}

std::unique_ptr<Linear> Int8CudaQuantization::place(std::unique_ptr<Int8Linear> linear) {
  return std::make_unique<Int8CudaLinear>(std::move(linear), device_);
}

void Int8CudaLinear::forward(const float* x, float* y, int n, Device& device) const {
  CudaDevice& cuda = cuda_device(device, "quantization 'int8'");
  const cuda::Int8Weights w{device_q_.as<std::int8_t>(), device_scale_.as<float>()};
  const int in = in_features();
  if (!int8_activations_) {
    const int out = out_features();
    switch (cuda::plan_int8_linear(n, in)) {
      case cuda::LinearKernel::kGemv128: cuda::int8_linear_gemv128(x, w, y, n, out, in, cuda.stream()); return;
      case cuda::LinearKernel::kTensorCore: cuda::int8_linear_mma(x, w, y, n, out, in, cuda.stream()); return;
      default: cuda::int8_linear(x, w, y, n, out, in, cuda.stream()); return;
    }
  }
  // Workspace: xq [n, in] int8, then xs [n, act_blocks(in)] fp32 (256-byte aligned).
  const std::size_t xq_bytes = (static_cast<std::size_t>(n) * in + 255) / 256 * 256;
  char* ws = static_cast<char*>(
      cuda.workspace(xq_bytes + static_cast<std::size_t>(n) * ref::act_blocks(in) * sizeof(float)));
  auto* xq = reinterpret_cast<std::int8_t*>(ws);
  auto* xs = reinterpret_cast<float*>(ws + xq_bytes);
  cuda::quantize_activations(x, nullptr, n, in, ref::kActBlock, xq, xs, cuda.stream());
  forward_act_blocks(xq, xs, y, n, device);
}

void Int8CudaLinear::forward_act_blocks(const std::int8_t* xq, const float* xs, float* y, int n,
                                        Device& device) const {
  if (!int8_activations_) Linear::forward_act_blocks(xq, xs, y, n, device);  // throws
  CudaDevice& cuda = cuda_device(device, "quantization 'int8'");
  const cuda::Int8Weights w{device_q_.as<std::int8_t>(), device_scale_.as<float>()};
  const int in = in_features(), out = out_features();
  switch (cuda::plan_int8_act_linear(n, out, in, ref::kActBlock, /*int4_weights=*/false, /*per_token_lt=*/false)) {
    case cuda::LinearKernel::kGemv128:
      cuda::int8_act_linear_gemv128(xq, xs, ref::kActBlock, w, y, n, out, in, cuda.stream());
      return;
    case cuda::LinearKernel::kTensorCore:
      cuda::int8_act_linear_mma(xq, xs, ref::kActBlock, w, y, n, out, in, cuda.stream());
      return;
    default: cuda::int8_act_linear(xq, xs, ref::kActBlock, w, y, n, out, in, cuda.stream()); return;
  }
}

}  // namespace inferlab::plugins
