// SmoothQuant W8A8 on single linears: α = 0 is plain W8A8 exactly, the smoothing transform alone
// keeps the layer's function within float rounding, and smoothing helps on outlier channels.
#include <gtest/gtest.h>

#include <cmath>
#include <thread>
#include <tuple>

#include "inferlab/device/device.h"
#include "kernels/cpu/gemm_panels_int8.h"
#include "inferlab/support/rng.h"
#include "smoothquant.h"

namespace inferlab {
using namespace plugins;
namespace {

struct Problem {
  int out, in, n;
  std::vector<float> w, x;
  LinearCalibration calib;
};

// Activations with a few outlier channels (×30), as in LLMs.
Problem make_problem(int out, int in, int n, std::uint64_t seed) {
  Problem p{out, in, n, {}, {}, {}};
  Rng rng(seed);
  p.w.resize(static_cast<std::size_t>(out) * in);
  for (float& v : p.w) v = static_cast<float>(0.05 * rng.normal());
  p.x.resize(static_cast<std::size_t>(n) * in);
  p.calib.in = in;
  p.calib.max_abs.assign(static_cast<std::size_t>(in), 0.0f);
  for (int t = 0; t < n; ++t)
    for (int j = 0; j < in; ++j) {
      const float v = static_cast<float>(rng.normal() * (j % 29 == 4 ? 30.0 : 1.0));
      p.x[static_cast<std::size_t>(t) * in + j] = v;
      p.calib.max_abs[static_cast<std::size_t>(j)] = std::max(p.calib.max_abs[static_cast<std::size_t>(j)], std::fabs(v));
    }
  p.calib.tokens = n;
  return p;
}

std::vector<float> run(const Linear& l, const Problem& p) {
  CpuDevice device(2);
  std::vector<float> y(static_cast<std::size_t>(p.n) * p.out);
  l.forward(p.x.data(), y.data(), p.n, device);
  return y;
}

double rel_error(const std::vector<float>& y, const Problem& p) {
  double num = 0, den = 0;
  for (int t = 0; t < p.n; ++t)
    for (int o = 0; o < p.out; ++o) {
      double want = 0;
      for (int j = 0; j < p.in; ++j)
        want += static_cast<double>(p.x[static_cast<std::size_t>(t) * p.in + j]) * p.w[static_cast<std::size_t>(o) * p.in + j];
      const double d = y[static_cast<std::size_t>(t) * p.out + o] - want;
      num += d * d;
      den += want * want;
    }
  return std::sqrt(num / den);
}

TEST(SmoothQuant, AlphaZeroIsPlainW8A8) {
  const Problem p = make_problem(24, 96, 9, 1);
  auto plain = SmoothQuantQuantization(0.5, true, false).make_linear("layers.0.wq", p.w, p.out, p.in, nullptr);
  auto zero = SmoothQuantQuantization(0.0, true, false).make_linear("layers.0.wq", p.w, p.out, p.in, &p.calib);
  EXPECT_EQ(run(*plain, p), run(*zero, p));
  EXPECT_LT(rel_error(run(*plain, p), p), 0.05);
}

TEST(SmoothQuant, SmoothingAloneKeepsTheFunction) {
  const Problem p = make_problem(24, 96, 9, 2);
  for (double alpha : {0.5, 0.8, 1.0}) {
    auto smooth = SmoothQuantQuantization(alpha, false, false).make_linear("layers.0.w1", p.w, p.out, p.in, &p.calib);
    EXPECT_LT(rel_error(run(*smooth, p), p), 1e-6) << alpha;
    const auto& l = dynamic_cast<const W8A8Linear&>(*smooth);
    EXPECT_NE(l.smooth()[4], 1.0f);  // an outlier channel really was rescaled
  }
}

TEST(SmoothQuant, SmoothingLowersTheErrorOnOutlierChannels) {
  const Problem p = make_problem(32, 128, 16, 3);
  const double plain = rel_error(run(*SmoothQuantQuantization(0.0, true, false).make_linear("w", p.w, p.out, p.in, &p.calib), p), p);
  const double smooth = rel_error(run(*SmoothQuantQuantization(0.5, true, false).make_linear("w", p.w, p.out, p.in, &p.calib), p), p);
  std::printf("W8A8 relative error with outlier channels: alpha 0 %.4f, alpha 0.5 %.4f\n", plain, smooth);
  EXPECT_LT(smooth, 0.8 * plain);
  auto lin = SmoothQuantQuantization(0.5, true, false).make_linear("w", p.w, p.out, p.in, &p.calib);
  EXPECT_EQ(lin->weight_bytes(), 32u * 128 + 4u * 32 + 4u * 128);
}

// The packed panels (pack_for_host, as make_linear does on the host: VNNI / AVX2 int8 panels, or
// on AVX2 builds without AVX-512 and in a multiple of 32 the int16 panels) against the plain
// int32 loop of an unpacked linear: the same bits for every token and output, and the same
// dequantised rows, at shapes off the 32-channel panels and the 4-input steps.
TEST(SmoothQuant, PackedPanelsAreBitIdenticalToThePlainLoop) {
  if (!cpu::gemm_panels_int8_available()) GTEST_SKIP() << "this build has no int8 panels (neither AVX-512 VNNI nor AVX2)";
  for (const auto& [out, in, n] : {std::tuple{37, 130, 7}, std::tuple{64, 96, 1}, std::tuple{5, 1001, 13},
                                   std::tuple{40, 576, 9}, std::tuple{33, 1536, 4}}) {
    const Problem p = make_problem(out, in, n, static_cast<std::uint64_t>(out + in));
    const std::vector<float> s = smoothing_scales(p.w, out, in, p.calib.max_abs, 0.5);
    W8A8Linear plain(p.w, out, in, s, true), packed(p.w, out, in, s, true);
    packed.pack_for_host();
    EXPECT_EQ(run(packed, p), run(plain, p)) << out << "x" << in;
    EXPECT_EQ(packed.weight_bytes(), plain.weight_bytes() + static_cast<std::uint64_t>(out) * ((in + 3) / 4 * 4 - in));
    std::vector<float> a(static_cast<std::size_t>(in)), b(a.size());
    for (int row : {0, out - 1}) {
      plain.dequantize_row(row, a.data());
      packed.dequantize_row(row, b.data());
      EXPECT_EQ(a, b) << "row " << row;
    }
  }
}

// The activation scratch is each calling thread's own (it was each linear's, shared by every
// thread that ran it): two threads running one linear at once on different batches each get
// what that batch gives alone, packed or not.
TEST(SmoothQuant, ConcurrentForwardsOfOneLinearDoNotShareScratch) {
  const Problem a = make_problem(48, 576, 9, 11), b = make_problem(48, 576, 3, 12);
  const std::vector<float> s = smoothing_scales(a.w, 48, 576, a.calib.max_abs, 0.5);
  for (const bool pack : {false, true}) {
    W8A8Linear l(a.w, 48, 576, s, true);
    if (pack) l.pack_for_host();
    const std::vector<float> want_a = run(l, a), want_b = run(l, b);
    int mine = 0, theirs = 0;
    std::thread other([&] {
      for (int i = 0; i < 200; ++i) theirs += run(l, b) != want_b;
    });
    for (int i = 0; i < 200; ++i) mine += run(l, a) != want_a;
    other.join();
    EXPECT_EQ(mine + theirs, 0) << (pack ? "packed" : "plain");
  }
}

}  // namespace
}  // namespace inferlab
