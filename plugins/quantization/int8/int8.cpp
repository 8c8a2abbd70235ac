#include "int8.h"

#include <algorithm>

#include "inferlab/error.h"
#include "inferlab/thread_pool.h"
#include "kernels/cpu/gemm_int4_panels.h"
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

// The group's int16 panels when every member holds them and multiplies the activations as
// `activations` (int16 blocks, or W8A8's int8 blocks widened: both use these panels, so a group
// mixing the two under per-layer rules runs member by member).
bool int16_group(std::span<const GroupMember> group, Int8Activations activations,
                 std::vector<cpu::GemmW8Int16Output>& out) {
  out.clear();
  for (const GroupMember& m : group) {
    const auto* q = dynamic_cast<const Int8Linear*>(m.linear);
    if (q == nullptr || q->int16_panels().codes.empty() || q->activations() != activations) return false;
    out.push_back({&q->int16_panels(), m.y});
  }
  return true;
}

// W8A8's int8 blocks xq [n, in] widened into the int16 panels' pair order, this thread's scratch.
const std::int16_t* widen_blocks(const std::int8_t* xq, int n, int in) {
  thread_local std::vector<std::int16_t> wide;
  wide.resize(static_cast<std::size_t>(n) * in);
  cpu::widen_act_blocks_int16(xq, n, in, wide.data());
  return wide.data();
}

}  // namespace

Int8Activations int8_cpu_activations(const std::string& activations) {
  if (activations == "fp32") return Int8Activations::kFp32;
  if (activations == "int16") return Int8Activations::kInt16;
  if (activations == "int8") return Int8Activations::kInt8;
  check(activations == "auto", "int8 activations = \"" + activations + "\"; allowed: auto, fp32, int16, int8");
  const cpu::CpuIsa isa = cpu::CpuIsa::host();
  // int16 wherever its panels are vectorised (AVX2, AVX-512): faster than fp32 activations from 4
  // rows and at prefill on Zen 3 and Zen 4, level at one row (docs/performance.md).
  return isa.avx2 ? Int8Activations::kInt16 : Int8Activations::kFp32;
}

Int8Linear::Int8Linear(const std::vector<float>& weight, int out, int in, Int8Activations activations)
    : Linear(out, in),
      q_(weight.size()),
      scale_(static_cast<std::size_t>(out > 0 ? out : 0)),
      activations_(activations) {
  check(out > 0 && in > 0 && weight.size() == static_cast<std::size_t>(out) * in,
        "quantization 'int8': weight holds " + std::to_string(weight.size()) +
            " values, expected out*in = " + std::to_string(out) + "*" + std::to_string(in));
  ThreadPool pool;  // rows across all cores at load: each row's codes and scale are its own
  const std::size_t w = static_cast<std::size_t>(in);
  pool.parallel_for(static_cast<std::size_t>(out), [&](std::size_t o0, std::size_t o1) {
    ref::quantize_int8_rows(weight.data() + o0 * w, static_cast<int>(o1 - o0), in, q_.data() + o0 * w, scale_.data() + o0);
  }, std::max<std::size_t>(1, 16384 / w));
}

cpu::CpuFormat Int8Linear::format() const {
  if (activations_ == Int8Activations::kInt8) return cpu::CpuFormat::kW8A8;
  return i16_.codes.empty() ? cpu::CpuFormat::kW8A16 : cpu::CpuFormat::kW8A16Int16;
}

cpu::CpuKernel Int8Linear::plan(int rows) const {
  const cpu::CpuFormat f = format();
  const bool packed = f == cpu::CpuFormat::kW8A8        ? !panels_.data.empty() || !i16_.codes.empty()
                      : f == cpu::CpuFormat::kW8A16Int16 ? !i16_.codes.empty()
                                                          : !w8_.data.empty();
  return cpu::plan_cpu_linear(f, rows, cpu::CpuLinearShape{.out = out_features(), .in = in_features(), .packed = packed},
                              cpu::CpuIsa::host());
}

void Int8Linear::forward(const float* x, float* y, int n, Device& device) const {
  ThreadPool& pool = cpu_pool(device, "quantization 'int8'");
  if (activations_ != Int8Activations::kInt8) {
    switch (plan(n)) {
      case cpu::CpuKernel::kPanelsW8Int16: {
        const cpu::PanelActsInt16 a = cpu::quantize_panel_acts_int16(x, n, in_features());
        cpu::gemm_w8_int16(a.xq, a.xs, i16_, y, n, pool);
        return;
      }
      case cpu::CpuKernel::kPanelsW8: cpu::gemm_panels_w8(x, w8_, y, n, pool); return;
      default: cpu::matmul_int8(x, q_.data(), scale_.data(), y, n, out_features(), in_features(), pool); return;
    }
  }
  const ActBlocks a = quantize_acts(x, n, in_features(), pool);
  forward_act_blocks(a.xq, a.xs, y, n, device);
}

bool Int8Linear::try_forward_group(std::span<const GroupMember> group, const float* x, int n, Device& device) const {
  if (activations_ == Int8Activations::kInt16 && plan(n) == cpu::CpuKernel::kPanelsW8Int16) {
    thread_local std::vector<cpu::GemmW8Int16Output> members;
    if (!int16_group(group, activations_, members)) return false;
    const cpu::PanelActsInt16 a = cpu::quantize_panel_acts_int16(x, n, in_features());  // once for the group
    cpu::gemm_w8_int16_group(a.xq, a.xs, members, n, cpu_pool(device, "quantization 'int8'"));
    return true;
  }
  if (activations_ != Int8Activations::kInt8) {  // W8A16: the decode panels as one dispatch, where they run
    thread_local std::vector<cpu::GemmPanelsW8Output> w8;
    if (plan(n) != cpu::CpuKernel::kPanelsW8 || !w8_group(group, w8)) return false;
    cpu::gemm_panels_w8_group(x, w8, n, cpu_pool(device, "quantization 'int8'"));
    return true;
  }
  if (!i16_.codes.empty()) {  // W8A8 on the int16 panels
    thread_local std::vector<cpu::GemmW8Int16Output> wide;
    if (!int16_group(group, activations_, wide)) return false;
    ThreadPool& pool = cpu_pool(device, "quantization 'int8'");
    const ActBlocks a = quantize_acts(x, n, in_features(), pool);  // once for the group
    cpu::gemm_w8_int16_group(widen_blocks(a.xq, n, in_features()), a.xs, wide, n, pool);
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
  if (!i16_.codes.empty()) {  // W8A8 on the int16 panels: the blocks widened once for the group
    thread_local std::vector<cpu::GemmW8Int16Output> wide;
    if (!int16_group(group, activations_, wide)) return false;
    cpu::gemm_w8_int16_group(widen_blocks(xq, n, in_features()), xs, wide, n, cpu_pool(device, "quantization 'int8'"));
    return true;
  }
  thread_local std::vector<cpu::GemmPanelsInt8Output> members;
  if (!panel_group(group, members)) return false;
  cpu::gemm_panels_int8_group(xq, xs, members, n, cpu_pool(device, "quantization 'int8'"));
  return true;
}

void Int8Linear::forward_act_blocks(const std::int8_t* xq, const float* xs, float* y, int n, Device& device) const {
  if (!reads_act_blocks()) Linear::forward_act_blocks(xq, xs, y, n, device);  // throws
  ThreadPool& pool = cpu_pool(device, "quantization 'int8'");
  if (!i16_.codes.empty()) {
    cpu::gemm_w8_int16(widen_blocks(xq, n, in_features()), xs, i16_, y, n, pool);
    return;
  }
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
  if (q_.empty()) {  // the int16 panels alone
    cpu::unpack_w8_int16_row(i16_, row, out);
    return;
  }
  const std::size_t in = static_cast<std::size_t>(in_features());
  const std::int8_t* q = q_.data() + static_cast<std::size_t>(row) * in;
  const float s = scale_[static_cast<std::size_t>(row)];
  for (std::size_t i = 0; i < in; ++i) out[i] = s * static_cast<float>(q[i]);
}

void Int8Linear::pack_for_host() {
  if (activations_ == Int8Activations::kInt16 && cpu::w8_int16_available(in_features())) {
    if (i16_.codes.empty()) i16_ = cpu::pack_w8_int16(q_.data(), scale_.data(), out_features(), in_features());
    return;
  }
  if (activations_ != Int8Activations::kInt8) {
    if (w8_.data.empty()) w8_ = cpu::pack_panels_w8(q_.data(), scale_.data(), out_features(), in_features());
    return;
  }
  const cpu::CpuLinearShape shape{.out = out_features(), .in = in_features()};
  if (cpu::plan_cpu_linear(cpu::CpuFormat::kW8A8, 1, shape, cpu::CpuIsa::host()) == cpu::CpuKernel::kPanelsW8Int16)
    i16_ = cpu::pack_w8_int16(q_.data(), scale_.data(), out_features(), in_features());  // AVX2: the int16 panels
  else if (cpu::gemm_panels_int8_available())
    panels_ = cpu::pack_panels_int8(q_.data(), scale_.data(), out_features(), in_features());
  else
    return;
  q_ = {};
}

std::uint64_t Int8Linear::weight_bytes() const {
  if (!panels_.data.empty()) return cpu::packed_bytes(panels_);
  if (!i16_.codes.empty()) return cpu::w8_int16_bytes(i16_);
  return static_cast<std::uint64_t>(q_.size()) + static_cast<std::uint64_t>(scale_.size()) * 4;
}

std::unique_ptr<Linear> Int8Quantization::make_linear(const std::string& name,
                                                      std::vector<float> weight, int out, int in) {
  (void)name;
  auto linear = std::make_unique<Int8Linear>(weight, out, in, activations_);
  weight.clear();  // consumed: release the fp32 copy before the next layer is built
  weight.shrink_to_fit();
  return place(std::move(linear));
}

std::unique_ptr<Linear> Int8Quantization::place(std::unique_ptr<Int8Linear> linear) {
  linear->pack_for_host();
  return linear;
}

}  // namespace inferlab::plugins
