// Calibration statistics through a recording "quantization": every linear stays fp32 and, on
// each forward, folds its input rows into the statistics (see inferlab/model/calibration.h).
#include "inferlab/model/calibration.h"

// GCC 12 reports a false maybe-uninitialized inside Eigen's AVX-512 kernels (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include <Eigen/Core>
#include <algorithm>
#include <cmath>

#include "inferlab/error.h"
#include "inferlab/model/model.h"
#include "inferlab/results/quality.h"
#include "inferlab/support/rng.h"
#include "kernels/cpu/gemm_panels_f32.h"

namespace inferlab {

namespace {

struct Accumulator {
  LinearCalibration stats;
  std::vector<double> sum_abs;  // [in]
  Rng rng;
};

class RecordingLinear : public Linear {
 public:
  // The weights are packed for the fp32 panel GEMM (kernels/cpu/gemm_panels_f32.h), the kernel
  // quantization 'none' runs on the CPU, so the recorded pass computes what the float model does.
  RecordingLinear(const std::vector<float>& weight, int out, int in, std::shared_ptr<Accumulator> acc, bool owner,
                  const CalibrationNeeds& needs)
      : Linear(out, in), acc_(std::move(acc)), owner_(owner), needs_(needs) {
    check(weight.size() == static_cast<std::size_t>(out) * static_cast<std::size_t>(in),
          "calibration: weight holds " + std::to_string(weight.size()) + " values, expected out*in = " +
              std::to_string(out) + "*" + std::to_string(in));
    panels_ = cpu::pack_panels_f32(weight.data(), out, in);
  }

  void forward(const float* x, float* y, int n, Device& device) const override {
    if (owner_ && n > 0) record(x, n);
    cpu::gemm_panels_f32(x, panels_, y, n, cpu_pool(device, "calibration"));
  }
  std::uint64_t weight_bytes() const override {
    return static_cast<std::uint64_t>(out_features()) * static_cast<std::uint64_t>(in_features()) * sizeof(float);
  }
  void dequantize_row(int row, float* out) const override {
    check_linear_row(*this, row, "calibration linear");
    cpu::unpack_panel_row_f32(panels_, row, out);
  }

 private:
  // x: [n, in] host memory (calibration runs on the CPU).
  void record(const float* x, int n) const {
    LinearCalibration& s = acc_->stats;
    const int in = in_features();
    const std::size_t sin = static_cast<std::size_t>(in);
    if (needs_.hessian) {
      using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
      Eigen::Map<const RowMajor> X(x, n, in);
      Eigen::Map<Eigen::MatrixXd> H(s.hessian.data(), in, in);
      // Σ_t x_t x_tᵀ: a chunk's product in float (at most a few hundred terms), summed in double.
      Eigen::MatrixXf chunk = Eigen::MatrixXf::Zero(in, in);
      chunk.selfadjointView<Eigen::Lower>().rankUpdate(X.transpose());
      H += chunk.selfadjointView<Eigen::Lower>().toDenseMatrix().cast<double>();
    }
    if (needs_.max_abs)
      for (int t = 0; t < n; ++t)
        for (std::size_t i = 0; i < sin; ++i) {
          const float a = std::fabs(x[static_cast<std::size_t>(t) * sin + i]);
          s.max_abs[i] = std::max(s.max_abs[i], a);
          acc_->sum_abs[i] += a;
        }
    for (int t = 0; t < n && needs_.samples > 0; ++t) {  // reservoir sampling of rows
      const float* row = x + static_cast<std::size_t>(t) * sin;
      long long slot = s.sample_rows < needs_.samples ? s.sample_rows
                                                      : static_cast<long long>(acc_->rng.next_u64() %
                                                                               static_cast<std::uint64_t>(s.tokens + t + 1));
      if (s.sample_rows < needs_.samples) ++s.sample_rows;
      if (slot < needs_.samples) std::copy(row, row + sin, s.samples.begin() + slot * static_cast<long long>(in));
    }
    s.tokens += n;
  }

  cpu::PackedPanelsF32 panels_;  // [out, in]
  std::shared_ptr<Accumulator> acc_;
  bool owner_;
  CalibrationNeeds needs_;
};

// The linear whose input `name` reads, when another linear of the layer reads it first.
std::string input_owner(const std::string& name) {
  const auto dot = name.rfind('.');
  if (dot == std::string::npos) return name;
  const std::string leaf = name.substr(dot + 1), prefix = name.substr(0, dot + 1);
  if (leaf == "wk" || leaf == "wv") return prefix + "wq";
  if (leaf == "w3") return prefix + "w1";
  return name;
}

class RecordingQuantization : public Quantization {
 public:
  RecordingQuantization(const CalibrationNeeds& needs, std::uint64_t seed) : needs_(needs), seed_(seed) {}
  using Quantization::make_linear;
  std::unique_ptr<Linear> make_linear(const std::string& name, std::vector<float> weight, int out, int in) override {
    const std::string owner = input_owner(name);
    auto& acc = accumulators_[owner];
    const bool is_owner = acc == nullptr;
    if (is_owner) {
      acc = std::make_shared<Accumulator>();
      acc->stats.in = in;
      acc->rng = Rng(mix_seed(seed_, std::hash<std::string>{}(owner)));
      const std::size_t sin = static_cast<std::size_t>(in);
      if (needs_.hessian) acc->stats.hessian.assign(sin * sin, 0.0);
      if (needs_.max_abs) {
        acc->stats.max_abs.assign(sin, 0.0f);
        acc->sum_abs.assign(sin, 0.0);
      }
      if (needs_.samples > 0) acc->stats.samples.assign(static_cast<std::size_t>(needs_.samples) * sin, 0.0f);
    }
    check(acc->stats.in == in, "calibration: " + name + " and " + owner + " read inputs of different widths");
    names_[name] = owner;
    return std::make_unique<RecordingLinear>(weight, out, in, acc, is_owner, needs_);
  }

  CalibrationSet finish() {
    CalibrationSet set;
    std::map<std::string, std::shared_ptr<const LinearCalibration>> done;
    for (auto& [owner, acc] : accumulators_) {
      LinearCalibration& s = acc->stats;
      if (needs_.max_abs) {
        s.mean_abs.resize(acc->sum_abs.size());
        for (std::size_t i = 0; i < s.mean_abs.size(); ++i)
          s.mean_abs[i] = s.tokens > 0 ? static_cast<float>(acc->sum_abs[i] / static_cast<double>(s.tokens)) : 0.0f;
      }
      s.samples.resize(static_cast<std::size_t>(s.sample_rows) * static_cast<std::size_t>(s.in));
      done[owner] = std::make_shared<const LinearCalibration>(std::move(s));
    }
    for (const auto& [name, owner] : names_) set.set(name, done.at(owner));
    set.set_needs(needs_);
    return set;
  }

 private:
  CalibrationNeeds needs_;
  std::uint64_t seed_;
  std::map<std::string, std::shared_ptr<Accumulator>> accumulators_;
  std::map<std::string, std::string> names_;
};

}  // namespace

const LinearCalibration* CalibrationSet::find(const std::string& name) const {
  auto it = linears_.find(name);
  return it == linears_.end() ? nullptr : it->second.get();
}

CalibrationNeeds merge_needs(const CalibrationNeeds& a, const CalibrationNeeds& b) {
  CalibrationNeeds m;
  m.hessian = a.hessian || b.hessian;
  m.max_abs = a.max_abs || b.max_abs;
  m.samples = std::max(a.samples, b.samples);
  return m;
}

CalibrationSet collect_calibration(const ModelWeights& weights, Attention& attention, const std::vector<int>& tokens,
                                   int seq_len, const CalibrationNeeds& needs, std::uint64_t seed, int threads) {
  check(seq_len >= 2, "calibration: seq_len must be at least 2, got " + std::to_string(seq_len));
  check(tokens.size() >= 2, "calibration: needs at least 2 tokens, got " + std::to_string(tokens.size()));
  CpuDevice device(threads);
  RecordingQuantization recorder(needs, seed);
  Model model(weights, recorder, device);
  // Non-overlapping windows: every token is one row of every linear's input exactly once.
  const PerplexityResult p = evaluate_perplexity(model, attention, tokens, seq_len, seq_len);
  CalibrationSet set = recorder.finish();
  set.perplexity = p.perplexity;
  set.tokens = static_cast<long long>(tokens.size());
  return set;
}

}  // namespace inferlab
