#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "inferlab/device/device.h"
#include "inferlab/error.h"
#include "inferlab/plugin/registry.h"
#include "inferlab/support/rng.h"
#include "int4.h"
#include "int4_test_helpers.h"
#include "kernels/cpu/gemm_int4_panels.h"
#include "kernels/ref/ops.h"
#include "test_support.h"

namespace inferlab {
using namespace plugins;
namespace {

using namespace int4_test;

// Relative output error of int4 on Gaussian weights [576, 1536] and inputs, n = 8.
double gaussian_error(int group_size, bool symmetric, double mean = 0.0) {
  const int n = 8, out = 576, in = 1536;
  std::vector<float> x = gaussian(static_cast<std::size_t>(n) * in, 3, 1.0);
  std::vector<float> w = gaussian(static_cast<std::size_t>(out) * in, 4, 0.02);
  for (float& v : w) v += static_cast<float>(mean);
  std::vector<float> y_fp32(static_cast<std::size_t>(n) * out);
  ref::matmul(x.data(), w.data(), y_fp32.data(), n, out, in);
  auto linear = Int4Quantization(group_size, symmetric, false).make_linear("w", w, out, in);
  return relative_error(run(*linear, x, n), y_fp32);
}

// For output o: y_int4 - y_fp32 = sum_i x_i (w_q,oi - w_oi), and round-to-nearest on a grid of
// step scale_og that covers the group's weights (sym: |w| <= 7 scale; asym: the range [lo, hi]
// is 15 scales wide and the zero point puts lo within half a step of code 0) gives
// |w_q,oi - w_oi| <= scale_og / 2. Hence
// |y_int4 - y_fp32| <= sum_g scale_og / 2 * sum_{i in g} |x_i|.
TEST(Int4Quantization, ErrorWithinPerGroupBound) {
  const int n = 5, out = 37, in = 131;  // groups of 32: the last holds 3 channels
  std::vector<float> x = gaussian(static_cast<std::size_t>(n) * in, 1, 1.0);
  std::vector<float> w = gaussian(static_cast<std::size_t>(out) * in, 2, 0.05);
  for (int i = 0; i < in; ++i) w[7 * in + i] *= 20.0f;    // rows of very different ranges
  for (int i = 0; i < 40; ++i) w[9 * in + i] += 0.3f;     // groups far from zero-mean
  for (int i = 128; i < in; ++i) w[11 * in + i] = 0.0f;   // an all-zero partial group
  std::vector<float> y_fp32(static_cast<std::size_t>(n) * out);
  ref::matmul(x.data(), w.data(), y_fp32.data(), n, out, in);
  for (int gs : {8, 32, 48}) {
    for (bool symmetric : {false, true}) {
      auto linear = Int4Quantization(gs, symmetric, false).make_linear("layers.0.w1", w, out, in);
      const auto& q = dynamic_cast<const Int4Linear&>(*linear);
      const int G = q.groups();
      const auto scales = q.rows().scale;
      ASSERT_EQ(G, (in + gs - 1) / gs);
      std::vector<float> y = run(*linear, x, n);
      for (int r = 0; r < n; ++r)
        for (int o = 0; o < out; ++o) {
          double bound = 0, mag = 0;
          for (int i = 0; i < in; ++i) {
            bound += scales[o * G + i / gs] / 2 * std::fabs(x[r * in + i]);
            mag += std::fabs(x[r * in + i] * w[o * in + i]);
          }
          double err = std::fabs(y[r * out + o] - y_fp32[r * out + o]);
          // Slack for fp32 accumulation in the kernel, far below the quantization bound.
          EXPECT_LE(err, bound * (1 + 1e-5) + 1e-5 * mag)
              << "gs=" << gs << " sym=" << symmetric << " r=" << r << " o=" << o;
        }
    }
  }
}

TEST(Int4Quantization, RelativeErrorOnGaussianWeightsIsAFewPercent) {
  // Asymmetric, groups of 32: the range of 32 normals is ~4.1 sigma, a step ~0.27 sigma, so
  // the rms weight error is ~0.27 / sqrt(12) ~ 7.9% of sigma, and so is the output error
  // (10x int8's ~0.8%).
  const double rel = gaussian_error(32, false);
  EXPECT_GT(rel, 0.05);
  EXPECT_LT(rel, 0.10);
}

TEST(Int4Quantization, SmallerGroupsGiveSmallerError) {
  const double e8 = gaussian_error(8, false), e32 = gaussian_error(32, false),
               e128 = gaussian_error(128, false), e1536 = gaussian_error(1536, false);
  std::printf("gaussian rel. error by group size: 8 %.4f 32 %.4f 128 %.4f 1536 %.4f\n", e8, e32,
              e128, e1536);
  EXPECT_LT(e8, e32);
  EXPECT_LT(e32, e128);
  EXPECT_LT(e128, e1536);
}

TEST(Int4Quantization, SymmetricChangesResultsAndLosesOnOffsetWeights) {
  // Zero-mean weights: sym's step max|w|/7 (~0.31 sigma) is coarser than asym's range/15.
  const double asym = gaussian_error(32, false), sym = gaussian_error(32, true);
  EXPECT_LT(asym, sym);
  EXPECT_LT(sym, 0.12);
  // Weights offset by +1.5 sigma: sym spends half its codes on a sign that hardly occurs. A
  // group spans about [0, 3.5 sigma] (asym keeps 0 in its range): steps 0.23 vs 0.5 sigma.
  const double asym_off = gaussian_error(32, false, 0.03), sym_off = gaussian_error(32, true, 0.03);
  std::printf("gaussian rel. error, groups of 32: asym %.4f sym %.4f; offset: asym %.4f sym %.4f\n",
              asym, sym, asym_off, sym_off);
  EXPECT_LT(1.5 * asym_off, sym_off);
}

// Weights that are already on a group's grid come back exactly, and the layer then computes
// the fp32 product up to 1e-5 of sum |x w| (fp32 accumulation).
TEST(Int4Quantization, WeightsOnTheGridRoundTripExactly) {
  const int out = 6, in = 70, gs = 16;  // groups 16, 16, 16, 16, 6
  Rng rng(9);
  for (bool symmetric : {false, true}) {
    std::vector<float> w(static_cast<std::size_t>(out) * in);
    for (int o = 0; o < out; ++o)
      for (int k0 = 0; k0 < in; k0 += gs) {
        const float s = std::ldexp(1.0f, -static_cast<int>(rng.next_u64() % 8));  // 2^-k
        const int z = static_cast<int>(rng.next_u64() % 16);
        for (int i = k0; i < std::min(in, k0 + gs); ++i) {
          const int u = static_cast<int>(rng.next_u64() % 16);
          const int q = symmetric ? static_cast<int>(rng.next_u64() % 15) - 7 : u - z;
          w[o * in + i] = s * static_cast<float>(q);
        }
        // The grid's ends occur in the group: codes 0 and 15 (asym), +-7 (sym).
        w[o * in + k0] = s * static_cast<float>(symmetric ? 7 : -z);
        if (k0 + 1 < in) w[o * in + k0 + 1] = s * static_cast<float>(symmetric ? -7 : 15 - z);
      }
    auto linear = Int4Quantization(gs, symmetric, false).make_linear("w", w, out, in);
    const auto& q = dynamic_cast<const Int4Linear&>(*linear);
    EXPECT_EQ(q.dequantized(), w) << "sym=" << symmetric;
    const int n = 3;
    std::vector<float> x = gaussian(static_cast<std::size_t>(n) * in, 10, 1.0);
    std::vector<float> y_fp32(static_cast<std::size_t>(n) * out);
    ref::matmul(x.data(), w.data(), y_fp32.data(), n, out, in);
    std::vector<float> y = run(*linear, x, n);
    for (int r = 0; r < n; ++r)
      for (int o = 0; o < out; ++o) {
        double mag = 0;
        for (int i = 0; i < in; ++i) mag += std::fabs(x[r * in + i] * w[o * in + i]);
        EXPECT_NEAR(y[r * out + o], y_fp32[r * out + o], 1e-5 * mag);
      }
  }
}

TEST(Int4Quantization, WeightBytesAboutAnEighthOfFp32PlusScales) {
  const int out = 576, in = 1536;
  const double fp32 = 4.0 * out * in;
  auto w = gaussian(static_cast<std::size_t>(out) * in, 5, 1.0);
  auto asym = Int4Quantization(32, false, false).make_linear("w", w, out, in);
  // codes + fp32 scale + uint8 zero per group of 32: 1/8 + 1/32 + 1/128 of fp32.
  EXPECT_EQ(asym->weight_bytes(), std::uint64_t{out} * in / 2 + 5u * out * (in / 32));
  EXPECT_NEAR(asym->weight_bytes() / fp32, 0.125 + 1.0 / 32 + 1.0 / 128, 1e-9);
  auto sym = Int4Quantization(32, true, false).make_linear("w", w, out, in);
  EXPECT_EQ(sym->weight_bytes(), std::uint64_t{out} * in / 2 + 4u * out * (in / 32));
  auto sym128 = Int4Quantization(128, true, false).make_linear("w", w, out, in);
  EXPECT_NEAR(sym128->weight_bytes() / fp32, 0.125 + 1.0 / 128, 1e-9);
  // Odd in and a partial last group: ceil(in/2) bytes per row, ceil(in/gs) groups.
  auto odd = Int4Quantization(8, false, false).make_linear("w", gaussian(3 * 13, 6, 1.0), 3, 13);
  EXPECT_EQ(odd->weight_bytes(), 3u * 7 + 3u * 2 * 5);
}

// Decode reads every code once per token: on 4 KiB pages the few-row kernels stayed well below the
// huge-page read probe (docs/kernels.md), so weights of 2 MiB and more sit on 2 MiB pages
// (inferlab/huge_pages.h: 2 MiB-aligned mappings), whichever constructor made them.
TEST(Int4Quantization, LargeWeightsSitOnHugePages) {
  const int out = 1024, in = 4096;  // 2 MiB of codes
  const Int4Linear made(gaussian(static_cast<std::size_t>(out) * in, 7, 1.0), out, in, 32, false);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(made.packed().data()) % kHugePageBytes, 0u);
  const Int4Rows rows = made.rows();
  const Int4Linear given(out, in, 32, std::vector<std::uint8_t>(rows.packed.begin(), rows.packed.end()),
                         std::vector<float>(rows.scale.begin(), rows.scale.end()), {});
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(given.packed().data()) % kHugePageBytes, 0u);
  EXPECT_EQ(given.packed(), made.packed());
}

TEST(Int4Quantization, GroupSizeAndSymmetricChangeOutputs) {
  const int n = 2, out = 16, in = 256;
  std::vector<float> x = gaussian(static_cast<std::size_t>(n) * in, 7, 1.0);
  std::vector<float> w = gaussian(static_cast<std::size_t>(out) * in, 8, 0.05);
  auto y = [&](int gs, bool sym) {
    return run(*Int4Quantization(gs, sym, false).make_linear("w", w, out, in), x, n);
  };
  const std::vector<float> base = y(32, false);
  EXPECT_NE(base, y(64, false));
  EXPECT_NE(base, y(32, true));
  EXPECT_EQ(base, y(32, false));  // deterministic
}

TEST(Int4Quantization, SkipClassifierKeepsOnlyTheClassifierInFp32) {
  const int n = 3, out = 40, in = 64;
  std::vector<float> x = gaussian(static_cast<std::size_t>(n) * in, 11, 1.0);
  std::vector<float> w = gaussian(static_cast<std::size_t>(out) * in, 12, 0.05);
  std::vector<float> y_fp32(static_cast<std::size_t>(n) * out);
  ref::matmul(x.data(), w.data(), y_fp32.data(), n, out, in);

  Int4Quantization skip(32, false, true), plain(32, false, false);
  auto cls = skip.make_linear("classifier", w, out, in);
  EXPECT_EQ(cls->weight_bytes(), 4u * out * in);
  EXPECT_EQ(dynamic_cast<const Int4Linear*>(cls.get()), nullptr);
  EXPECT_LT(relative_error(run(*cls, x, n), y_fp32), 1e-6);

  for (auto* linear : {skip.make_linear("layers.0.wq", w, out, in).release(),
                       plain.make_linear("classifier", w, out, in).release()}) {
    std::unique_ptr<Linear> owned(linear);
    EXPECT_NE(dynamic_cast<const Int4Linear*>(owned.get()), nullptr);
    EXPECT_LT(owned->weight_bytes(), 1u * out * in);
    EXPECT_GT(relative_error(run(*owned, x, n), y_fp32), 0.01);
  }
}

TEST(Int4Quantization, RejectsBadGroupSizeAndMismatchedWeight) {
  EXPECT_THROW(Int4Quantization(12, false, false), Error);
  EXPECT_THROW(Int4Quantization(4, false, false), Error);
  EXPECT_THROW(Int4Quantization(8192, false, false), Error);
  for (Int4Activations acts : {Int4Activations::kInt8, Int4Activations::kInt16}) {  // blocks of 32 per group
    try {
      Int4Quantization(16, false, false, acts);
      ADD_FAILURE() << "group_size 16 accepted with " << int4_activations_name(acts);
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("activations = \"") + int4_activations_name(acts) +
                                           "\" needs group_size a multiple of 32, got 16"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_THROW(Int4Quantization(32, false, false).make_linear("w", std::vector<float>(10), 3, 4),
               Error);
}

// q4_blocks picks the CPU's panel format: on cuda the non-default value is refused, naming it.
TEST(Int4Quantization, Q4BlocksIsRefusedOnCudaWhereItWouldNotAct) {
#if INFERLAB_HAVE_CUDA
  Registry reg({testing::plugin_dir()});
  const ModelConfig model{.name = "m", .dim = 64, .hidden_dim = 128, .n_layers = 1, .n_heads = 2, .n_kv_heads = 2,
                          .vocab_size = 4};
  const Params plain = reg.resolve(PluginKind::kQuantization, "int4", {}, "t");
  const Params off = reg.resolve(PluginKind::kQuantization, "int4", {{"q4_blocks", ParamValue(false)}}, "t");
  EXPECT_TRUE(reg.check_support(PluginKind::kQuantization, "int4", {model, DeviceKind::kCuda, KvFormat{}, plain}).empty());
  EXPECT_TRUE(reg.check_support(PluginKind::kQuantization, "int4", {model, DeviceKind::kCpu, KvFormat{}, off}).empty());
  const auto reasons = reg.check_support(PluginKind::kQuantization, "int4", {model, DeviceKind::kCuda, KvFormat{}, off});
  ASSERT_EQ(reasons.size(), 1u);
  EXPECT_NE(reasons[0].find("q4_blocks = false changes only the CPU kernels"), std::string::npos) << reasons[0];
#else
  GTEST_SKIP() << "this build has no CUDA: the int4 plugin has no cuda implementation to refuse it";
#endif
}

// int16 activations run on the panels where in is a multiple of 32 and the build has VNNI, else as
// the int16 blocks' values through the fp32 kernel (near the fp32 activations, not them, either
// way), and take the exact fp32 kernel where in is not (the blocks need whole 32-blocks).
TEST(Int4Quantization, Int16ActivationsTakeThePanelsWhereTheBlocksFit) {
  CpuDevice device(2);
  for (int in : {96, 100}) {
    const int out = 20, n = 3;
    const std::vector<float> w = gaussian(static_cast<std::size_t>(out) * in, 31, 0.05);
    const std::vector<float> x = gaussian(static_cast<std::size_t>(n) * in, 32, 1.0);
    Int4Linear int16(w, out, in, 32, false), fp32(w, out, in, 32, false);
    int16.set_activations(Int4Activations::kInt16);
    EXPECT_EQ(int16.holds_panels(), in % 32 == 0 && cpu::int4_panels_available(in, 32)) << in;
    const std::vector<float> a = run(int16, x, n), b = run(fp32, x, n);
    if (in % 32 == 0) {  // int16 blocks: on the panels, or (no VNNI) their values through the fp32 kernel
      EXPECT_NE(a, b) << in;
      for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-3 * (1.0 + std::fabs(b[i]))) << in;
    } else {
      EXPECT_EQ(a, b) << in;  // rows without whole blocks: fp32
    }
    // fp32 again: the rows come back (the exact row kernel, bit for bit), or on AVX2 builds without
    // AVX-512 the panels stay for gemm_int4_panels_f32 (exact activations, its own summation order).
    int16.set_activations(Int4Activations::kFp32);
    const bool f32_panels = cpu::int4_panels_f32_available(in, 32);
    EXPECT_EQ(int16.holds_panels(), f32_panels) << in;
    const std::vector<float> c = run(int16, x, n);
    if (f32_panels) {
      for (std::size_t i = 0; i < c.size(); ++i) EXPECT_NEAR(c[i], b[i], 1e-5 * (1.0 + std::fabs(b[i]))) << in;
    } else {
      EXPECT_EQ(c, b) << in;
    }
  }
}

// activations = "int16" is a CPU kernel: int4, gptq and awq refuse it on cuda, naming it, and take it
// on the CPU.
TEST(Int4Quantization, Int16ActivationsAreRefusedOnCuda) {
#if INFERLAB_HAVE_CUDA
  Registry reg({testing::plugin_dir()});
  const ModelConfig model{.name = "m", .dim = 64, .hidden_dim = 128, .n_layers = 1, .n_heads = 2, .n_kv_heads = 2,
                          .vocab_size = 4};
  for (const char* plugin : {"int4", "gptq", "awq"}) {
    const Params p = reg.resolve(PluginKind::kQuantization, plugin, {{"activations", ParamValue(std::string("int16"))}}, "t");
    EXPECT_TRUE(reg.check_support(PluginKind::kQuantization, plugin, {model, DeviceKind::kCpu, KvFormat{}, p}).empty());
    const auto reasons = reg.check_support(PluginKind::kQuantization, plugin, {model, DeviceKind::kCuda, KvFormat{}, p});
    ASSERT_EQ(reasons.size(), 1u) << plugin;
    EXPECT_NE(reasons[0].find("activations = \"int16\" is a CPU kernel"), std::string::npos) << reasons[0];
  }
#else
  GTEST_SKIP() << "this build has no CUDA: no cuda implementation to refuse it";
#endif
}

// Fast by default: int4, gptq and awq resolve activations = "auto", which is the W4A8 path (the
// same bits as asking for "int8") where group_size is a multiple of 32 and the weight-only path
// (the bits of "fp32") otherwise; bad values name the allowed ones.
TEST(Int4Quantization, DefaultActivationsAreInt8WhereTheGroupsAllowIt) {
  EXPECT_EQ(int4_activations("auto", 32), Int4Activations::kInt8);
  EXPECT_EQ(int4_activations("auto", 128), Int4Activations::kInt8);
  EXPECT_EQ(int4_activations("auto", 16), Int4Activations::kFp32);
  EXPECT_EQ(int4_activations("fp32", 64), Int4Activations::kFp32);
  EXPECT_EQ(int4_activations("int16", 64), Int4Activations::kInt16);
  EXPECT_EQ(int4_activations("int8", 64), Int4Activations::kInt8);
  try {
    int4_activations("f16", 32);
    ADD_FAILURE() << "f16 accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("allowed: auto, fp32, int16, int8"), std::string::npos) << e.what();
  }
  Registry reg({testing::plugin_dir()});
  CpuDevice device(2);
  const int out = 40, in = 128, n = 3;
  const std::vector<float> w = gaussian(static_cast<std::size_t>(out) * in, 21, 0.05);
  const std::vector<float> x = gaussian(static_cast<std::size_t>(n) * in, 22, 1.0);
  auto forward = [&](const std::string& plugin, std::int64_t gs, const char* acts) {
    std::map<std::string, ParamValue> given = {{"group_size", ParamValue(gs)}};
    if (acts != nullptr) given["activations"] = ParamValue(std::string(acts));
    const Params params = reg.resolve(PluginKind::kQuantization, plugin, given, "t");
    if (acts == nullptr) {
      EXPECT_EQ(params.get_string("activations"), "auto") << plugin;
    }
    auto q = reg.create_quantization(plugin, params, device);
    return run(*q->make_linear("layers.0.wq", w, out, in), x, n);
  };
  for (const char* plugin : {"int4", "gptq", "awq"})
    for (std::int64_t gs : {32, 64, 16}) {
      SCOPED_TRACE(std::string(plugin) + " group_size " + std::to_string(gs));
      const std::vector<float> by_default = forward(plugin, gs, nullptr);
      const std::vector<float> fp32 = forward(plugin, gs, "fp32");
      if (gs % 32 == 0) {
        // int16 blocks: near the fp32 activations (2^-16 of each block's largest), not them.
        const std::vector<float> int16 = forward(plugin, gs, "int16");
        EXPECT_NE(int16, fp32);
        for (std::size_t i = 0; i < fp32.size(); ++i) EXPECT_NEAR(int16[i], fp32[i], 1e-3 * (1.0 + std::fabs(fp32[i])));
        EXPECT_EQ(by_default, forward(plugin, gs, "int8"));
        EXPECT_NE(by_default, fp32);
      } else {
        EXPECT_EQ(by_default, fp32);
      }
    }
}

}  // namespace
}  // namespace inferlab
