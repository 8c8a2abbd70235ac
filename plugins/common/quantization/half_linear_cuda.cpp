// HalfCudaLinear and HalfCudaQuantization (a CUDA build only; see half_linear_cuda.h).
#if INFERLAB_HAVE_CUDA
#include "plugins/common/quantization/half_linear_cuda.h"

#include "inferlab/device/cuda_device.h"
#include "inferlab/error.h"
#include "kernels/cuda/gemm.h"
#include "kernels/ref/half.h"

namespace inferlab {

HalfCudaLinear::HalfCudaLinear(const std::vector<float>& weight, int out, int in, cpu::HalfFormat format,
                               Device& device, std::shared_ptr<cuda::GemmLt> lt)
    : Linear(out, in), format_(format), device_(device), lt_(std::move(lt)) {
  const std::vector<std::uint16_t> bits = round_to_half(weight, out, in, format);
  (void)cuda_device(device, format == cpu::HalfFormat::kF16 ? "quantization 'f16'" : "quantization 'bf16'");
  weight_ = Buffer(device, bits.size() * sizeof(std::uint16_t));
  device.copy_to_device(weight_.data(), bits.data(), bits.size() * sizeof(std::uint16_t));
}

void HalfCudaLinear::forward(const float* x, float* y, int n, Device& device) const {
  CudaDevice& cuda = cuda_device(device, "half linear");
  const std::size_t elems = static_cast<std::size_t>(n) * static_cast<std::size_t>(in_features());
  auto* xh = static_cast<std::uint16_t*>(cuda.workspace(elems * sizeof(std::uint16_t)));  // [n, in] half
  const cuda::HalfType type = format_ == cpu::HalfFormat::kF16 ? cuda::HalfType::kF16 : cuda::HalfType::kBF16;
  cuda::convert_f32_to_half(x, xh, elems, type, cuda.stream());
  lt_->half(xh, weight_.as<std::uint16_t>(), y, n, out_features(), in_features(), type, nullptr, false,
            cuda.stream());
}

std::uint64_t HalfCudaLinear::weight_bytes() const {
  return static_cast<std::uint64_t>(out_features()) * static_cast<std::uint64_t>(in_features()) * 2u;
}

void HalfCudaLinear::dequantize_row(int row, float* out) const {
  check_linear_row(*this, row, "half linear");
  const std::size_t in = static_cast<std::size_t>(in_features()), at = static_cast<std::size_t>(row) * in;
  std::vector<std::uint16_t> staged(in);  // [in] the row read back from the GPU
  device_.copy_to_host(staged.data(), weight_.as<std::uint16_t>() + at, in * sizeof(std::uint16_t));
  for (std::size_t i = 0; i < in; ++i)
    out[i] = format_ == cpu::HalfFormat::kF16 ? ref::f16_to_float(staged[i]) : ref::bf16_to_float(staged[i]);
}

std::unique_ptr<Linear> HalfCudaQuantization::make_linear(const std::string& name, std::vector<float> weight,
                                                          int out, int in) {
  (void)name;  // every linear, the classifier included, is stored in the half type
  if (!lt_) lt_ = std::make_shared<cuda::GemmLt>();  // one handle and workspace for every linear
  return std::make_unique<HalfCudaLinear>(weight, out, in, format_, device_, lt_);
}

}  // namespace inferlab
#endif  // INFERLAB_HAVE_CUDA
