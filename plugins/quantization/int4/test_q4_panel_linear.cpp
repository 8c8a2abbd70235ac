// int4 with int8 activations and groups of 32 on AVX-512 VNNI builds: Q4_0 / Q4_1 blocks with
// fp16 scales in cpu::gemm_gguf's panels (q4_panel_linear.h).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "inferlab/error.h"
#include "inferlab/formats/formats.h"
#include "inferlab/support/rng.h"
#include "int4.h"
#include "int4_test_helpers.h"
#include "kernels/cpu/gemm_gguf.h"
#include "kernels/ref/matmul_int8.h"
#include "kernels/ref/ops.h"
#include "linear_group_checks.h"
#include "q4_panel_linear.h"

namespace inferlab {
using namespace plugins;
namespace {

using namespace int4_test;

std::unique_ptr<Linear> make(const std::vector<float>& w, int out, int in, bool symmetric, int gs = 32,
                             bool int8 = true, const std::string& name = "layers.0.w1") {
  return Int4Quantization(gs, symmetric, false, int8 ? Int4Activations::kInt8 : Int4Activations::kFp32)
      .make_linear(name, w, out, in);
}

const Q4PanelLinear* panels(const Linear& l) { return dynamic_cast<const Q4PanelLinear*>(&l); }

// W_hat [out, in] read back through dequantize_row.
std::vector<float> rows_of(const Linear& l) {
  std::vector<float> w(static_cast<std::size_t>(l.out_features()) * l.in_features());
  for (int o = 0; o < l.out_features(); ++o) l.dequantize_row(o, w.data() + static_cast<std::size_t>(o) * l.in_features());
  return w;
}

// Weights [37, 160] with awkward blocks: a row of a large range, a block far from zero-mean,
// an all-zero block, and blocks so small that their step d is an fp16 subnormal (rounding d to
// the nearest half there would move it by up to 50% and push weights past d / 2).
std::vector<float> awkward_weights(int out, int in) {
  std::vector<float> w = gaussian(static_cast<std::size_t>(out) * in, 2, 0.05);
  for (int i = 0; i < in; ++i) w[7 * in + i] *= 20.0f;
  for (int i = 0; i < 32; ++i) w[9 * in + i] += 0.3f;
  for (int i = 0; i < 32; ++i) w[9 * in + 32 + i] = 5.0f + 0.01f * static_cast<float>(i % 7);
  for (int i = 128; i < 160; ++i) w[11 * in + i] = 0.0f;
  for (int i = 0; i < in; ++i) w[13 * in + i] *= 1.2e-5f;  // d ~ 3e-8 .. 1e-7: subnormal halves
  for (int i = 0; i < in; ++i) w[14 * in + i] *= 4e-4f;    // d ~ 1e-5: subnormal halves
  return w;
}

TEST(Q4PanelLinear, BuiltForInt8ActivationsAndGroupsOf32Only) {
  const int out = 40, in = 96;
  const std::vector<float> w = gaussian(static_cast<std::size_t>(out) * in, 1, 0.05);
  for (bool sym : {false, true}) {
    auto q = make(w, out, in, sym);
    EXPECT_EQ(panels(*q) != nullptr, cpu::gemm_gguf_available()) << "sym=" << sym;
    if (panels(*q) != nullptr) {
      EXPECT_EQ(panels(*q)->symmetric(), sym);
      EXPECT_TRUE(q->reads_act_blocks());
    }
    // Other group sizes, fp32 activations, in not a multiple of 32, q4_blocks = false: the
    // fp32-scale format.
    for (auto* other : {make(w, out, in, sym, 64).release(), make(w, out, in, sym, 32, false).release(),
                        Int4Quantization(32, sym, false, Int4Activations::kInt8, false).make_linear("w", w, out, in).release(),
                        make(std::vector<float>(w.begin(), w.begin() + out * 48), out, 48, sym).release()}) {
      std::unique_ptr<Linear> owned(other);
      EXPECT_EQ(panels(*owned), nullptr);
      EXPECT_NE(dynamic_cast<const Int4Linear*>(owned.get()), nullptr);
    }
    // A step beyond the largest half (65504): that layer keeps fp32 scales, and still works.
    std::vector<float> big = w;
    big[5] = 1e7f;
    auto kept = make(big, out, in, sym);
    EXPECT_EQ(panels(*kept), nullptr);
    ASSERT_NE(dynamic_cast<const Int4Linear*>(kept.get()), nullptr);
    EXPECT_TRUE(kept->reads_act_blocks());
  }
}

// |w - w_hat| <= d / 2 for every weight, d being the block's stored fp16 step; symmetric codes
// stay in [-7, 7]; the all-zero block is exactly 0.
TEST(Q4PanelLinear, EveryWeightWithinHalfTheFp16StepOfItsBlock) {
  if (!cpu::gemm_gguf_available()) GTEST_SKIP() << "neither AVX-512 VNNI nor AVX2 in this build";
  const int out = 37, in = 160, blocks = in / 32;
  const std::vector<float> w = awkward_weights(out, in);
  for (bool sym : {false, true}) {
    auto q = make(w, out, in, sym);
    ASSERT_NE(panels(*q), nullptr);
    const std::vector<float> d = panels(*q)->scales(), wq = rows_of(*q);
    bool subnormal = false;
    for (int o = 0; o < out; ++o)
      for (int i = 0; i < in; ++i) {
        const std::size_t k = static_cast<std::size_t>(o) * in + i;
        const double step = d[static_cast<std::size_t>(o) * blocks + i / 32];
        subnormal |= step > 0 && step < 6.1e-5;
        EXPECT_LE(std::fabs(static_cast<double>(w[k]) - wq[k]), step / 2 * (1 + 1e-7))
            << "sym=" << sym << " o=" << o << " i=" << i << " d=" << step;
        if (sym && step > 0) {
          const double code = wq[k] / step;
          EXPECT_EQ(code, std::round(code));
          EXPECT_LE(std::fabs(code), 7.0);
        }
      }
    EXPECT_TRUE(subnormal);
    for (int i = 128; i < 160; ++i) EXPECT_EQ(wq[11 * in + i], 0.0f);
  }
}

// The layer computes y = x_hat · W_hatᵀ: x_hat the int8 activation blocks, W_hat what
// dequantize_row returns (exact up to float summation), for out not a multiple of 32 and several
// token rows; forward_act_blocks on ready-made blocks gives the same bits. And the W4A8 bound:
// |y - x_hat · Wᵀ| <= sum_b d_b / 2 * sum_{i in b} |x_hat_i|.
TEST(Q4PanelLinear, ComputesTheDequantisedWeightsOnQuantisedActivations) {
  if (!cpu::gemm_gguf_available()) GTEST_SKIP() << "neither AVX-512 VNNI nor AVX2 in this build";
  const int in = 160, blocks = in / 32;
  for (int out : {37, 64, 1}) {
    const std::vector<float> w = awkward_weights(std::max(out, 15), in);
    const std::vector<float> wo(w.begin(), w.begin() + static_cast<std::size_t>(out) * in);
    for (bool sym : {false, true}) {
      auto q = make(wo, out, in, sym);
      ASSERT_NE(panels(*q), nullptr);
      const std::vector<float> d = panels(*q)->scales(), wq = rows_of(*q);
      for (int n : {1, 3, 8}) {
        const std::vector<float> x = gaussian(static_cast<std::size_t>(n) * in, 30 + n, 1.0);
        std::vector<std::int8_t> xq(x.size());
        std::vector<float> xs(static_cast<std::size_t>(n) * blocks);
        ref::quantize_act_rows(x.data(), n, in, xq.data(), xs.data());
        const std::vector<float> y = run(*q, x, n);
        std::vector<float> y_blocks(y.size(), std::nanf(""));
        CpuDevice device(2);
        q->forward_act_blocks(xq.data(), xs.data(), y_blocks.data(), n, device);
        EXPECT_EQ(y_blocks, y);
        for (int r = 0; r < n; ++r)
          for (int o = 0; o < out; ++o) {
            double want = 0, mag = 0, exact = 0, bound = 0;
            for (int i = 0; i < in; ++i) {
              const std::size_t k = static_cast<std::size_t>(o) * in + i;
              const double xh = xs[static_cast<std::size_t>(r) * blocks + i / 32] * xq[static_cast<std::size_t>(r) * in + i];
              want += xh * wq[k];
              mag += std::fabs(xh * wq[k]);
              exact += xh * w[k];
              bound += d[static_cast<std::size_t>(o) * blocks + i / 32] / 2 * std::fabs(xh);
            }
            const double got = y[static_cast<std::size_t>(r) * out + o];
            EXPECT_NEAR(got, want, 1e-5 * mag + 1e-30) << "out=" << out << " sym=" << sym << " n=" << n << " o=" << o;
            EXPECT_LE(std::fabs(got - exact), bound * (1 + 1e-5) + 1e-5 * mag);
          }
      }
    }
  }
}

// The classifier (and a tied embedding read through it) comes back row by row exactly as its
// blocks encode it, rows of the partial last panel included; rows outside [0, out) throw.
TEST(Q4PanelLinear, DequantizeRowDecodesTheRowsBlocks) {
  if (!cpu::gemm_gguf_available()) GTEST_SKIP() << "neither AVX-512 VNNI nor AVX2 in this build";
  const int out = 45, in = 96;
  const std::vector<float> w = gaussian(static_cast<std::size_t>(out) * in, 4, 0.1);
  for (bool sym : {false, true}) {
    auto q = make(w, out, in, sym, 32, true, "classifier");
    ASSERT_NE(panels(*q), nullptr);
    const auto blocks = quantize_q4_blocks(w, out, in, sym);
    ASSERT_TRUE(blocks.has_value());
    const GgmlType type = sym ? GgmlType::kQ4_0 : GgmlType::kQ4_1;
    const std::size_t row_bytes = ggml_tensor_bytes(type, in);
    ASSERT_EQ(blocks->size(), row_bytes * out);
    std::vector<float> want(in), got(in);
    for (int o = 0; o < out; ++o) {
      dequantize(type, blocks->data() + o * row_bytes, in, want.data());
      q->dequantize_row(o, got.data());
      EXPECT_EQ(got, want) << "sym=" << sym << " row " << o;
    }
    EXPECT_THROW(q->dequantize_row(out, got.data()), Error);
    EXPECT_THROW(q->dequantize_row(-1, got.data()), Error);
  }
}

// Blocks whose weights already lie on a power-of-two grid (both ends present) round-trip
// bit-exactly: d is an exact half, and so is m = -d z (0 is on the grid).
TEST(Q4PanelLinear, WeightsOnTheGridRoundTripExactly) {
  if (!cpu::gemm_gguf_available()) GTEST_SKIP() << "neither AVX-512 VNNI nor AVX2 in this build";
  const int out = 6, in = 96;
  Rng rng(9);
  for (bool sym : {false, true}) {
    std::vector<float> w(static_cast<std::size_t>(out) * in);
    for (int o = 0; o < out; ++o)
      for (int k0 = 0; k0 < in; k0 += 32) {
        const float s = std::ldexp(1.0f, -static_cast<int>(rng.next_u64() % 12));
        const int z = static_cast<int>(rng.next_u64() % 16);
        for (int i = k0; i < k0 + 32; ++i) {
          const int q = sym ? static_cast<int>(rng.next_u64() % 15) - 7 : static_cast<int>(rng.next_u64() % 16) - z;
          w[o * in + i] = s * static_cast<float>(q);
        }
        w[o * in + k0] = s * static_cast<float>(sym ? 7 : -z);
        w[o * in + k0 + 1] = s * static_cast<float>(sym ? -7 : 15 - z);
      }
    auto q = make(w, out, in, sym);
    ASSERT_NE(panels(*q), nullptr);
    EXPECT_EQ(rows_of(*q), w) << "sym=" << sym;
  }
}

// 4.5 / 5.0 bits per weight; the zero rows padding the last panel are not counted, and are all
// the panels hold beyond that.
TEST(Q4PanelLinear, WeightBytesAre4Point5And5Bits) {
  if (!cpu::gemm_gguf_available()) GTEST_SKIP() << "neither AVX-512 VNNI nor AVX2 in this build";
  const int in = 1536;
  for (int out : {576, 37}) {
    const std::vector<float> w = gaussian(static_cast<std::size_t>(out) * in, 5, 1.0);
    const std::uint64_t blocks = static_cast<std::uint64_t>(out) * (in / 32);
    const std::uint64_t padded = static_cast<std::uint64_t>((out + 31) / 32 * 32) * (in / 32);
    for (bool sym : {true, false}) {
      auto q = make(w, out, in, sym);
      const std::uint64_t per_block = sym ? 18 : 20;  // Q4_0: 4.5 bits, Q4_1: 5.0 bits
      EXPECT_EQ(q->weight_bytes(), per_block * blocks);
      EXPECT_DOUBLE_EQ(8.0 * static_cast<double>(q->weight_bytes()) / (static_cast<double>(out) * in),
                       sym ? 4.5 : 5.0);
      const auto blocks_of = quantize_q4_blocks(w, out, in, sym);
      ASSERT_TRUE(blocks_of.has_value());
      EXPECT_EQ(cpu::packed_bytes(cpu::pack_gguf(sym ? GgmlType::kQ4_0 : GgmlType::kQ4_1, *blocks_of, out, in)),
                per_block * padded);
    }
  }
}

// Relative output error on Gaussian weights [576, 1536], n = 8: the int8 activations' own error
// is small next to int4's, and the fp16 steps change it by far less than the scheme does.
TEST(Q4PanelLinear, BothActivationModesWithinTheGaussianTolerances) {
  const int n = 8, out = 576, in = 1536;
  const std::vector<float> x = gaussian(static_cast<std::size_t>(n) * in, 3, 1.0);
  const std::vector<float> w = gaussian(static_cast<std::size_t>(out) * in, 4, 0.02);
  std::vector<float> y_fp32(static_cast<std::size_t>(n) * out);
  ref::matmul(x.data(), w.data(), y_fp32.data(), n, out, in);
  auto rel = [&](const Linear& l) { return relative_error(run(l, x, n), y_fp32); };
  double err[2][2];  // [symmetric][int8 activations]
  for (int sym : {0, 1})
    for (int int8 : {0, 1}) err[sym][int8] = rel(*make(w, out, in, sym != 0, 32, int8 != 0));
  // The fp32-scale W4A8 layer (today's path elsewhere) on the same weights.
  Int4Linear fp32_scales(w, out, in, 32, false);
  fp32_scales.set_activations(Int4Activations::kInt8);
  const double asym_fp32_scales = rel(fp32_scales);
  std::printf("gaussian rel. error g32: asym fp32-act %.5f int8-act %.5f (fp32 scales %.5f); sym %.5f %.5f\n",
              err[0][0], err[0][1], asym_fp32_scales, err[1][0], err[1][1]);
  for (int int8 : {0, 1}) {
    EXPECT_GT(err[0][int8], 0.05);
    EXPECT_LT(err[0][int8], 0.10);
    EXPECT_LT(err[0][int8], err[1][int8]);
    EXPECT_LT(err[1][int8], 0.12);
  }
  EXPECT_NEAR(err[0][1], err[0][0], 0.01);
  EXPECT_NEAR(err[0][1], asym_fp32_scales, 0.002);
}

TEST(Q4PanelLinear, QuantizerRejectsBadShapes) {
  EXPECT_THROW(quantize_q4_blocks(std::vector<float>(3 * 48), 3, 48, true), Error);
  EXPECT_THROW(quantize_q4_blocks(std::vector<float>(10), 3, 32, false), Error);
  EXPECT_THROW(quantize_q4_blocks({}, 0, 32, false), Error);
  EXPECT_FALSE(quantize_q4_blocks(std::vector<float>(32, std::nanf("")), 1, 32, true).has_value());
}

// wq / wk / wv of SmolLM2's shape (wk's out not a multiple of 32), Q4_0 and Q4_1 mixed: one
// cpu::gemm_gguf_group, x quantised once, every member's own bits.
TEST(Q4PanelLinear, GroupRunsAsOneDispatchWithEachMembersBits) {
  if (!cpu::gemm_gguf_available()) GTEST_SKIP() << "this build has neither AVX-512 VNNI nor AVX2: no Q4 panels";
  const int in = 576;
  const auto q = make(gaussian(576 * in, 1, 0.05), 576, in, true), k = make(gaussian(190 * in, 2, 0.05), 190, in, false),
             v = make(gaussian(192 * in, 3, 0.05), 192, in, true);
  const Linear* const group[] = {q.get(), k.get(), v.get()};
  for (const Linear* l : group) ASSERT_NE(panels(*l), nullptr);
  CpuDevice device(2);
  testing::expect_group_in_one_dispatch(group, device, 20);
  // With an fp32-scale int4 linear (groups of 64) the group falls back to one call each.
  const auto other = make(gaussian(64 * in, 4, 0.05), 64, in, true, 64);
  ASSERT_EQ(panels(*other), nullptr);
  const Linear* const mixed[] = {q.get(), other.get()};
  testing::expect_group_matches_separate(mixed, 2, device, 30);
}

}  // namespace
}  // namespace inferlab
