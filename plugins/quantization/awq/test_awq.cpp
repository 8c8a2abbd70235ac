// AWQ on single linears: on inputs with outlier channels the searched scales beat
// round-to-nearest; α = 0 is round-to-nearest exactly; the layer computes what it reports.
#include <gtest/gtest.h>

#include <cmath>

#include "awq.h"
#include "inferlab/device/device.h"
#include "inferlab/support/rng.h"

namespace inferlab {
using namespace plugins;
namespace {

struct Problem {
  int out, in, rows;
  std::vector<float> w, x, mean_abs;  // [out, in], [rows, in], [in]
};

// Inputs whose channels differ in magnitude by ~100x (a few salient channels, as in LLMs).
Problem make_problem(int out, int in, int rows, std::uint64_t seed) {
  Problem p{out, in, rows, {}, {}, {}};
  Rng rng(seed);
  p.w.resize(static_cast<std::size_t>(out) * in);
  for (float& v : p.w) v = static_cast<float>(0.05 * rng.normal());
  std::vector<double> mag(static_cast<std::size_t>(in));
  for (int i = 0; i < in; ++i) mag[static_cast<std::size_t>(i)] = i % 17 == 3 ? 20.0 : std::exp(0.5 * rng.normal());
  p.x.resize(static_cast<std::size_t>(rows) * in);
  p.mean_abs.assign(static_cast<std::size_t>(in), 0.0f);
  for (int t = 0; t < rows; ++t)
    for (int i = 0; i < in; ++i) {
      const float v = static_cast<float>(mag[static_cast<std::size_t>(i)] * rng.normal());
      p.x[static_cast<std::size_t>(t) * in + i] = v;
      p.mean_abs[static_cast<std::size_t>(i)] += std::fabs(v) / static_cast<float>(rows);
    }
  return p;
}

TEST(Awq, SearchedScalesBeatRoundToNearestOnSalientChannels) {
  const Problem p = make_problem(40, 136, 96, 11);
  for (int gs : {32, 64}) {
    AwqOptions o;
    o.group_size = gs;
    AwqSearch s;
    auto lin = awq_quantize(p.w, p.out, p.in, p.mean_abs, p.x, p.rows, o, &s);
    std::printf("gs %d: alpha %.2f error %.4f rtn %.4f\n", gs, s.alpha, s.error, s.rtn_error);
    EXPECT_GT(s.alpha, 0.0);
    EXPECT_LT(s.error, 0.8 * s.rtn_error);  // would fail with the scale search disabled
    // The error reported is the layer's: recompute ‖X (W − Ŵ)ᵀ‖² from its effective weights.
    const std::vector<float> wq = lin->dequantized();
    double err = 0;
    for (int t = 0; t < p.rows; ++t)
      for (int o2 = 0; o2 < p.out; ++o2) {
        double d = 0;
        for (int i = 0; i < p.in; ++i)
          d += static_cast<double>(p.x[static_cast<std::size_t>(t) * p.in + i]) *
               (p.w[static_cast<std::size_t>(o2) * p.in + i] - wq[static_cast<std::size_t>(o2) * p.in + i]);
        err += d * d;
      }
    EXPECT_NEAR(err, s.error, 1e-3 * s.error);
    // forward() computes x · Ŵᵀ.
    CpuDevice device(2);
    std::vector<float> y(static_cast<std::size_t>(p.rows) * p.out);
    lin->forward(p.x.data(), y.data(), p.rows, device);
    for (int t = 0; t < p.rows; t += 7)
      for (int o2 = 0; o2 < p.out; ++o2) {
        double want = 0, mag = 0;
        for (int i = 0; i < p.in; ++i) {
          want += static_cast<double>(p.x[static_cast<std::size_t>(t) * p.in + i]) * wq[static_cast<std::size_t>(o2) * p.in + i];
          mag += std::fabs(p.x[static_cast<std::size_t>(t) * p.in + i] * wq[static_cast<std::size_t>(o2) * p.in + i]);
        }
        EXPECT_NEAR(y[static_cast<std::size_t>(t) * p.out + o2], want, 1e-5 * mag + 1e-6);
      }
  }
}

TEST(Awq, AlphaZeroIsRoundToNearestAndNoCalibrationFallsBackToIt) {
  const Problem p = make_problem(8, 64, 16, 2);
  AwqOptions o;
  o.grid = 1;  // α ∈ {0, 1}
  std::vector<float> flat(static_cast<std::size_t>(p.in), 1.0f);  // all channels alike: s = 1
  auto lin = awq_quantize(p.w, p.out, p.in, flat, p.x, p.rows, o);
  EXPECT_EQ(lin->dequantized(), Int4Linear(p.w, p.out, p.in, 64, false).dequantized());
  AwqQuantization q(o, false);
  auto plain = q.make_linear("layers.0.w1", p.w, p.out, p.in, nullptr);
  EXPECT_EQ(dynamic_cast<const Int4Linear&>(*plain).dequantized(), Int4Linear(p.w, p.out, p.in, 64, false).dequantized());
  EXPECT_TRUE(q.calibration_needs().max_abs);
  EXPECT_EQ(q.calibration_needs().samples, 64);
}

}  // namespace
}  // namespace inferlab
