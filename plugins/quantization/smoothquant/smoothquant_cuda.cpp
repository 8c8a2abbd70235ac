// SmoothQuant on a CUDA device: uploading the weights, and the forward there.
#include "smoothquant_cuda.h"

#include "inferlab/device/cuda_device.h"
#include "inferlab/device/device_upload.h"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/gemm_lt.h"
#include "kernels/cuda/linear_plan.h"
#include "kernels/cuda/quant_linear.h"
#include "kernels/cuda/tensor_core_linear.h"
#include "plugins/common/quantization/float_linear_cuda.h"

namespace inferlab::plugins {

W8A8CudaLinear::W8A8CudaLinear(std::unique_ptr<W8A8Linear> host, Device& device, std::shared_ptr<cuda::GemmLt> lt)
    : Linear(host->out_features(), host->in_features()),
      host_(std::move(host)),
      lt_(std::move(lt)),
      device_inv_smooth_(upload_to(device, host_->smooth())),
      device_q_(upload_to(device, host_->codes())),
      device_w_scale_(upload_to(device, host_->scales())),
      device_w_smoothed_(upload_to(device, host_->smoothed())) {}

std::unique_ptr<Linear> SmoothQuantCudaQuantization::place(std::unique_ptr<W8A8Linear> linear) {
  if (!lt_) lt_ = std::make_shared<cuda::GemmLt>();  // one handle and workspace for every linear
  return std::make_unique<W8A8CudaLinear>(std::move(linear), device_, lt_);
}

void W8A8CudaLinear::forward(const float* x, float* y, int n, Device& device) const {
  CudaDevice& cuda = cuda_device(device, "quantization 'smoothquant'");
  const int in = in_features(), out = out_features();
  const float* inv_smooth = host_->smooth().empty() ? nullptr : device_inv_smooth_.as<float>();
  if (!host_->quantize()) {
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
  // Workspace: xq [n, in] int8, one scale per token [n] fp32, then (cuBLASLt) the int32 products
  // [n, out] — each part 256-byte aligned.
  const auto align = [](std::size_t b) { return (b + 255) / 256 * 256; };
  const std::size_t xq_bytes = align(static_cast<std::size_t>(n) * in);
  const std::size_t xs_bytes = align(static_cast<std::size_t>(n) * sizeof(float));
  const cuda::LinearKernel kernel = cuda::plan_int8_act_linear(n, out, in, in, /*int4_weights=*/false,
                                                               /*per_token_lt=*/true);
  const std::size_t acc_bytes =
      kernel == cuda::LinearKernel::kCublasLtInt8 ? static_cast<std::size_t>(n) * out * sizeof(std::int32_t) : 0;
  char* ws = static_cast<char*>(cuda.workspace(xq_bytes + xs_bytes + acc_bytes));
  auto* xq = reinterpret_cast<std::int8_t*>(ws);
  auto* x_scale = reinterpret_cast<float*>(ws + xq_bytes);
  // Per-token scale (block = in) of x ⊙ s⁻¹, then int8 × int8 → int32 per (token, output).
  cuda::quantize_activations(x, inv_smooth, n, in, in, xq, x_scale, cuda.stream());
  const cuda::Int8Weights w{device_q_.as<std::int8_t>(), device_w_scale_.as<float>()};
  if (kernel == cuda::LinearKernel::kCublasLtInt8) {  // IMMA, then y = acc · x_scale[r] · w_scale[o]
    auto* acc = reinterpret_cast<std::int32_t*>(ws + xq_bytes + xs_bytes);
    if (lt_->int8(xq, w.q, acc, n, out, in, cuda.stream())) {
      cuda::scale_int32_output(acc, x_scale, w.scale, y, n, out, cuda.stream());
      return;
    }
    // No cuBLASLt algorithm for this shape: the s8 tiles compute the same sums.
  }
  switch (kernel) {
    case cuda::LinearKernel::kCublasLtInt8:
    case cuda::LinearKernel::kTensorCore:
      cuda::int8_act_linear_mma(xq, x_scale, in, w, y, n, out, in, cuda.stream());
      return;
    case cuda::LinearKernel::kGemv128:
      cuda::int8_act_linear_gemv128(xq, x_scale, in, w, y, n, out, in, cuda.stream());
      return;
    default: cuda::int8_act_linear(xq, x_scale, in, w, y, n, out, in, cuda.stream()); return;
  }
}

std::unique_ptr<Linear> SmoothQuantCudaQuantization::place_float(std::vector<float> weight, int out, int in) {
  return std::make_unique<FloatCudaLinear>(weight, out, in, device_);
}

}  // namespace inferlab::plugins
