// Half-precision linears (see inferlab/half_linear.h).
#include "inferlab/half_linear.h"

#include "inferlab/error.h"
#include "kernels/ref/half.h"
#if INFERLAB_HAVE_CUDA
#include "inferlab/cuda_device.h"
#include "kernels/cuda/gemm.h"
#endif

namespace inferlab {

const char* half_format_name(cpu::HalfFormat format) { return format == cpu::HalfFormat::kF16 ? "f16" : "bf16"; }

HalfLinear::HalfLinear(const std::vector<float>& weight, int out, int in, cpu::HalfFormat format, Device& device)
    : Linear(out, in), format_(format), built_for_(device.kind()) {
  check(out > 0 && in > 0 && weight.size() == static_cast<std::size_t>(out) * static_cast<std::size_t>(in),
        std::string("quantization '") + half_format_name(format) + "': weight holds " + std::to_string(weight.size()) +
            " values, expected out*in = " + std::to_string(out) + "*" + std::to_string(in));
  check(device.kind() == DeviceKind::kCpu || device.kind() == DeviceKind::kCuda,
        std::string("quantization '") + half_format_name(format) + "' runs on cpu or cuda, not " +
            device_kind_name(device.kind()));
  weight_.resize(weight.size());
  for (std::size_t i = 0; i < weight.size(); ++i)
    weight_[i] = format == cpu::HalfFormat::kF16 ? ref::float_to_f16(weight[i]) : ref::float_to_bf16(weight[i]);
  if (device.kind() == DeviceKind::kCuda) {
    device_weight_ = Buffer(device, weight_.size() * sizeof(std::uint16_t));
    device.copy_to_device(device_weight_.data(), weight_.data(), weight_.size() * sizeof(std::uint16_t));
    weight_ = {};
    cuda_ = &device;
  }
}

void HalfLinear::forward(const float* x, float* y, int n, Device& device) const {
  check(device.kind() == built_for_, std::string(half_format_name(format_)) + " linear: built for " +
                                         device_kind_name(built_for_) + ", asked to run on " +
                                         device_kind_name(device.kind()));
#if INFERLAB_HAVE_CUDA
  if (device.kind() == DeviceKind::kCuda) {
    CudaDevice& cuda = cuda_device(device, "half linear");
    const std::size_t elems = static_cast<std::size_t>(n) * static_cast<std::size_t>(in_features());
    auto* xh = static_cast<std::uint16_t*>(cuda.workspace(elems * sizeof(std::uint16_t)));  // [n, in] half
    const cuda::HalfType type = format_ == cpu::HalfFormat::kF16 ? cuda::HalfType::kF16 : cuda::HalfType::kBF16;
    cuda::convert_f32_to_half(x, xh, elems, type, cuda.stream());
    cuda::gemm_half(cuda.cublas(), xh, device_weight_.as<std::uint16_t>(), y, n, out_features(), in_features(), type);
    return;
  }
#endif
  cpu::matmul_half(x, weight_.data(), y, n, out_features(), in_features(), format_,
                   cpu_pool(device, "half linear"));
}

std::uint64_t HalfLinear::weight_bytes() const {
  return static_cast<std::uint64_t>(out_features()) * static_cast<std::uint64_t>(in_features()) * 2u;
}

float HalfLinear::widen(std::uint16_t h) const {
  return format_ == cpu::HalfFormat::kF16 ? ref::f16_to_float(h) : ref::bf16_to_float(h);
}

std::vector<float> HalfLinear::dequantized() const {
  check(!weight_.empty(), "HalfLinear::dequantized: the weights live on the GPU");
  std::vector<float> w(weight_.size());
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = widen(weight_[i]);
  return w;
}

void HalfLinear::dequantize_row(int row, float* out) const {
  check_linear_row(*this, row, "half linear");
  const std::size_t in = static_cast<std::size_t>(in_features()), at = static_cast<std::size_t>(row) * in;
  std::vector<std::uint16_t> staged;  // [in] the row read back from the GPU
  const std::uint16_t* h = weight_.data() + at;
  if (cuda_ != nullptr) {
    staged.resize(in);
    cuda_->copy_to_host(staged.data(), device_weight_.as<std::uint16_t>() + at, in * sizeof(std::uint16_t));
    h = staged.data();
  }
  for (std::size_t i = 0; i < in; ++i) out[i] = widen(h[i]);
}

std::unique_ptr<Linear> HalfQuantization::make_linear(const std::string& name, std::vector<float> weight, int out,
                                                      int in) {
  (void)name;  // every linear, the classifier included, is stored in the half type
  return std::make_unique<HalfLinear>(weight, out, in, format_, device_);
}

}  // namespace inferlab
