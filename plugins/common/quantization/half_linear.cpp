// Half-precision linears (see half_linear.h).
#include "plugins/common/quantization/half_linear.h"

#include "inferlab/error.h"
#include "kernels/cpu/amx.h"
#include "kernels/ref/half.h"

namespace inferlab {

const char* half_format_name(cpu::HalfFormat format) { return format == cpu::HalfFormat::kF16 ? "f16" : "bf16"; }

const char* half_amx_name(HalfAmx mode) {
  return mode == HalfAmx::kOff ? "off" : mode == HalfAmx::kBf16 ? "bf16" : "split";
}

HalfAmx half_amx_from_name(const std::string& name) {
  for (HalfAmx m : {HalfAmx::kOff, HalfAmx::kBf16, HalfAmx::kSplit})
    if (name == half_amx_name(m)) return m;
  throw Error("amx: '" + name + "' is not one of \"split\", \"bf16\", \"off\"");
}

std::vector<std::uint16_t> round_to_half(const std::vector<float>& weight, int out, int in, cpu::HalfFormat format) {
  check(out > 0 && in > 0 && weight.size() == static_cast<std::size_t>(out) * static_cast<std::size_t>(in),
        std::string("quantization '") + half_format_name(format) + "': weight holds " + std::to_string(weight.size()) +
            " values, expected out*in = " + std::to_string(out) + "*" + std::to_string(in));
  std::vector<std::uint16_t> bits(weight.size());  // [out, in] row-major
  for (std::size_t i = 0; i < weight.size(); ++i)
    bits[i] = format == cpu::HalfFormat::kF16 ? ref::float_to_f16(weight[i]) : ref::float_to_bf16(weight[i]);
  return bits;
}

HalfLinear::HalfLinear(const std::vector<float>& weight, int out, int in, cpu::HalfFormat format, Device& device,
                       HalfAmx amx)
    : Linear(out, in), format_(format) {
  std::vector<std::uint16_t> bits = round_to_half(weight, out, in, format);
  (void)cpu_pool(device, format == cpu::HalfFormat::kF16 ? "quantization 'f16'" : "quantization 'bf16'");
  const bool amx_runs = amx != HalfAmx::kOff && cpu::amx_bf16_enabled();
  if (amx_runs && amx == HalfAmx::kBf16 && format == cpu::HalfFormat::kF16)
    for (std::uint16_t& b : bits)  // converted once to bf16: every path (and dequantize_row) applies those weights
      b = ref::float_to_f16(ref::bf16_to_float(ref::float_to_bf16(ref::f16_to_float(b))));
  panels_ = cpu::pack_panels_half(bits.data(), out, in, format);
  if (amx_runs) {
    const bool exact_weights = amx == HalfAmx::kSplit && format == cpu::HalfFormat::kF16;  // bf16 is one term
    amx_ = cpu::pack_amx_bf16(bits.data(), out, in, format, exact_weights ? 2 : 1);
    amx_x_terms_ = amx == HalfAmx::kSplit ? 2 : 1;
  }
}

cpu::CpuKernel HalfLinear::plan(int rows) const {
  const cpu::CpuLinearShape shape{.out = out_features(), .in = in_features(),
                                  .weight_terms = amx_.data.empty() ? 1 : amx_.weight_terms,
                                  .amx_packed = !amx_.data.empty()};
  return cpu::plan_cpu_linear(format_ == cpu::HalfFormat::kF16 ? cpu::CpuFormat::kF16 : cpu::CpuFormat::kBf16, rows,
                              shape, cpu::CpuIsa::host());
}

bool HalfLinear::uses_amx(int n) const { return plan(n) == cpu::CpuKernel::kAmxBf16; }

void HalfLinear::forward(const float* x, float* y, int n, Device& device) const {
  if (uses_amx(n)) cpu::gemm_amx_bf16(x, amx_, amx_x_terms_, y, n, cpu_pool(device, "half linear"));
  else cpu::gemm_panels_half(x, panels_, y, n, cpu_pool(device, "half linear"));
}

std::uint64_t HalfLinear::weight_bytes() const {
  return static_cast<std::uint64_t>(out_features()) * static_cast<std::uint64_t>(in_features()) * 2u;
}

std::vector<float> HalfLinear::dequantized() const {
  const std::size_t in = static_cast<std::size_t>(in_features());
  std::vector<float> w(static_cast<std::size_t>(out_features()) * in);
  for (int r = 0; r < out_features(); ++r) cpu::unpack_panel_row_half(panels_, r, w.data() + r * in);
  return w;
}

void HalfLinear::dequantize_row(int row, float* out) const {
  check_linear_row(*this, row, "half linear");
  cpu::unpack_panel_row_half(panels_, row, out);
}

std::unique_ptr<Linear> HalfQuantization::make_linear(const std::string& name, std::vector<float> weight, int out,
                                                      int in) {
  (void)name;  // every linear, the classifier included, is stored in the half type
  return std::make_unique<HalfLinear>(weight, out, in, format_, device_, amx_);
}

}  // namespace inferlab
