// GPTQ as in the paper's Algorithm 1 and the reference gptq.py `fasterquant`, in double.
// GCC 12 reports a false maybe-uninitialized inside Eigen's AVX-512 kernels (GCC bug 105593).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "gptq.h"

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <algorithm>
#include <array>
#include <numeric>

#include "inferlab/error.h"
#include "kernels/ref/matmul_int4.h"

namespace inferlab::plugins {

namespace {
using MatrixRd = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
}

GptqFactor gptq_factor(const double* hessian, int in, const GptqOptions& o) {
  GptqFactor f;
  f.in = in;
  Eigen::MatrixXd H = Eigen::Map<const MatrixRd>(hessian, in, in);  // [in, in]
  // Dead inputs (never active in calibration) carry no information: quantized to 0.
  f.dead.assign(static_cast<std::size_t>(in), false);
  for (int i = 0; i < in; ++i)
    if (H(i, i) == 0) {
      H(i, i) = 1;
      f.dead[static_cast<std::size_t>(i)] = true;
    }
  // Column order: natural, or by decreasing H_ii (act_order: the most active inputs first).
  f.perm.resize(static_cast<std::size_t>(in));
  std::iota(f.perm.begin(), f.perm.end(), 0);
  if (o.act_order) std::stable_sort(f.perm.begin(), f.perm.end(), [&](int a, int b) { return H(a, a) > H(b, b); });
  Eigen::MatrixXd Hp(in, in);
  for (int j = 0; j < in; ++j)
    for (int i = 0; i < in; ++i) Hp(i, j) = H(f.perm[static_cast<std::size_t>(i)], f.perm[static_cast<std::size_t>(j)]);
  // Dampening λ = damp · mean(diag H); U = upper Cholesky factor of H⁻¹ (H⁻¹ = UᵀU). Without
  // forming H⁻¹: with J the reversal permutation and J H J = L Lᵀ (Cholesky), H = Ũ Ũᵀ for the
  // upper triangular Ũ = J L J, so H⁻¹ = Ũ⁻ᵀ Ũ⁻¹ and U = Ũ⁻¹ = J L⁻¹ J.
  Hp.diagonal().array() += o.damp * Hp.diagonal().mean();
  const Eigen::MatrixXd R = Hp.reverse();  // J H J
  Eigen::LLT<Eigen::MatrixXd> llt(R);
  check(llt.info() == Eigen::Success, "quantization 'gptq': the dampened Hessian is not positive definite; raise damp");
  Eigen::MatrixXd Linv = Eigen::MatrixXd::Identity(in, in);
  llt.matrixL().solveInPlace(Linv);  // L⁻¹, lower triangular
  f.u.resize(static_cast<std::size_t>(in) * in);
  Eigen::Map<MatrixRd>(f.u.data(), in, in) = Linv.reverse().triangularView<Eigen::Upper>();
  return f;
}

std::unique_ptr<Int4Linear> gptq_quantize(const std::vector<float>& weight, int out, int in, const double* hessian,
                                          const GptqOptions& o) {
  return gptq_quantize(weight, out, gptq_factor(hessian, in, o), o);
}

std::unique_ptr<Int4Linear> gptq_quantize(const std::vector<float>& weight, int out, const GptqFactor& f,
                                          const GptqOptions& o) {
  const int in = f.in;
  check_int4_group_size(o.group_size, "gptq");
  check(weight.size() == static_cast<std::size_t>(out) * in, "quantization 'gptq': weight is not [out, in]");
  const int gs = o.group_size, G = ref::int4_groups(in, gs);
  const int B = std::max(1, (o.block_size + gs - 1) / gs) * gs;  // whole groups per block
  MatrixRd W = Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>(
                   weight.data(), out, in).cast<double>();  // [out, in]
  for (int i = 0; i < in; ++i)
    if (f.dead[static_cast<std::size_t>(i)]) W.col(i).setZero();
  const std::vector<int>& perm = f.perm;
  const Eigen::Map<const MatrixRd> U(f.u.data(), in, in);
  // Grids per (row, group). With act_order they are fixed up front from the original weights.
  std::vector<Int4Grid> grid(static_cast<std::size_t>(out) * G);
  auto set_grids = [&](const MatrixRd& w, int g, int col0, const std::vector<int>* cols) {
    const int k1 = std::min(in, g * gs + gs) - g * gs;
    for (int r = 0; r < out; ++r) {
      float lo = 0, hi = 0;
      for (int k = 0; k < k1; ++k) {
        const float v = static_cast<float>(cols ? w(r, (*cols)[static_cast<std::size_t>(k)]) : w(r, col0 + k));
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
      grid[static_cast<std::size_t>(r) * G + g] = int4_grid(lo, hi);
    }
  };
  if (o.act_order)
    for (int g = 0; g < G; ++g) {
      std::vector<int> cols;
      for (int i = g * gs; i < std::min(in, g * gs + gs); ++i) cols.push_back(i);
      set_grids(W, g, 0, &cols);
    }
  MatrixRd Wp(out, in);
  for (int j = 0; j < in; ++j) Wp.col(j) = W.col(perm[static_cast<std::size_t>(j)]);

  std::vector<std::uint8_t> code(static_cast<std::size_t>(out) * in);  // [out, in], natural order
  for (int i1 = 0; i1 < in; i1 += B) {
    const int count = std::min(B, in - i1);
    MatrixRd W1 = Wp.middleCols(i1, count);  // [out, count], updated within the block
    MatrixRd Err1(out, count);
    for (int i = 0; i < count; ++i) {
      const int col = perm[static_cast<std::size_t>(i1 + i)], g = col / gs;
      if (!o.act_order && col % gs == 0) set_grids(W1, g, i, nullptr);  // group lies in this block
      const double d = U(i1 + i, i1 + i);
      for (int r = 0; r < out; ++r) {
        const Int4Grid& q = grid[static_cast<std::size_t>(r) * G + g];
        const int u = q.code(static_cast<float>(W1(r, i)));
        code[static_cast<std::size_t>(r) * in + col] = static_cast<std::uint8_t>(u);
        Err1(r, i) = (W1(r, i) - static_cast<double>(q.value(u))) / d;  // (w - q) / [H⁻¹]_jj^½
      }
      // Error feedback to the rest of the block: W_{:, j+1:} -= e · U_{j, j+1:}
      if (i + 1 < count)
        W1.rightCols(count - i - 1).noalias() -= Err1.col(i) * U.block(i1 + i, i1 + i + 1, 1, count - i - 1);
    }
    // Lazy batch update of the columns after the block.
    if (i1 + count < in)
      Wp.rightCols(in - i1 - count).noalias() -= Err1 * U.block(i1, i1 + count, count, in - i1 - count);
  }

  std::vector<std::uint8_t> packed(static_cast<std::size_t>(out) * ref::int4_row_bytes(in), 0);
  std::vector<float> scale(static_cast<std::size_t>(out) * G);
  std::vector<std::uint8_t> zero(scale.size());
  for (int r = 0; r < out; ++r) {
    std::uint8_t* row = packed.data() + static_cast<std::size_t>(r) * ref::int4_row_bytes(in);
    for (int i = 0; i < in; ++i)
      row[i / 2] = static_cast<std::uint8_t>(row[i / 2] | (code[static_cast<std::size_t>(r) * in + i] << ((i & 1) * 4)));
    for (int g = 0; g < G; ++g) {
      scale[static_cast<std::size_t>(r) * G + g] = grid[static_cast<std::size_t>(r) * G + g].scale;
      zero[static_cast<std::size_t>(r) * G + g] = static_cast<std::uint8_t>(grid[static_cast<std::size_t>(r) * G + g].zero);
    }
  }
  return std::make_unique<Int4Linear>(out, in, gs, std::move(packed), std::move(scale), std::move(zero));
}

GptqQuantization::GptqQuantization(const GptqOptions& options, bool skip_classifier)
    : CalibratedInt4Quantization(options.group_size, options.activations, skip_classifier, "gptq"),
      options_(options) {
  check(options.damp > 0, "quantization 'gptq': damp must be > 0");
}

std::unique_ptr<Linear> GptqQuantization::make_calibrated(const std::string& name, const std::vector<float>& weight,
                                                          int out, int in, const LinearCalibration& calib) {
  check(calib.in == in && calib.hessian.size() == static_cast<std::size_t>(in) * in,
        "quantization 'gptq': the Hessian of " + name + " is not [in, in]");
  // Linears reading the same input share the record (and so H): factor it once. The record
  // outlives the model build; tokens and H's corners guard against an address reused later.
  const LinearCalibration* record = &calib;
  const std::array<double, 3> key = {static_cast<double>(calib.tokens), calib.hessian.front(), calib.hessian.back()};
  auto it = std::find_if(factors_.begin(), factors_.end(), [&](const CachedFactor& c) {
    return c.calib == record && c.key == key;
  });
  if (it == factors_.end()) {
    if (factors_.size() >= 4) factors_.erase(factors_.begin());  // a layer has at most 4 inputs
    factors_.push_back({record, key, gptq_factor(calib.hessian.data(), in, options_)});
    it = factors_.end() - 1;
  }
  auto linear = gptq_quantize(weight, out, it->factor, options_);
  linear->set_activations(options_.activations);
  return place(std::move(linear));
}

CalibrationNeeds GptqQuantization::calibration_needs() const {
  CalibrationNeeds n;
  n.hessian = true;
  return n;
}

}  // namespace inferlab::plugins
