#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "inferlab/error.h"
#include "inferlab/support/rng.h"
#include "int8.h"
#include "kernels/cpu/amx.h"
#include "kernels/cpu/gemm_int4_panels.h"
#include "kernels/cpu/gemm_panels_int8.h"
#include "kernels/cpu/linear_plan.h"
#include "kernels/ref/matmul_int8.h"
#include "kernels/ref/ops.h"
#include "linear_group_checks.h"

namespace inferlab {
using namespace plugins;
namespace {

std::vector<float> gaussian(std::size_t count, std::uint64_t seed, double sigma) {
  Rng rng(seed);
  std::vector<float> v(count);
  for (float& f : v) f = static_cast<float>(sigma * rng.normal());
  return v;
}

// Decode reads every code once per token: on 4 KiB pages the row stream ran at ~0.7 of the
// huge-page read probe (docs/kernels.md), so codes of 2 MiB and more sit on 2 MiB pages
// (inferlab/huge_pages.h: 2 MiB-aligned mappings).
TEST(Int8Quantization, LargeWeightsSitOnHugePages) {
  const int out = 1024, in = 2048;  // 2 MiB of codes
  const Int8Linear linear(gaussian(static_cast<std::size_t>(out) * in, 3, 0.05), out, in);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(linear.q().data()) % kHugePageBytes, 0u);
}

// For output o: y_int8 - y_fp32 = sum_i x_i (scale_o q_oi - w_oi), and rounding to the
// nearest step gives |scale_o q_oi - w_oi| <= scale_o / 2 (no clamping happens: |w_oi| <=
// max|w_o| = 127 scale_o). Hence |y_int8 - y_fp32| <= scale_o / 2 * sum_i |x_i|.
TEST(Int8Quantization, ErrorWithinPerChannelBound) {
  CpuDevice device(2);
  const int n = 6, out = 45, in = 131;
  std::vector<float> x = gaussian(n * in, 1, 1.0);
  std::vector<float> w = gaussian(out * in, 2, 0.05);
  for (int i = 0; i < in; ++i) w[7 * in + i] *= 20.0f;  // channels of very different ranges
  std::vector<float> y_fp32(n * out), y_int8(n * out, std::nanf(""));
  ref::matmul(x.data(), w.data(), y_fp32.data(), n, out, in);

  Int8Quantization quant;
  auto linear = quant.make_linear("layers.0.w1", w, out, in);
  linear->forward(x.data(), y_int8.data(), n, device);
  const auto& scale = dynamic_cast<const Int8Linear&>(*linear).scale();
  for (int r = 0; r < n; ++r) {
    double sum_abs_x = 0, mag = 0;
    for (int i = 0; i < in; ++i) sum_abs_x += std::fabs(x[r * in + i]);
    for (int o = 0; o < out; ++o) {
      mag = 0;
      for (int i = 0; i < in; ++i) mag += std::fabs(x[r * in + i] * w[o * in + i]);
      double bound = scale[o] / 2 * sum_abs_x;
      double err = std::fabs(y_int8[r * out + o] - y_fp32[r * out + o]);
      // Slack for fp32 accumulation in the kernel, far below the quantization bound.
      EXPECT_LE(err, bound + 1e-5 * mag) << "r=" << r << " o=" << o;
    }
  }
}

TEST(Int8Quantization, RelativeErrorUnderOnePercentOnGaussianWeights) {
  CpuDevice device(2);
  const int n = 16, out = 576, in = 1536;
  std::vector<float> x = gaussian(n * in, 3, 1.0);
  std::vector<float> w = gaussian(static_cast<std::size_t>(out) * in, 4, 0.02);
  std::vector<float> y_fp32(n * out), y_int8(n * out);
  ref::matmul(x.data(), w.data(), y_fp32.data(), n, out, in);
  auto linear = Int8Quantization().make_linear("w", w, out, in);
  linear->forward(x.data(), y_int8.data(), n, device);
  double num = 0, den = 0;
  for (int i = 0; i < n * out; ++i) {
    num += (y_int8[i] - y_fp32[i]) * static_cast<double>(y_int8[i] - y_fp32[i]);
    den += y_fp32[i] * static_cast<double>(y_fp32[i]);
  }
  double rel = std::sqrt(num / den);
  // Expected about max|w_row| / 127 / sqrt(12) / sigma ~ 3.4 / 440 ~ 0.8%.
  EXPECT_LT(rel, 0.01);
  EXPECT_GT(rel, 0.001);  // it is quantized: not bit-exact
}

TEST(Int8Quantization, WeightBytesAboutAQuarterOfFp32) {
  const int out = 576, in = 1536;
  auto linear = Int8Quantization().make_linear("w", gaussian(out * in, 5, 1.0), out, in);
  EXPECT_EQ(linear->weight_bytes(), static_cast<std::uint64_t>(out) * in + 4u * out);
  double ratio = static_cast<double>(linear->weight_bytes()) / (4.0 * out * in);
  EXPECT_NEAR(ratio, 0.25, 0.001);
}

// W8A8 on the host: with AVX-512 VNNI the linear runs from packed panels (q released, block
// sums counted in weight_bytes), for decode and prefill rows alike; either way it matches the
// reference W8A8 matmul.
TEST(Int8Quantization, Int8ActivationsMatchReferenceForDecodeAndPrefill) {
  CpuDevice device(2);
  const int out = 200, in = 333;
  const std::vector<float> w = gaussian(static_cast<std::size_t>(out) * in, 8, 0.05);
  std::vector<std::int8_t> q(w.size());
  std::vector<float> scale(out);
  ref::quantize_int8_rows(w.data(), out, in, q.data(), scale.data());
  auto linear = Int8Quantization(Int8Activations::kInt8).make_linear("layers.0.w1", w, out, in);
  const auto& int8 = dynamic_cast<const Int8Linear&>(*linear);
  if (cpu::gemm_panels_int8_available()) {
    EXPECT_TRUE(int8.q().empty());
    // Codes (in rounded up to 4) and scales only; no channel padding.
    EXPECT_EQ(linear->weight_bytes(), static_cast<std::uint64_t>(out) * ((in + 3) / 4 * 4) + 4u * out);
  }
  for (int n : {1, 37}) {
    const std::vector<float> x = gaussian(static_cast<std::size_t>(n) * in, 9 + n, 1.0);
    std::vector<std::int8_t> xq(x.size());
    std::vector<float> xs(static_cast<std::size_t>(n) * ref::act_blocks(in));
    ref::quantize_act_rows(x.data(), n, in, xq.data(), xs.data());
    std::vector<float> want(static_cast<std::size_t>(n) * out), got(want.size(), std::nanf(""));
    ref::matmul_int8_act(xq.data(), xs.data(), q.data(), scale.data(), want.data(), n, out, in);
    linear->forward(x.data(), got.data(), n, device);
    for (std::size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4 * (1.0 + std::fabs(want[i]))) << i;
  }
}

// W8A8 passes of 16 rows and more run on the AMX tiles where they run (TinyLlama's shapes are
// whole panels and blocks), with the bits of the VNNI micro-tiles it ran on before.
TEST(Int8Quantization, W8A8PrefillRunsOnTheAmxTilesWithTheVnniBits) {
  if (!cpu::amx_int8_enabled()) GTEST_SKIP() << "AMX int8 does not run here";
  CpuDevice device(2);
  const int out = 256, in = 2048;
  const auto linear = Int8Quantization(Int8Activations::kInt8).make_linear("layers.0.wq", gaussian(static_cast<std::size_t>(out) * in, 10, 0.05), out, in);
  const auto& int8 = dynamic_cast<const Int8Linear&>(*linear);
  EXPECT_FALSE(cpu::gemm_panels_int8_uses_amx(int8.panels(), 15));
  for (int n : {16, 32, 128}) {
    EXPECT_TRUE(cpu::gemm_panels_int8_uses_amx(int8.panels(), n)) << n;
    const std::vector<float> x = gaussian(static_cast<std::size_t>(n) * in, 11, 1.0);
    std::vector<float> amx(static_cast<std::size_t>(n) * out), vnni(amx.size());
    linear->forward(x.data(), amx.data(), n, device);
    const bool before = cpu::set_amx_int8(false);
    linear->forward(x.data(), vnni.data(), n, device);
    cpu::set_amx_int8(before);
    EXPECT_EQ(amx, vnni) << n;
  }
}

TEST(Int8Quantization, RejectsMismatchedWeight) {
  EXPECT_THROW(Int8Quantization().make_linear("w", std::vector<float>(10), 3, 4), Error);
}

// W8A8 panels reading one input: one cpu::gemm_panels_int8_group with each member's own bits.
// SmolLM2's w1 / w3 at decode pay two dispatches alone, one together; its q/k/v (30 panels) run
// on one thread alone (each under a grain) and are split over both together.
TEST(Int8Quantization, PanelGroupRunsAsOneDispatchWithEachMembersBits) {
  if (!cpu::gemm_panels_int8_available()) GTEST_SKIP() << "this build has no int8 panels (neither AVX-512 VNNI nor AVX2)";
  Int8Quantization quant(Int8Activations::kInt8);
  const int d = 576, h = 1536;
  const auto w1 = quant.make_linear("layers.0.w1", gaussian(h * d, 1, 0.05), h, d),
             w3 = quant.make_linear("layers.0.w3", gaussian(h * d, 2, 0.05), h, d);
  const auto q = quant.make_linear("layers.0.wq", gaussian(d * d, 3, 0.05), d, d),
             k = quant.make_linear("layers.0.wk", gaussian(190 * d, 4, 0.05), 190, d),
             v = quant.make_linear("layers.0.wv", gaussian(192 * d, 5, 0.05), 192, d);
  CpuDevice device(2);
  const Linear* const gate_up[] = {w1.get(), w3.get()};
  const Linear* const qkv[] = {q.get(), k.get(), v.get()};
  testing::expect_group_in_one_dispatch(gate_up, device, 40);
  testing::expect_group_in_one_dispatch(qkv, device, 50, false);  // alone: inline, no dispatch at 1 row
  // fp32 activations (W8A16): the panels' rows (up to kW8PanelMaxRows where the AMX tiles run,
  // every count elsewhere) as one dispatch, the tiles' rows one call each; the same bits either way.
  Int8Quantization fp32_acts(Int8Activations::kFp32);
  const auto a = fp32_acts.make_linear("a", gaussian(h * d, 6, 0.05), h, d),
             b = fp32_acts.make_linear("b", gaussian(h * d, 7, 0.05), h, d);
  const Linear* const plain[] = {a.get(), b.get()};
  for (int n : {1, 3, Int8Linear::kW8PanelMaxRows}) {
    const testing::GroupDispatches g = testing::expect_group_matches_separate(plain, n, device, 60 + n);
    EXPECT_EQ(g.grouped, 1u) << n << " rows";
    EXPECT_GT(g.separate, g.grouped) << n << " rows";
  }
  testing::expect_group_matches_separate(plain, Int8Linear::kW8PanelMaxRows + 3, device, 70);
}

// activations = "int16" (W8A16 in integers): x held per 32-block as int16 into the int16 panels
// (the row-major codes kept for the AMX tiles' prefill, as with fp32 activations), each token
// row's output the same bits alone as in any batch up to kW8PanelMaxRows (every count without
// the AMX tiles: speculative verification relies on it), within the int16 blocks' error of the
// fp32 product, and the rows given back; a linear whose input is not a multiple of 32 keeps the
// fp32-activation panels.
TEST(Int8Quantization, Int16ActivationsRunTheInt16PanelsWithRowIndependentBits) {
  CpuDevice device(2);
  const int out = 200, in = 576;
  const std::vector<float> w = gaussian(static_cast<std::size_t>(out) * in, 12, 0.05);
  std::vector<std::int8_t> q(w.size());
  std::vector<float> scale(out);
  ref::quantize_int8_rows(w.data(), out, in, q.data(), scale.data());
  auto linear = Int8Quantization(Int8Activations::kInt16).make_linear("layers.0.w1", w, out, in);
  const auto& int8 = dynamic_cast<const Int8Linear&>(*linear);
  EXPECT_EQ(int8.activations(), Int8Activations::kInt16);
  EXPECT_FALSE(int8.reads_act_blocks());
  EXPECT_EQ(linear->cpu_kernel(1), "panels_w8_int16");
  EXPECT_EQ(linear->cpu_kernel(Int8Linear::kW8PanelMaxRows), "panels_w8_int16");
  EXPECT_EQ(linear->weight_bytes(), static_cast<std::uint64_t>(out) * (in + 4));
  std::vector<float> row(in);
  for (int o : {0, 17, out - 1}) {
    linear->dequantize_row(o, row.data());
    for (int i = 0; i < in; ++i) ASSERT_EQ(row[i], scale[o] * static_cast<float>(q[static_cast<std::size_t>(o) * in + i]));
  }
  const int n = Int8Linear::kW8PanelMaxRows;
  const std::vector<float> x = gaussian(static_cast<std::size_t>(n) * in, 13, 1.0);
  std::vector<float> got(static_cast<std::size_t>(n) * out, std::nanf("")), one(static_cast<std::size_t>(out));
  linear->forward(x.data(), got.data(), n, device);
  std::vector<std::int16_t> xq(x.size());
  std::vector<float> xs(static_cast<std::size_t>(n) * (in / 32));
  cpu::quantize_panel_acts_int16(x.data(), n, in, xq.data(), xs.data());
  for (int r = 0; r < n; ++r) {
    linear->forward(x.data() + static_cast<std::size_t>(r) * in, one.data(), 1, device);
    for (int o = 0; o < out; ++o) {
      ASSERT_EQ(one[o], got[static_cast<std::size_t>(r) * out + o]) << "row " << r << " alone, output " << o;
      double want = 0, bound = 1e-5;
      for (int i = 0; i < in; ++i) {
        const double wi = static_cast<double>(scale[o]) * q[static_cast<std::size_t>(o) * in + i];
        want += wi * x[static_cast<std::size_t>(r) * in + i];
        bound += std::fabs(wi) * 0.5 * xs[static_cast<std::size_t>(r) * (in / 32) + i / 32];
      }
      ASSERT_NEAR(got[static_cast<std::size_t>(r) * out + o], want, bound) << r << " " << o;
    }
  }
  // A group of them (SmolLM2's gate / up): one dispatch, each member's bits.
  Int8Quantization quant(Int8Activations::kInt16);
  const auto a = quant.make_linear("a", gaussian(static_cast<std::size_t>(1536) * in, 14, 0.05), 1536, in),
             b = quant.make_linear("b", gaussian(static_cast<std::size_t>(1536) * in, 15, 0.05), 1536, in);
  const Linear* const pair[] = {a.get(), b.get()};
  testing::expect_group_in_one_dispatch(pair, device, 16);
  // A group mixing int16 and W8A8 members (both may hold these panels): each its own numerics.
  const auto w8a8 = Int8Quantization(Int8Activations::kInt8)
                        .make_linear("c", gaussian(static_cast<std::size_t>(96) * in, 21, 0.05), 96, in);
  const Linear* const mixed[] = {a.get(), w8a8.get()};
  testing::expect_group_matches_separate(mixed, 4, device, 22);
  // in = 100: no int16 panels; the fp32-activation linear's kernel and bits.
  const std::vector<float> w100 = gaussian(static_cast<std::size_t>(out) * 100, 17, 0.05);
  const auto odd = Int8Quantization(Int8Activations::kInt16).make_linear("odd", w100, out, 100),
             fp32 = Int8Quantization(Int8Activations::kFp32).make_linear("fp32", w100, out, 100);
  EXPECT_EQ(odd->cpu_kernel(4), fp32->cpu_kernel(4));
  const std::vector<float> x100 = gaussian(static_cast<std::size_t>(3) * 100, 18, 1.0);
  std::vector<float> y_odd(static_cast<std::size_t>(3) * out), y_fp32(y_odd.size());
  odd->forward(x100.data(), y_odd.data(), 3, device);
  fp32->forward(x100.data(), y_fp32.data(), 3, device);
  EXPECT_EQ(y_odd, y_fp32);
}

// W8A8 where the plan takes the int16 panels (AVX2 builds without AVX-512, in a multiple of 32):
// the int8 blocks widened into them, the reference W8A8 product, each row alone its batch bits.
TEST(Int8Quantization, W8A8OnTheInt16PanelsMatchesTheReference) {
  const int out = 150, in = 576;
  const cpu::CpuKernel k = cpu::plan_cpu_linear(cpu::CpuFormat::kW8A8, 4, cpu::CpuLinearShape{.out = out, .in = in},
                                                cpu::CpuIsa::host());
  if (k != cpu::CpuKernel::kPanelsW8Int16) GTEST_SKIP() << "W8A8 runs " << cpu::cpu_kernel_info(k).name << " here";
  CpuDevice device(2);
  const std::vector<float> w = gaussian(static_cast<std::size_t>(out) * in, 19, 0.05);
  std::vector<std::int8_t> q(w.size());
  std::vector<float> scale(out);
  ref::quantize_int8_rows(w.data(), out, in, q.data(), scale.data());
  auto linear = Int8Quantization(Int8Activations::kInt8).make_linear("layers.0.w2", w, out, in);
  EXPECT_EQ(linear->cpu_kernel(4), "panels_w8_int16");
  EXPECT_TRUE(dynamic_cast<const Int8Linear&>(*linear).q().empty());
  const int n = 9;
  const std::vector<float> x = gaussian(static_cast<std::size_t>(n) * in, 20, 1.0);
  std::vector<std::int8_t> xq(x.size());
  std::vector<float> xs(static_cast<std::size_t>(n) * ref::act_blocks(in));
  ref::quantize_act_rows(x.data(), n, in, xq.data(), xs.data());
  std::vector<float> want(static_cast<std::size_t>(n) * out), got(want.size(), std::nanf("")), one(out);
  ref::matmul_int8_act(xq.data(), xs.data(), q.data(), scale.data(), want.data(), n, out, in);
  linear->forward(x.data(), got.data(), n, device);
  for (std::size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-4 * (1.0 + std::fabs(want[i]))) << i;
  for (int r = 0; r < n; ++r) {
    linear->forward(x.data() + static_cast<std::size_t>(r) * in, one.data(), 1, device);
    for (int o = 0; o < out; ++o) ASSERT_EQ(one[o], got[static_cast<std::size_t>(r) * out + o]) << r << " " << o;
  }
  std::vector<float> row(in);
  linear->dequantize_row(7, row.data());
  for (int i = 0; i < in; ++i) ASSERT_EQ(row[i], scale[7] * static_cast<float>(q[static_cast<std::size_t>(7) * in + i]));
}

// "auto" is int16 where its kernel is vectorised and the faster one (AVX2 and AVX-512 builds),
// fp32 on the portable build; anything else but the four values is refused, naming them.
TEST(Int8Quantization, AutoActivationsFollowTheBuild) {
  const cpu::CpuIsa isa = cpu::CpuIsa::host();
  EXPECT_EQ(int8_cpu_activations("auto"), isa.avx2 ? Int8Activations::kInt16 : Int8Activations::kFp32);
  EXPECT_EQ(int8_cpu_activations("fp32"), Int8Activations::kFp32);
  EXPECT_EQ(int8_cpu_activations("int16"), Int8Activations::kInt16);
  EXPECT_EQ(int8_cpu_activations("int8"), Int8Activations::kInt8);
  try {
    int8_cpu_activations("int4");
    FAIL() << "int4 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("allowed: auto, fp32, int16, int8"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace inferlab
