#include "plugins/common/quantization/float_linear.h"

#include <algorithm>

#include "inferlab/error.h"
#if INFERLAB_HAVE_CUDA
#include "inferlab/device/cuda_device.h"
#include "kernels/cuda/gemm.h"
#endif

namespace inferlab {

FloatLinear::FloatLinear(std::vector<float> weight, int out, int in, Device* device) : Linear(out, in) {
  check(out > 0 && in > 0 && weight.size() == static_cast<std::size_t>(out) * in,
        "quantization 'none': weight holds " + std::to_string(weight.size()) +
            " values, expected out*in = " + std::to_string(out) + "*" + std::to_string(in));
  if (device != nullptr && device->kind() == DeviceKind::kCuda) {
    device_weight_ = Buffer(*device, weight.size() * sizeof(float));
    device->copy_to_device(device_weight_.data(), weight.data(), weight.size() * sizeof(float));
    cuda_ = device;
    return;
  }
  panels_ = cpu::pack_panels_f32(weight.data(), out, in);
}

void FloatLinear::forward(const float* x, float* y, int n, Device& device) const {
  if (device.kind() == DeviceKind::kCuda) {
#if INFERLAB_HAVE_CUDA
    check(device_weight_.data() != nullptr, "fp32 linear: built for the host, asked to run on cuda");
    cuda::gemm_f32(cuda_device(device, "fp32 linear").cublas(), x, device_weight_.as<float>(), y, n, out_features(),
                   in_features());
    return;
#endif
  }
  check(!panels_.data.empty(), "fp32 linear: built for a CUDA device, asked to run on " +
                                    std::string(device_kind_name(device.kind())));
  cpu::gemm_panels_f32(x, panels_, y, n, cpu_pool(device, "fp32 linear"));
}

bool FloatLinear::try_forward_group(std::span<const GroupMember> group, const float* x, int n, Device& device) const {
  if (device.kind() != DeviceKind::kCpu) return false;
  thread_local std::vector<cpu::GemmPanelsF32Output> members;
  members.clear();
  for (const GroupMember& m : group) {
    const auto* f = dynamic_cast<const FloatLinear*>(m.linear);
    if (f == nullptr || f->panels_.data.empty()) return false;
    members.push_back({&f->panels_, m.y});
  }
  cpu::gemm_panels_f32_group(x, members, n, cpu_pool(device, "fp32 linear"));
  return true;
}

std::uint64_t FloatLinear::weight_bytes() const {
  return static_cast<std::uint64_t>(out_features()) * static_cast<std::uint64_t>(in_features()) * sizeof(float);
}

void FloatLinear::dequantize_row(int row, float* out) const {
  check_linear_row(*this, row, "fp32 linear");
  const std::size_t in = static_cast<std::size_t>(in_features()), at = static_cast<std::size_t>(row) * in;
  if (cuda_ != nullptr)
    cuda_->copy_to_host(out, device_weight_.as<float>() + at, in * sizeof(float));
  else
    cpu::unpack_panel_row_f32(panels_, row, out);
}

std::unique_ptr<Linear> NoQuantization::make_linear(const std::string& name,
                                                    std::vector<float> weight, int out, int in) {
  (void)name;
  return std::make_unique<FloatLinear>(std::move(weight), out, in, device_);
}

}  // namespace inferlab
