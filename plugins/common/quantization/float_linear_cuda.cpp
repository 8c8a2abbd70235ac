// FloatCudaLinear and FloatCudaQuantization (a CUDA build only; see float_linear_cuda.h).
#if INFERLAB_HAVE_CUDA
#include "plugins/common/quantization/float_linear_cuda.h"

#include "inferlab/device/cuda_device.h"
#include "inferlab/error.h"
#include "kernels/cuda/gemm.h"

namespace inferlab {

FloatCudaLinear::FloatCudaLinear(const std::vector<float>& weight, int out, int in, Device& device)
    : Linear(out, in), device_(device) {
  check(out > 0 && in > 0 && weight.size() == static_cast<std::size_t>(out) * in,
        "quantization 'none': weight holds " + std::to_string(weight.size()) +
            " values, expected out*in = " + std::to_string(out) + "*" + std::to_string(in));
  (void)cuda_device(device, "fp32 linear");  // an Error on any other device
  weight_ = Buffer(device, weight.size() * sizeof(float));
  device.copy_to_device(weight_.data(), weight.data(), weight.size() * sizeof(float));
}

void FloatCudaLinear::forward(const float* x, float* y, int n, Device& device) const {
  cuda::gemm_f32(cuda_device(device, "fp32 linear").cublas(), x, weight_.as<float>(), y, n, out_features(),
                 in_features());
}

std::uint64_t FloatCudaLinear::weight_bytes() const {
  return static_cast<std::uint64_t>(out_features()) * static_cast<std::uint64_t>(in_features()) * sizeof(float);
}

void FloatCudaLinear::dequantize_row(int row, float* out) const {
  check_linear_row(*this, row, "fp32 linear");
  const std::size_t in = static_cast<std::size_t>(in_features()), at = static_cast<std::size_t>(row) * in;
  device_.copy_to_host(out, weight_.as<float>() + at, in * sizeof(float));
}

std::unique_ptr<Linear> FloatCudaQuantization::make_linear(const std::string& name, std::vector<float> weight,
                                                           int out, int in) {
  (void)name;
  return std::make_unique<FloatCudaLinear>(weight, out, in, device_);
}

}  // namespace inferlab
#endif  // INFERLAB_HAVE_CUDA
