// GPTQ on single linears: beats round-to-nearest on correlated inputs, equals an unblocked
// float64 reference of the same algorithm, and degenerates to round-to-nearest exactly when
// there is nothing to feed back (no calibration, or a diagonal Hessian).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 false positive in Eigen (bug 105593)
#pragma GCC diagnostic ignored "-Wuninitialized"  // the same at -O1 with AVX-512 (Eigen's 8x8 double transpose)
#endif
#include <gtest/gtest.h>

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <algorithm>
#include <cmath>
#include <numeric>

#include "gptq.h"
#include "inferlab/support/rng.h"
#include "kernels/ref/matmul_int4.h"

namespace inferlab {
using namespace plugins;
namespace {

struct Problem {
  int out, in, n;
  std::vector<float> w;       // [out, in]
  std::vector<float> x;       // [n, in], correlated channels of unequal scale
  std::vector<double> h;      // [in, in] XᵀX
};

Problem make_problem(int out, int in, int n, std::uint64_t seed) {
  Problem p{out, in, n, {}, {}, {}};
  Rng rng(seed);
  p.w.resize(static_cast<std::size_t>(out) * in);
  for (float& v : p.w) v = static_cast<float>(0.05 * rng.normal());
  // x = z · M with M = I + a dense mixing: neighbouring and distant channels correlate.
  std::vector<double> m(static_cast<std::size_t>(in) * in);
  for (int i = 0; i < in; ++i)
    for (int j = 0; j < in; ++j) m[static_cast<std::size_t>(i) * in + j] = (i == j) + 0.3 * rng.normal() / std::sqrt(in) * 4;
  std::vector<double> chan(static_cast<std::size_t>(in));
  for (double& c : chan) c = std::exp(rng.normal());  // channel magnitudes spread like activations
  p.x.resize(static_cast<std::size_t>(n) * in);
  std::vector<double> z(static_cast<std::size_t>(in));
  for (int t = 0; t < n; ++t) {
    for (double& v : z) v = rng.normal();
    for (int j = 0; j < in; ++j) {
      double acc = 0;
      for (int i = 0; i < in; ++i) acc += z[static_cast<std::size_t>(i)] * m[static_cast<std::size_t>(i) * in + j];
      p.x[static_cast<std::size_t>(t) * in + j] = static_cast<float>(acc * chan[static_cast<std::size_t>(j)]);
    }
  }
  p.h.assign(static_cast<std::size_t>(in) * in, 0.0);
  for (int t = 0; t < n; ++t)
    for (int i = 0; i < in; ++i)
      for (int j = 0; j < in; ++j)
        p.h[static_cast<std::size_t>(i) * in + j] += static_cast<double>(p.x[static_cast<std::size_t>(t) * in + i]) *
                                                     p.x[static_cast<std::size_t>(t) * in + j];
  return p;
}

// ‖X Wᵀ − X Ŵᵀ‖_F in double.
double output_error(const Problem& p, const std::vector<float>& wq) {
  double e = 0;
  for (int t = 0; t < p.n; ++t)
    for (int o = 0; o < p.out; ++o) {
      double d = 0;
      for (int i = 0; i < p.in; ++i)
        d += static_cast<double>(p.x[static_cast<std::size_t>(t) * p.in + i]) *
             (static_cast<double>(p.w[static_cast<std::size_t>(o) * p.in + i]) - wq[static_cast<std::size_t>(o) * p.in + i]);
      e += d * d;
    }
  return std::sqrt(e);
}

// The paper's Algorithm 1 without lazy batching, in float64, one column at a time: the
// definition the blocked plugin must reproduce.
std::vector<float> reference_gptq(const Problem& p, int gs, double damp, bool act_order) {
  const int out = p.out, in = p.in, G = ref::int4_groups(in, gs);
  std::vector<double> w(p.w.begin(), p.w.end());
  Eigen::MatrixXd h(in, in);
  for (int i = 0; i < in; ++i)
    for (int j = 0; j < in; ++j) h(i, j) = p.h[static_cast<std::size_t>(i) * in + j];
  for (int i = 0; i < in; ++i)
    if (h(i, i) == 0) {
      h(i, i) = 1;
      for (int o = 0; o < out; ++o) w[static_cast<std::size_t>(o) * in + i] = 0;
    }
  std::vector<int> perm(static_cast<std::size_t>(in));
  std::iota(perm.begin(), perm.end(), 0);
  if (act_order) std::stable_sort(perm.begin(), perm.end(), [&](int a, int b) { return h(a, a) > h(b, b); });
  std::vector<Int4Grid> grid(static_cast<std::size_t>(out) * G);
  auto fix_grid = [&](int o, int g) {
    float lo = 0, hi = 0;
    for (int i = g * gs; i < std::min(in, g * gs + gs); ++i) {
      lo = std::min(lo, static_cast<float>(w[static_cast<std::size_t>(o) * in + i]));
      hi = std::max(hi, static_cast<float>(w[static_cast<std::size_t>(o) * in + i]));
    }
    grid[static_cast<std::size_t>(o) * G + g] = int4_grid(lo, hi);
  };
  if (act_order)
    for (int o = 0; o < out; ++o)
      for (int g = 0; g < G; ++g) fix_grid(o, g);
  Eigen::MatrixXd hp(in, in);
  for (int i = 0; i < in; ++i)
    for (int j = 0; j < in; ++j) hp(i, j) = h(perm[static_cast<std::size_t>(i)], perm[static_cast<std::size_t>(j)]);
  hp.diagonal().array() += damp * hp.diagonal().mean();
  const Eigen::MatrixXd hinv = hp.llt().solve(Eigen::MatrixXd::Identity(in, in));
  const Eigen::MatrixXd u = hinv.llt().matrixU();
  std::vector<float> wq(w.size());
  for (int j = 0; j < in; ++j) {
    const int col = perm[static_cast<std::size_t>(j)];
    for (int o = 0; o < out; ++o) {
      if (!act_order && col % gs == 0) fix_grid(o, col / gs);
      const Int4Grid& q = grid[static_cast<std::size_t>(o) * G + col / gs];
      const double wv = w[static_cast<std::size_t>(o) * in + col];
      const float v = q.value(q.code(static_cast<float>(wv)));
      wq[static_cast<std::size_t>(o) * in + col] = v;
      const double err = (wv - v) / u(j, j);
      for (int k = j + 1; k < in; ++k)
        w[static_cast<std::size_t>(o) * in + perm[static_cast<std::size_t>(k)]] -= err * u(j, k);
    }
  }
  return wq;
}

TEST(Gptq, BeatsRoundToNearestAndEqualsTheFloat64Reference) {
  const Problem p = make_problem(48, 192, 512, 7);
  for (bool act_order : {false, true})
    for (int gs : {32, 64, 128}) {
      GptqOptions o;
      o.group_size = gs;
      o.act_order = act_order;
      o.block_size = 32;  // several blocks: the lazy batch updates are exercised
      const double got = output_error(p, gptq_quantize(p.w, p.out, p.in, p.h.data(), o)->dequantized());
      const double want = output_error(p, reference_gptq(p, gs, o.damp, act_order));
      const double rtn_g = output_error(p, Int4Linear(p.w, p.out, p.in, gs, false).dequantized());
      std::printf("gs %d act_order %d: rtn %.5f gptq %.5f reference %.5f\n", gs, act_order, rtn_g, got, want);
      EXPECT_NEAR(got, want, 1e-4 * want) << "gs " << gs << " act_order " << act_order;
      // Error feedback pays: well under round-to-nearest at the same group size.
      EXPECT_LT(got, 0.85 * rtn_g) << "gs " << gs << " act_order " << act_order;
    }
}

TEST(Gptq, WithoutFeedbackItIsRoundToNearest) {
  const Problem p = make_problem(16, 72, 64, 3);  // a partial last group of 8 at gs 64
  const std::vector<float> rtn = Int4Linear(p.w, p.out, p.in, 64, false).dequantized();
  GptqOptions o;
  // No calibration: the int4 round-to-nearest layer.
  GptqQuantization q(o, false);
  auto plain = q.make_linear("layers.0.wq", p.w, p.out, p.in, nullptr);
  EXPECT_EQ(dynamic_cast<const Int4Linear&>(*plain).dequantized(), rtn);
  // A diagonal Hessian: H⁻¹'s Cholesky factor is diagonal, no error reaches another column.
  std::vector<double> diag(static_cast<std::size_t>(p.in) * p.in, 0.0);
  for (int i = 0; i < p.in; ++i) diag[static_cast<std::size_t>(i) * p.in + i] = 1.0 + i;
  EXPECT_EQ(gptq_quantize(p.w, p.out, p.in, diag.data(), o)->dequantized(), rtn);
  EXPECT_TRUE(q.calibration_needs().hessian);
}

TEST(Gptq, DeadInputsQuantizeToZeroAndBytesMatchInt4) {
  Problem p = make_problem(8, 64, 32, 5);
  for (int i = 0; i < p.in; ++i) p.h[static_cast<std::size_t>(5) * p.in + i] = p.h[static_cast<std::size_t>(i) * p.in + 5] = 0;
  GptqOptions o;
  o.group_size = 32;
  auto lin = gptq_quantize(p.w, p.out, p.in, p.h.data(), o);
  const std::vector<float> wq = lin->dequantized();
  for (int r = 0; r < p.out; ++r) EXPECT_EQ(wq[static_cast<std::size_t>(r) * p.in + 5], 0.0f);
  EXPECT_EQ(lin->weight_bytes(), Int4Linear(p.w, p.out, p.in, 32, false).weight_bytes());
}

}  // namespace
}  // namespace inferlab
