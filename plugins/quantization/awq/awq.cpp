// AWQ's auto_scale search (per linear rather than per block of linears sharing an input).
// GCC 12 reports a false maybe-uninitialized inside Eigen's AVX-512 kernels (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "awq.h"

#include <Eigen/Core>
#include <algorithm>
#include <cmath>

#include "inferlab/device/device.h"
#include "inferlab/error.h"

namespace inferlab::plugins {

namespace {
using MatrixRf = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
}

AwqLinear::AwqLinear(std::unique_ptr<Int4Linear> q, std::vector<float> inv_scale, double alpha)
    : Linear(q->out_features(), q->in_features()), q_(std::move(q)), inv_scale_(std::move(inv_scale)), alpha_(alpha) {
  check(inv_scale_.size() == static_cast<std::size_t>(in_features()), "AwqLinear: one scale per input channel");
}

void AwqLinear::forward(const float* x, float* y, int n, Device& device) const {
  // The calling thread's scratch, shared by every AWQ linear: a buffer per linear (as before,
  // 2026-12-06) kept n x in floats for each of SmolLM2's 210 linears (~150 MB at a 256-token
  // prefill) and paid their page faults in the first prefill: its linears took 174 ms against
  // RTN's 92 at the same group size.
  thread_local std::vector<float> scaled_buffer;
  const std::size_t in = static_cast<std::size_t>(in_features());
  scaled_buffer.resize(static_cast<std::size_t>(n) * in);
  float* const scaled = scaled_buffer.data();  // the workers reach the caller's buffer through it
  const float* const inv = inv_scale_.data();
  // Rows split over the device's threads (a 256-token prefill's scaling on one thread cost its
  // linears ~14 % over RTN's).
  cpu_pool(device, "awq linear")
      .parallel_for(
          static_cast<std::size_t>(n),
          [&](std::size_t t0, std::size_t t1) {
            for (std::size_t t = t0; t < t1; ++t)
              for (std::size_t i = 0; i < in; ++i) scaled[t * in + i] = x[t * in + i] * inv[i];
          },
          std::max<std::size_t>(1, (std::size_t{1} << 14) / std::max<std::size_t>(in, 1)));
  q_->forward(scaled, y, n, device);
}

std::uint64_t AwqLinear::weight_bytes() const { return q_->weight_bytes() + inv_scale_.size() * sizeof(float); }

void AwqLinear::dequantize_row(int row, float* out) const {
  q_->dequantize_row(row, out);
  for (std::size_t k = 0; k < inv_scale_.size(); ++k) out[k] *= inv_scale_[k];
}

std::vector<float> AwqLinear::dequantized() const {
  std::vector<float> w = q_->dequantized();
  const std::size_t in = inv_scale_.size();
  for (std::size_t k = 0; k < w.size(); ++k) w[k] *= inv_scale_[k % in];
  return w;
}

std::unique_ptr<AwqLinear> awq_quantize(const std::vector<float>& weight, int out, int in,
                                        const std::vector<float>& mean_abs, const std::vector<float>& x, int rows,
                                        const AwqOptions& o, AwqSearch* search) {
  check(mean_abs.size() == static_cast<std::size_t>(in) && x.size() == static_cast<std::size_t>(rows) * in,
        "quantization 'awq': calibration statistics do not match the layer's " + std::to_string(in) + " inputs");
  const Eigen::Map<const MatrixRf> W(weight.data(), out, in);  // [out, in]
  const Eigen::Map<const MatrixRf> X(x.data(), rows, in);      // [rows, in]
  std::vector<float> best_inv, best_ws, wq(weight.size());
  AwqSearch s;
  s.error = INFINITY;
  std::vector<float> ws(weight.size()), sc(static_cast<std::size_t>(in)), inv(static_cast<std::size_t>(in));
  for (int k = 0; k <= o.grid; ++k) {
    const double alpha = static_cast<double>(k) / o.grid;
    // s = mean|x|^α, normalised so that max(s)·min(s) = 1 (the reference auto_scale's choice).
    double lo = INFINITY, hi = 0;
    for (int i = 0; i < in; ++i) {
      const double v = std::pow(std::max(static_cast<double>(mean_abs[static_cast<std::size_t>(i)]), 1e-4), alpha);
      sc[static_cast<std::size_t>(i)] = static_cast<float>(v);
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    const double norm = std::sqrt(lo * hi);
    for (int i = 0; i < in; ++i) {
      sc[static_cast<std::size_t>(i)] = static_cast<float>(sc[static_cast<std::size_t>(i)] / norm);
      inv[static_cast<std::size_t>(i)] = 1.0f / sc[static_cast<std::size_t>(i)];
    }
    // Ŵ = Q(W diag(s)) diag(s)⁻¹ with the round-to-nearest grids of the int4 format (the layer is
    // only built for the winning α).
    for (int r = 0; r < out; ++r)
      for (int g0 = 0; g0 < in; g0 += o.group_size) {
        const int g1 = std::min(in, g0 + o.group_size);
        float glo = 0, ghi = 0;
        for (int i = g0; i < g1; ++i) {
          const std::size_t j = static_cast<std::size_t>(r) * in + i;
          ws[j] = weight[j] * sc[static_cast<std::size_t>(i)];
          glo = std::min(glo, ws[j]);
          ghi = std::max(ghi, ws[j]);
        }
        // The grid of the int4 format; rounding by nearbyint on w·(1/scale) (vectorisable; it can
        // differ from the layer's round-half-away on exact ties, which only the search sees).
        const Int4Grid grid = int4_grid(glo, ghi);
        const float rs = grid.scale > 0 ? 1.0f / grid.scale : 0.0f, z = static_cast<float>(grid.zero);
        for (int i = g0; i < g1; ++i) {
          const std::size_t j = static_cast<std::size_t>(r) * in + i;
          const float u = std::clamp(std::nearbyint(ws[j] * rs) + z, 0.0f, 15.0f);
          wq[j] = grid.scale * (u - z) * inv[static_cast<std::size_t>(i)];
        }
      }
    const Eigen::Map<const MatrixRf> Wq(wq.data(), out, in);
    const MatrixRf D = W - Wq;                       // [out, in]
    const double err = (X * D.transpose()).squaredNorm();  // ‖X (W − Ŵ)ᵀ‖²
    if (k == 0) s.rtn_error = err;
    if (err < s.error) {
      s.error = err;
      s.alpha = alpha;
      best_ws = ws;
      best_inv = inv;
    }
  }
  if (search) *search = s;
  auto best = std::make_unique<Int4Linear>(best_ws, out, in, o.group_size, false);  // Q(W diag(s))
  best->set_activations(o.activations);
  return std::make_unique<AwqLinear>(std::move(best), std::move(best_inv), s.alpha);
}

AwqQuantization::AwqQuantization(const AwqOptions& options, bool skip_classifier)
    : CalibratedInt4Quantization(options.group_size, options.activations, skip_classifier, "awq"),
      options_(options) {
  check(options.grid >= 1 && options.samples >= 1, "quantization 'awq': grid and samples must be >= 1");
}

bool AwqQuantization::calibrated(const LinearCalibration& calib) const {
  return !calib.mean_abs.empty() && calib.sample_rows != 0;
}

std::unique_ptr<Linear> AwqQuantization::make_calibrated(const std::string& /*name*/, const std::vector<float>& weight,
                                                         int out, int in, const LinearCalibration& calib) {
  return place(awq_quantize(weight, out, in, calib.mean_abs, calib.samples, calib.sample_rows, options_));
}

CalibrationNeeds AwqQuantization::calibration_needs() const {
  CalibrationNeeds n;
  n.max_abs = true;
  n.samples = options_.samples;
  return n;
}

}  // namespace inferlab::plugins
