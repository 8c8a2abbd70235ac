#include "smoothquant.h"

#include <algorithm>
#include <cmath>

#include "inferlab/error.h"
#include "kernels/cpu/gemm_panels_int8.h"
#include "kernels/cpu/matmul_int8_act.h"
#include "plugins/common/quantization/float_linear.h"

namespace inferlab::plugins {

std::vector<float> smoothing_scales(const std::vector<float>& weight, int out, int in,
                                    const std::vector<float>& act_max_abs, double alpha) {
  check(act_max_abs.size() == static_cast<std::size_t>(in), "quantization 'smoothquant': max|x| is not [in]");
  std::vector<float> wmax(static_cast<std::size_t>(in), 0.0f);
  for (int o = 0; o < out; ++o)
    for (int j = 0; j < in; ++j)
      wmax[static_cast<std::size_t>(j)] =
          std::max(wmax[static_cast<std::size_t>(j)], std::fabs(weight[static_cast<std::size_t>(o) * in + j]));
  std::vector<float> s(static_cast<std::size_t>(in), 1.0f);
  for (int j = 0; j < in; ++j) {
    const double a = act_max_abs[static_cast<std::size_t>(j)], w = wmax[static_cast<std::size_t>(j)];
    if (a > 0 && w > 0 && alpha != 0) s[static_cast<std::size_t>(j)] = static_cast<float>(std::pow(a / w, alpha));
  }
  return s;
}

W8A8Linear::W8A8Linear(const std::vector<float>& weight, int out, int in, std::vector<float> smooth, bool quantize)
    : Linear(out, in), quantize_(quantize), inv_smooth_(static_cast<std::size_t>(in)) {
  check(out > 0 && in > 0 && weight.size() == static_cast<std::size_t>(out) * in && smooth.size() == static_cast<std::size_t>(in),
        "quantization 'smoothquant': weight is not [out, in] or smoothing not [in]");
  for (int j = 0; j < in; ++j) inv_smooth_[static_cast<std::size_t>(j)] = 1.0f / smooth[static_cast<std::size_t>(j)];
  // No smoothing (α = 0 or no calibration): nothing to store or apply.
  if (std::all_of(smooth.begin(), smooth.end(), [](float v) { return v == 1.0f; })) inv_smooth_.clear();
  std::vector<float> ws(weight.size());  // W diag(s)
  for (std::size_t k = 0; k < ws.size(); ++k) ws[k] = weight[k] * smooth[k % static_cast<std::size_t>(in)];
  if (!quantize_) {
    w_smoothed_ = std::move(ws);
    return;
  }
  q_.resize(ws.size());
  w_scale_.resize(static_cast<std::size_t>(out));
  for (int o = 0; o < out; ++o) {  // symmetric per output channel: scale = max|w| / 127
    const float* row = ws.data() + static_cast<std::size_t>(o) * in;
    float amax = 0.0f;
    for (int j = 0; j < in; ++j) amax = std::max(amax, std::fabs(row[j]));
    const float sc = amax / 127.0f, inv = sc > 0 ? 1.0f / sc : 0.0f;
    w_scale_[static_cast<std::size_t>(o)] = sc;
    for (int j = 0; j < in; ++j)
      q_[static_cast<std::size_t>(o) * in + j] = static_cast<std::int8_t>(std::clamp(std::lround(row[j] * inv), -127L, 127L));
  }
}

void W8A8Linear::forward(const float* x, float* y, int n, Device& device) const {
  ThreadPool& pool = cpu_pool(device, "quantization 'smoothquant'");
  const std::size_t in = static_cast<std::size_t>(in_features()), out = static_cast<std::size_t>(out_features());
  // The calling thread's scratch, shared by every linear (as the int8 / int4 plugins' activation
  // blocks). Per linear, as they were, each of a model's ~200 linears held its own [rows, in]
  // buffers: hundreds of MB for a 256-row prefill, and their first touch in the first step put
  // 0.17 s of page clearing into SmolLM2's first TTFT (0.56 s of linears against 0.39 in the
  // next prefill; Zen 3, 2026-12-07).
  thread_local std::vector<float> xs;            // [n, in]: x ⊙ s⁻¹
  thread_local std::vector<std::int8_t> xq;      // [n, in]: int8 activations
  thread_local std::vector<float> x_scale;       // [n]
  thread_local std::vector<std::int16_t> xq16;   // [n, in]: xq widened into the int16 panels' pair order
  const float* xsm = x;  // x ⊙ s⁻¹ (x itself without smoothing)
  if (!inv_smooth_.empty()) {
    xs.resize(static_cast<std::size_t>(n) * in);
    for (std::size_t t = 0; t < static_cast<std::size_t>(n); ++t)
      for (std::size_t j = 0; j < in; ++j) xs[t * in + j] = x[t * in + j] * inv_smooth_[j];
    xsm = xs.data();
  }
  if (!quantize_) {
    if (!f32_.data.empty()) cpu::gemm_panels_f32(xsm, f32_, y, n, pool);
    else cpu::gemm_panels_f32(xsm, cpu::pack_panels_f32(w_smoothed_.data(), out_features(), in_features()), y, n, pool);
    return;
  }
  // Dynamic per-token activation scale: max|x_t| / 127 (one block of `in` values per row).
  xq.resize(static_cast<std::size_t>(n) * in);
  x_scale.resize(static_cast<std::size_t>(n));
  cpu::quantize_act_rows(xsm, n, in_features(), xq.data(), x_scale.data(), pool, in_features());
  if (!panels_.data.empty()) {  // the VNNI panels: one int32 sum per (token, output), bit-identical to the loop below
    cpu::gemm_panels_int8_per_token(xq.data(), x_scale.data(), panels_, y, n, pool);
    return;
  }
  if (!i16_.codes.empty()) {  // AVX2: the int16 panels, the codes widened; the same bits
    xq16.resize(xq.size());
    cpu::widen_act_blocks_int16(xq.data(), n, in_features(), xq16.data());
    cpu::gemm_w8_int16_per_token(xq16.data(), x_scale.data(), i16_, y, n, pool);
    return;
  }
  // int8 × int8 → int32 per (token, output), threads over output channels (the scratch by pointer:
  // a worker's own thread_local buffers are not these).
  const std::int8_t* xqp = xq.data();
  const float* xsc = x_scale.data();
  pool.parallel_for(out, [&](std::size_t o0, std::size_t o1) {
    for (std::size_t o = o0; o < o1; ++o) {
      const std::int8_t* w = q_.data() + o * in;
      for (std::size_t t = 0; t < static_cast<std::size_t>(n); ++t) {
        const std::int8_t* a = xqp + t * in;
        std::int32_t acc = 0;
#pragma omp simd reduction(+ : acc)
        for (std::size_t j = 0; j < in; ++j) acc += static_cast<std::int32_t>(a[j]) * static_cast<std::int32_t>(w[j]);
        y[t * out + o] = static_cast<float>(acc) * xsc[t] * w_scale_[o];
      }
    }
  }, /*grain=*/16);
}

cpu::CpuKernel W8A8Linear::plan(int rows) const {
  if (!quantize_) return cpu::CpuKernel::kPanelsF32;
  return cpu::plan_cpu_linear(
      cpu::CpuFormat::kW8A8PerToken, rows,
      cpu::CpuLinearShape{.out = out_features(), .in = in_features(), .packed = !panels_.data.empty() || !i16_.codes.empty()},
      cpu::CpuIsa::host());
}

void W8A8Linear::pack_for_host() {
  if (!quantize_) {  // the fp32 W diag(s) in panels: the row-major copy is released
    if (f32_.data.empty()) f32_ = cpu::pack_panels_f32(w_smoothed_.data(), out_features(), in_features());
    std::vector<float>().swap(w_smoothed_);
    return;
  }
  if (!cpu::gemm_panels_int8_available() || !panels_.data.empty() || !i16_.codes.empty()) return;
  const cpu::CpuLinearShape shape{.out = out_features(), .in = in_features()};
  if (cpu::plan_cpu_linear(cpu::CpuFormat::kW8A8PerToken, 1, shape, cpu::CpuIsa::host()) == cpu::CpuKernel::kPanelsW8Int16)
    i16_ = cpu::pack_w8_int16(q_.data(), w_scale_.data(), out_features(), in_features());
  else
    panels_ = cpu::pack_panels_int8(q_.data(), w_scale_.data(), out_features(), in_features());
  std::vector<std::int8_t>().swap(q_);  // the panels hold the codes now
}

void W8A8Linear::dequantize_row(int row, float* out) const {
  check_linear_row(*this, row, "quantization 'smoothquant'");
  const std::size_t in = static_cast<std::size_t>(in_features()), at = static_cast<std::size_t>(row) * in;
  if (!f32_.data.empty()) {
    cpu::unpack_panel_row_f32(f32_, row, out);
    for (std::size_t j = 0; j < in && !inv_smooth_.empty(); ++j) out[j] *= inv_smooth_[j];
    return;
  }
  if (!panels_.data.empty() || !i16_.codes.empty()) {  // scale[row] * codes
    if (!panels_.data.empty()) cpu::unpack_panel_row_int8(panels_, row, out);
    else cpu::unpack_w8_int16_row(i16_, row, out);
    for (std::size_t j = 0; j < in && !inv_smooth_.empty(); ++j) out[j] *= inv_smooth_[j];
    return;
  }
  for (std::size_t j = 0; j < in; ++j) {
    const float w = quantize_ ? w_scale_[static_cast<std::size_t>(row)] * static_cast<float>(q_[at + j]) : w_smoothed_[at + j];
    out[j] = inv_smooth_.empty() ? w : w * inv_smooth_[j];
  }
}

std::uint64_t W8A8Linear::weight_bytes() const {
  const std::uint64_t smooth = inv_smooth_.size() * sizeof(float);
  if (!quantize_) return static_cast<std::uint64_t>(out_features()) * static_cast<std::uint64_t>(in_features()) * sizeof(float) + smooth;
  if (!panels_.data.empty()) return cpu::packed_bytes(panels_) + smooth;
  if (!i16_.codes.empty()) return cpu::w8_int16_bytes(i16_) + smooth;
  return q_.size() + w_scale_.size() * sizeof(float) + smooth;
}

SmoothQuantQuantization::SmoothQuantQuantization(double alpha, bool quantize, bool skip_classifier)
    : alpha_(alpha), quantize_(quantize), skip_classifier_(skip_classifier) {
  check(alpha >= 0 && alpha <= 1, "quantization 'smoothquant': alpha must be in [0, 1]");
}

std::unique_ptr<Linear> SmoothQuantQuantization::make_linear(const std::string& name, std::vector<float> weight, int out,
                                                             int in) {
  return make_linear(name, std::move(weight), out, in, nullptr);
}

std::unique_ptr<Linear> SmoothQuantQuantization::make_linear(const std::string& name, std::vector<float> weight, int out,
                                                             int in, const LinearCalibration* calib) {
  if (skip_classifier_ && name == "classifier") return place_float(std::move(weight), out, in);
  std::vector<float> s = calib && !calib->max_abs.empty() ? smoothing_scales(weight, out, in, calib->max_abs, alpha_)
                                                          : std::vector<float>(static_cast<std::size_t>(in), 1.0f);
  return place(std::make_unique<W8A8Linear>(weight, out, in, std::move(s), quantize_));
}

std::unique_ptr<Linear> SmoothQuantQuantization::place(std::unique_ptr<W8A8Linear> linear) {
  linear->pack_for_host();
  return linear;
}

CalibrationNeeds SmoothQuantQuantization::calibration_needs() const {
  CalibrationNeeds n;
  n.max_abs = true;
  return n;
}

std::unique_ptr<Linear> SmoothQuantQuantization::place_float(std::vector<float> weight, int out, int in) {
  return std::make_unique<FloatLinear>(std::move(weight), out, in);
}

}  // namespace inferlab::plugins
