#include "plugins/common/quantization/int4_linear.h"

#include <algorithm>
#include <cmath>

#include "inferlab/error.h"
#include "inferlab/thread_pool.h"
#include "kernels/cpu/gemm_int4_panels.h"
#include "kernels/cpu/matmul_int4.h"
#include "kernels/cpu/matmul_int4_act.h"
#include "kernels/cpu/matmul_int8_act.h"
#include "kernels/cpu/quantize_int4.h"
#include "kernels/ref/matmul_int8.h"
#include "kernels/ref/matmul_int4.h"

namespace inferlab {

void check_int4_group_size(int group_size, const std::string& who) {
  check(group_size >= 8 && group_size <= 4096 && group_size % 8 == 0,
        "quantization '" + who + "': group_size must be a multiple of 8 in [8, 4096], got " +
            std::to_string(group_size));
}

Int4Activations int4_activations(const std::string& activations, int group_size) {
  if (activations == "int8") return Int4Activations::kInt8;
  if (activations == "int16") return Int4Activations::kInt16;
  if (activations == "fp32") return Int4Activations::kFp32;
  check(activations == "auto", "int4 activations = \"" + activations + "\"; allowed: auto, fp32, int16, int8");
  return group_size % ref::kActBlock == 0 ? Int4Activations::kInt8 : Int4Activations::kFp32;
}

const char* int4_activations_name(Int4Activations activations) {
  switch (activations) {
    case Int4Activations::kInt8: return "int8";
    case Int4Activations::kInt16: return "int16";
    default: return "fp32";
  }
}

void check_int4_activations(Int4Activations activations, int group_size, const std::string& who) {
  check(activations == Int4Activations::kFp32 || group_size % ref::kActBlock == 0,
        who + " with activations = \"" + int4_activations_name(activations) + "\" needs group_size a multiple of " +
            std::to_string(ref::kActBlock) + ", got " + std::to_string(group_size));
}

LinearArithmetic int4_arithmetic(Int4Activations activations) {
  if (activations == Int4Activations::kInt8) return {true, false, true, 2};
  LinearArithmetic a{true, false, false, 3};
  a.int16_dot = activations == Int4Activations::kInt16;
  return a;
}

int Int4Grid::code(float w) const {
  return static_cast<int>(std::clamp((scale > 0.0f ? std::lround(w / scale) : 0L) + zero, 0L, 15L));
}

Int4Grid int4_grid(float lo, float hi) {
  lo = std::min(lo, 0.0f);
  hi = std::max(hi, 0.0f);
  Int4Grid g;
  g.scale = (hi - lo) / 15.0f;
  g.zero = g.scale > 0.0f ? static_cast<int>(std::clamp(std::lround(-lo / g.scale), 0L, 15L)) : 0;
  return g;
}

Int4Linear::Int4Linear(const std::vector<float>& weight, int out, int in, int group_size, bool symmetric)
    : Linear(out, in), group_size_(group_size), symmetric_(symmetric) {
  check(out > 0 && in > 0 && weight.size() == static_cast<std::size_t>(out) * in,
        "quantization 'int4': weight holds " + std::to_string(weight.size()) +
            " values, expected out*in = " + std::to_string(out) + "*" + std::to_string(in));
  check_int4_group_size(group_size, "int4");
  const std::size_t cells = static_cast<std::size_t>(out) * ref::int4_groups(in, group_size);
  rows_.packed.resize(static_cast<std::size_t>(out) * ref::int4_row_bytes(in));
  rows_.scale.resize(cells);
  if (!symmetric) rows_.zero.resize(cells);
  ThreadPool pool;  // all cores, as the seeded weights are drawn (core/src/model/weights.cpp)
  cpu::quantize_int4_groups(weight.data(), out, in, group_size, rows_.packed.data(), rows_.scale.data(),
                            symmetric ? nullptr : rows_.zero.data(), pool);
}

Int4Linear::Int4Linear(int out, int in, int group_size, std::vector<std::uint8_t> packed, std::vector<float> scale,
                       std::vector<std::uint8_t> zero)
    : Linear(out, in), group_size_(group_size), symmetric_(zero.empty()),
      rows_{{packed.begin(), packed.end()}, {scale.begin(), scale.end()}, {zero.begin(), zero.end()}} {
  check_int4_group_size(group_size, "int4");
  const std::size_t cells = static_cast<std::size_t>(out) * ref::int4_groups(in, group_size);
  check(rows_.packed.size() == static_cast<std::size_t>(out) * ref::int4_row_bytes(in) &&
            rows_.scale.size() == cells && (rows_.zero.empty() || rows_.zero.size() == cells),
        "Int4Linear: packed codes, scales or zero points do not match [" + std::to_string(out) + ", " +
            std::to_string(in) + "] in groups of " + std::to_string(group_size));
}

void Int4Linear::set_activations(Int4Activations activations) {
  check_int4_activations(activations, group_size_, "int4");
  const bool on = activations != Int4Activations::kFp32;
  activations_ = activations;
  // The panels serve int8 / int16 activations where their kernels run, and fp32 ones on AVX2
  // without AVX-512 (gemm_int4_panels_f32; with AVX-512 the rows' register lookup does).
  const bool panels = on ? cpu::int4_panels_available(in_features(), group_size_)
                         : cpu::int4_panels_f32_available(in_features(), group_size_);
  if (panels && !holds_panels()) {
    panels_ = cpu::pack_int4_panels(rows_.packed.data(), rows_.scale.data(), symmetric_ ? nullptr : rows_.zero.data(),
                                    out_features(), in_features(), group_size_);
    rows_ = Int4Rows{};  // released: the panels hold the same bytes
  } else if (!panels && holds_panels()) {
    rows_ = rows();
    panels_ = cpu::Int4Panels{};
  }
}

Int4Rows Int4Linear::rows() const {
  if (!holds_panels()) return rows_;
  const int out = out_features(), g = groups();
  const std::size_t rb = ref::int4_row_bytes(in_features());
  Int4Rows r;
  r.packed.resize(static_cast<std::size_t>(out) * rb);
  r.scale.resize(static_cast<std::size_t>(out) * g);
  if (!symmetric_) r.zero.resize(r.scale.size());
  for (int o = 0; o < out; ++o)
    cpu::unpack_int4_panels_row(panels_, o, r.packed.data() + o * rb, r.scale.data() + static_cast<std::size_t>(o) * g,
                                symmetric_ ? nullptr : r.zero.data() + static_cast<std::size_t>(o) * g);
  return r;
}

cpu::CpuKernel Int4Linear::plan(int rows) const {
  const cpu::CpuFormat f = activations_ == Int4Activations::kInt8    ? cpu::CpuFormat::kW4A8
                           : activations_ == Int4Activations::kInt16 ? cpu::CpuFormat::kW4A16Int16
                                                                     : cpu::CpuFormat::kW4A16;
  return cpu::plan_cpu_linear(
      f, rows,
      cpu::CpuLinearShape{.out = out_features(), .in = in_features(), .group_size = group_size_, .packed = holds_panels()},
      cpu::CpuIsa::host());
}

void Int4Linear::forward(const float* x, float* y, int n, Device& device) const {
  ThreadPool& pool = cpu_pool(device, "int4 linear");
  if (activations_ == Int4Activations::kInt8) {
    thread_local std::vector<std::int8_t> xq;
    thread_local std::vector<float> xs;
    const int in = in_features();
    xq.resize(static_cast<std::size_t>(n) * in);
    xs.resize(static_cast<std::size_t>(n) * ref::act_blocks(in));
    cpu::quantize_act_rows(x, n, in, xq.data(), xs.data(), pool);
    forward_act_blocks(xq.data(), xs.data(), y, n, device);
    return;
  }
  if (plan(n) == cpu::CpuKernel::kInt4PanelsInt16) {
    const cpu::PanelActsInt16 a = cpu::quantize_panel_acts_int16(x, n, in_features());
    cpu::gemm_int4_panels_int16(a.xq, a.xs, panels_, y, n, pool);
    return;
  }
  if (plan(n) == cpu::CpuKernel::kInt4PanelsF32) {
    cpu::gemm_int4_panels_f32(x, panels_, y, n, pool);
    return;
  }
  const float* xa = x;
  if (activations_ == Int4Activations::kInt16 && in_features() % ref::kActBlock == 0) {
    // No int16 panels here (a build without AVX-512 VNNI): the same int16 blocks, as fp32 values
    // (xq * xs, exact) into the fp32 kernel, so the parameter gives its activations' numerics.
    const int in = in_features(), blocks = in / ref::kActBlock;
    const cpu::PanelActsInt16 a = cpu::quantize_panel_acts_int16(x, n, in);
    const std::int16_t* xq = a.xq;
    const float* xs = a.xs;
    thread_local std::vector<float> rounded;
    rounded.resize(static_cast<std::size_t>(n) * in);
    for (int r = 0; r < n; ++r)
      for (int b = 0; b < blocks; ++b) {
        const std::size_t at = static_cast<std::size_t>(r) * in + static_cast<std::size_t>(b) * ref::kActBlock;
        const float scale = xs[static_cast<std::size_t>(r) * blocks + b];
        for (int i = 0; i < ref::kActBlock; ++i)
          rounded[at + i] = static_cast<float>(xq[at + cpu::int16_pair_slot(i)]) * scale;
      }
    xa = rounded.data();
  }
  cpu::matmul_int4(xa, rows_.packed.data(), rows_.scale.data(), symmetric_ ? nullptr : rows_.zero.data(), y, n,
                   out_features(), in_features(), group_size_, pool);
}

void Int4Linear::forward_act_blocks(const std::int8_t* xq, const float* xs, float* y, int n, Device& device) const {
  if (!reads_act_blocks()) Linear::forward_act_blocks(xq, xs, y, n, device);  // throws
  ThreadPool& pool = cpu_pool(device, "int4 linear");
  if (holds_panels()) {
    cpu::gemm_int4_panels(xq, xs, panels_, y, n, pool);
    return;
  }
  cpu::matmul_int4_act(xq, xs, rows_.packed.data(), rows_.scale.data(), symmetric_ ? nullptr : rows_.zero.data(), y,
                       n, out_features(), in_features(), group_size_, pool);
}

void Int4Linear::dequantize_row(int row, float* out) const {
  check_linear_row(*this, row, "int4 linear");
  const std::size_t r = static_cast<std::size_t>(row), g = static_cast<std::size_t>(groups());
  if (holds_panels()) {
    std::vector<std::uint8_t> packed(ref::int4_row_bytes(in_features())), zero(g);
    std::vector<float> scale(g);
    cpu::unpack_int4_panels_row(panels_, row, packed.data(), scale.data(), zero.data());
    ref::dequantize_int4(packed.data(), scale.data(), symmetric_ ? nullptr : zero.data(), 1, in_features(),
                         group_size_, out);
    return;
  }
  const std::size_t row_bytes = ref::int4_row_bytes(in_features());
  ref::dequantize_int4(rows_.packed.data() + r * row_bytes, rows_.scale.data() + r * g,
                       symmetric_ ? nullptr : rows_.zero.data() + r * g, 1, in_features(), group_size_, out);
}

std::uint64_t Int4Linear::weight_bytes() const {
  if (holds_panels()) return cpu::int4_panels_bytes(panels_);
  return static_cast<std::uint64_t>(rows_.packed.size()) + static_cast<std::uint64_t>(rows_.scale.size()) * sizeof(float) +
         static_cast<std::uint64_t>(rows_.zero.size());
}

int Int4Linear::groups() const { return ref::int4_groups(in_features(), group_size_); }

std::vector<float> Int4Linear::dequantized() const {
  const Int4Rows r = rows();
  std::vector<float> w(static_cast<std::size_t>(out_features()) * in_features());
  ref::dequantize_int4(r.packed.data(), r.scale.data(), symmetric_ ? nullptr : r.zero.data(), out_features(),
                       in_features(), group_size_, w.data());
  return w;
}

}  // namespace inferlab
