#include "int8.h"

#include "inferlab/error.h"
#include "kernels/cpu/matmul_int8.h"
#include "kernels/cpu/matmul_int8_act.h"
#include "kernels/ref/matmul_int8.h"

namespace inferlab::plugins {

namespace {

// x [n, in] quantised per 32-block into this thread's scratch, so linears on different devices
// never share: xq [n, in], xs [n, act_blocks(in)].
struct ActBlocks {
  const std::int8_t* xq;
  const float* xs;
};
ActBlocks quantize_acts(const float* x, int n, int in, ThreadPool& pool) {
  thread_local std::vector<std::int8_t> xq;
  thread_local std::vector<float> xs;
  xq.resize(static_cast<std::size_t>(n) * in);
  xs.resize(static_cast<std::size_t>(n) * ref::act_blocks(in));
  cpu::quantize_act_rows(x, n, in, xq.data(), xs.data(), pool);
  return {xq.data(), xs.data()};
}

// The group's operands when every member is an Int8Linear holding the panels `panels` returns
// (non-empty: W8A8 panels with int8 activations on VNNI builds, W8A16 decode panels with fp32
// ones; an Int8Linear runs on the CPU only), filled into `out`; false otherwise.
template <class Output, class Panels>
bool collect_group(std::span<const GroupMember> group, std::vector<Output>& out, Panels panels) {
  out.clear();
  for (const GroupMember& m : group) {
    const auto* q = dynamic_cast<const Int8Linear*>(m.linear);
    if (q == nullptr || panels(*q).data.empty()) return false;
    out.push_back({&panels(*q), m.y});
  }
  return true;
}

bool panel_group(std::span<const GroupMember> group, std::vector<cpu::GemmPanelsInt8Output>& out) {
  return collect_group(group, out, [](const Int8Linear& q) -> const cpu::PackedPanelsInt8& { return q.panels(); });
}

bool w8_group(std::span<const GroupMember> group, std::vector<cpu::GemmPanelsW8Output>& out) {
  return collect_group(group, out, [](const Int8Linear& q) -> const cpu::PackedPanelsW8& { return q.w8_panels(); });
}

}  // namespace

Int8Linear::Int8Linear(const std::vector<float>& weight, int out, int in, bool int8_activations)
    : Linear(out, in),
      q_(weight.size()),
      scale_(static_cast<std::size_t>(out > 0 ? out : 0)),
      int8_activations_(int8_activations) {
  check(out > 0 && in > 0 && weight.size() == static_cast<std::size_t>(out) * in,
        "quantization 'int8': weight holds " + std::to_string(weight.size()) +
            " values, expected out*in = " + std::to_string(out) + "*" + std::to_string(in));
  ref::quantize_int8_rows(weight.data(), out, in, q_.data(), scale_.data());
}

cpu::CpuKernel Int8Linear::plan(int rows) const {
  const bool packed = int8_activations_ ? !panels_.data.empty() : !w8_.data.empty();
  return cpu::plan_cpu_linear(int8_activations_ ? cpu::CpuFormat::kW8A8 : cpu::CpuFormat::kW8A16, rows,
                              cpu::CpuLinearShape{.out = out_features(), .in = in_features(), .packed = packed},
                              cpu::CpuIsa::host());
}

void Int8Linear::forward(const float* x, float* y, int n, Device& device) const {
  ThreadPool& pool = cpu_pool(device, "quantization 'int8'");
  if (!int8_activations_) {
    if (plan(n) == cpu::CpuKernel::kPanelsW8)
      cpu::gemm_panels_w8(x, w8_, y, n, pool);
    else
      cpu::matmul_int8(x, q_.data(), scale_.data(), y, n, out_features(), in_features(), pool);
    return;
  }
  const ActBlocks a = quantize_acts(x, n, in_features(), pool);
  forward_act_blocks(a.xq, a.xs, y, n, device);
}

bool Int8Linear::try_forward_group(std::span<const GroupMember> group, const float* x, int n, Device& device) const {
  if (!int8_activations_) {  // W8A16: the decode panels as one dispatch, where they run
    thread_local std::vector<cpu::GemmPanelsW8Output> w8;
    if (plan(n) != cpu::CpuKernel::kPanelsW8 || !w8_group(group, w8)) return false;
    cpu::gemm_panels_w8_group(x, w8, n, cpu_pool(device, "quantization 'int8'"));
    return true;
  }
  thread_local std::vector<cpu::GemmPanelsInt8Output> members;
  if (!panel_group(group, members)) return false;
  ThreadPool& pool = cpu_pool(device, "quantization 'int8'");
  const ActBlocks a = quantize_acts(x, n, in_features(), pool);  // once for the group
  cpu::gemm_panels_int8_group(a.xq, a.xs, members, n, pool);
  return true;
}

bool Int8Linear::try_forward_group_act_blocks(std::span<const GroupMember> group, const std::int8_t* xq,
                                              const float* xs, int n, Device& device) const {
  thread_local std::vector<cpu::GemmPanelsInt8Output> members;
  if (!panel_group(group, members)) return false;
  cpu::gemm_panels_int8_group(xq, xs, members, n, cpu_pool(device, "quantization 'int8'"));
  return true;
}

void Int8Linear::forward_act_blocks(const std::int8_t* xq, const float* xs, float* y, int n, Device& device) const {
  if (!int8_activations_) Linear::forward_act_blocks(xq, xs, y, n, device);  // throws
  ThreadPool& pool = cpu_pool(device, "quantization 'int8'");
  if (!panels_.data.empty()) {
    cpu::gemm_panels_int8(xq, xs, panels_, y, n, pool);
    return;
  }
  cpu::matmul_int8_act(xq, xs, q_.data(), scale_.data(), y, n, out_features(), in_features(), pool);
}

void Int8Linear::dequantize_row(int row, float* out) const {
  check_linear_row(*this, row, "quantization 'int8'");
  if (!panels_.data.empty()) {  // the row-major codes were released when the panels were packed
    cpu::unpack_panel_row_int8(panels_, row, out);
    return;
  }
  const std::size_t in = static_cast<std::size_t>(in_features());
  const std::int8_t* q = q_.data() + static_cast<std::size_t>(row) * in;
  const float s = scale_[static_cast<std::size_t>(row)];
  for (std::size_t i = 0; i < in; ++i) out[i] = s * static_cast<float>(q[i]);
}

void Int8Linear::pack_for_host() {
  if (!int8_activations_) {
    if (w8_.data.empty()) w8_ = cpu::pack_panels_w8(q_.data(), scale_.data(), out_features(), in_features());
    return;
  }
  if (!cpu::gemm_panels_int8_available()) return;
  panels_ = cpu::pack_panels_int8(q_.data(), scale_.data(), out_features(), in_features());
  q_ = {};
}

std::uint64_t Int8Linear::weight_bytes() const {
  if (!panels_.data.empty()) return cpu::packed_bytes(panels_);
  return static_cast<std::uint64_t>(q_.size()) + static_cast<std::uint64_t>(scale_.size()) * 4;
}

std::unique_ptr<Linear> Int8Quantization::make_linear(const std::string& name,
                                                      std::vector<float> weight, int out, int in) {
  (void)name;
  auto linear = std::make_unique<Int8Linear>(weight, out, in, int8_activations_);
  weight.clear();  // consumed: release the fp32 copy before the next layer is built
  weight.shrink_to_fit();
  return place(std::move(linear));
}

std::unique_ptr<Linear> Int8Quantization::place(std::unique_ptr<Int8Linear> linear) {
  linear->pack_for_host();
  return linear;
}

}  // namespace inferlab::plugins
