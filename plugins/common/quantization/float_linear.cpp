#include "plugins/common/quantization/float_linear.h"

#include <algorithm>

#include "inferlab/error.h"

namespace inferlab {

FloatLinear::FloatLinear(std::vector<float> weight, int out, int in) : Linear(out, in) {
  check(out > 0 && in > 0 && weight.size() == static_cast<std::size_t>(out) * in,
        "quantization 'none': weight holds " + std::to_string(weight.size()) +
            " values, expected out*in = " + std::to_string(out) + "*" + std::to_string(in));
  panels_ = cpu::pack_panels_f32(weight.data(), out, in);
}

void FloatLinear::forward(const float* x, float* y, int n, Device& device) const {
  cpu::gemm_panels_f32(x, panels_, y, n, cpu_pool(device, "fp32 linear"));
}

bool FloatLinear::try_forward_group(std::span<const GroupMember> group, const float* x, int n, Device& device) const {
  if (dynamic_cast<CpuDevice*>(&device) == nullptr) return false;
  thread_local std::vector<cpu::GemmPanelsF32Output> members;
  members.clear();
  for (const GroupMember& m : group) {
    const auto* f = dynamic_cast<const FloatLinear*>(m.linear);
    if (f == nullptr) return false;
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
  cpu::unpack_panel_row_f32(panels_, row, out);
}

std::unique_ptr<Linear> NoQuantization::make_linear(const std::string& name,
                                                    std::vector<float> weight, int out, int in) {
  (void)name;
  return std::make_unique<FloatLinear>(std::move(weight), out, in);
}

}  // namespace inferlab
