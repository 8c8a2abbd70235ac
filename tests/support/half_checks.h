// Checks shared by the quantization/f16 and quantization/bf16 tests: a HalfLinear on `device`
// against the float64 reference, with the error bound its format allows.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <tuple>
#include <vector>

#include <string>

#include "inferlab/device/device.h"
#include "inferlab/error.h"
#include "plugins/common/quantization/half_linear.h"
#include "inferlab/plugin/registry.h"
#include "inferlab/support/rng.h"
#include "inferlab/sim/sim.h"
#include "test_support.h"
#include "kernels/ref/half.h"
#include "kernels/ref/ops.h"
#include "plugins/common/quantization/half_linear.h"
#if INFERLAB_HAVE_CUDA
#include "plugins/common/quantization/half_linear_cuda.h"
#endif

namespace inferlab::testing {

// Unit roundoff of the format: 2^-11 (f16, 10 stored mantissa bits), 2^-8 (bf16, 7).
inline double half_unit_roundoff(cpu::HalfFormat f) { return f == cpu::HalfFormat::kF16 ? 0x1p-11 : 0x1p-8; }

// Runs y = x W^T through HalfLinear on `device` for awkward shapes and checks, element-wise,
// |y - x W^T| <= u_total · Σ_k |x_k W_k| + 1e-6 where u_total = u (weights) on the CPU and 2u
// (weights and activations rounded) on CUDA; the fp32 accumulation adds far less than that.
// The CPU's AMX modes (n = 17 runs on the tiles where they run): kSplit keeps the CPU's u
// (x to about 2^-16), kBf16 rounds x and (for f16) the weights to bf16: 2 · 2^-8.
inline void check_half_linear(cpu::HalfFormat format, Device& device, HalfAmx amx = HalfAmx::kOff) {
  const double u = device.kind() == DeviceKind::kCuda ? half_unit_roundoff(format) * 2.02
                   : amx == HalfAmx::kBf16           ? half_unit_roundoff(cpu::HalfFormat::kBF16) * 2.02
                   : amx == HalfAmx::kSplit          ? half_unit_roundoff(format) * 1.05
                                                     : half_unit_roundoff(format) * 1.01;
  for (auto [n, out, in] : {std::tuple{1, 3, 129}, std::tuple{3, 37, 67}, std::tuple{17, 129, 256}}) {
    Rng rng(static_cast<std::uint64_t>(n * 1000 + out));
    std::vector<float> x(static_cast<std::size_t>(n) * in), w(static_cast<std::size_t>(out) * in);
    for (float& v : x) v = static_cast<float>(rng.normal());
    for (float& v : w) v = static_cast<float>(0.1 * rng.normal());
    std::unique_ptr<Quantization> quant = std::make_unique<HalfQuantization>(format, device, amx);
#if INFERLAB_HAVE_CUDA
    if (device.kind() == DeviceKind::kCuda) quant = std::make_unique<HalfCudaQuantization>(format, device);
#endif
    auto linear = quant->make_linear("layers.0.w1", w, out, in);
    EXPECT_EQ(linear->weight_bytes(), 2u * static_cast<std::uint64_t>(out) * in);
    const std::size_t ny = static_cast<std::size_t>(n) * out;
    std::vector<float> got(ny, std::nanf(""));
    Buffer dx(device, x.size() * 4), dy(device, ny * 4);
    device.copy_to_device(dx.data(), x.data(), x.size() * 4);
    std::vector<float> poison(ny, std::nanf(""));
    device.copy_to_device(dy.data(), poison.data(), ny * 4);
    linear->forward(dx.as<float>(), dy.as<float>(), n, device);
    device.copy_to_host(got.data(), dy.data(), ny * 4);
    for (int r = 0; r < n; ++r)
      for (int c = 0; c < out; ++c) {
        double exact = 0, mag = 0;
        for (int k = 0; k < in; ++k) {
          const double p = static_cast<double>(x[static_cast<std::size_t>(r) * in + k]) * w[static_cast<std::size_t>(c) * in + k];
          exact += p;
          mag += std::fabs(p);
        }
        const float g = got[static_cast<std::size_t>(r) * out + c];
        ASSERT_FALSE(std::isnan(g)) << "n=" << n << " r=" << r << " c=" << c;
        EXPECT_LE(std::fabs(g - exact), u * mag + 1e-6) << "n=" << n << " out=" << out << " in=" << in << " r=" << r
                                                        << " c=" << c;
      }
  }
}

// The stored weights are exactly the format's rounding of the given ones, and forward equals
// ref::matmul over them: only fp32 accumulation order differs, so 1e-5 relative to the row's
// magnitude.
inline void check_half_linear_matches_reference(cpu::HalfFormat format, Device& device) {
  const int n = 3, out = 37, in = 129;
  Rng rng(11);
  std::vector<float> x(n * in), w(out * in);
  for (float& v : x) v = static_cast<float>(rng.normal());
  for (float& v : w) v = static_cast<float>(0.1 * rng.normal());
  HalfLinear linear(w, out, in, format, device);
  const std::vector<float> stored = linear.dequantized();
  int changed = 0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    const float want = format == cpu::HalfFormat::kF16 ? ref::f16_to_float(ref::float_to_f16(w[i]))
                                                       : ref::bf16_to_float(ref::float_to_bf16(w[i]));
    ASSERT_EQ(stored[i], want) << i;
    changed += stored[i] != w[i];
  }
  EXPECT_GT(changed, static_cast<int>(w.size()) / 2);  // the weights really were rounded
  std::vector<float> want(n * out), got(n * out, std::nanf(""));
  ref::matmul(x.data(), stored.data(), want.data(), n, out, in);
  linear.forward(x.data(), got.data(), n, device);
  for (int i = 0; i < n * out; ++i) EXPECT_NEAR(got[i], want[i], 1e-5f * (1.0f + std::fabs(want[i]))) << i;
}

// A weight whose size is not out x in, and a HalfLinear on the simulated device, are Errors.
inline void check_half_rejects_mismatched_weight_and_wrong_device(cpu::HalfFormat format) {
  CpuDevice device(2);
  HalfQuantization quant(format, device);
  EXPECT_THROW(quant.make_linear("w", std::vector<float>(10), 3, 4), Error);
  SimDevice sim;
  EXPECT_THROW(HalfLinear(std::vector<float>(12, 1.0f), 3, 4, format, sim), Error);
}

// The plugin `name` as the registry resolves it: `amx` defaults to `default_amx`, an unknown
// `amx` value is an Error, and the quantization it builds stores 2 bytes a weight.
inline void check_half_plugin_params(Registry& registry, const std::string& name, const std::string& default_amx) {
  CpuDevice device(2);
  const Params params = registry.resolve(PluginKind::kQuantization, name, {}, "test");
  EXPECT_EQ(params.get_string("amx"), default_amx);
  EXPECT_THROW(registry.resolve(PluginKind::kQuantization, name, {{"amx", ParamValue(std::string("on"))}}, "test"),
               Error);
  auto quant = registry.create_quantization(name, params, device);
  EXPECT_EQ(quant->make_linear("classifier", std::vector<float>(12, 0.5f), 3, 4)->weight_bytes(), 24u);
#if INFERLAB_HAVE_CUDA
  // amx picks CPU kernels: on cuda any other value than the default is refused, naming it.
  const ModelConfig model{.name = "m", .dim = 8, .hidden_dim = 16, .n_layers = 1, .n_heads = 2, .n_kv_heads = 2,
                          .vocab_size = 4};
  const std::string other = default_amx == "off" ? "split" : "off";
  const Params off = registry.resolve(PluginKind::kQuantization, name, {{"amx", ParamValue(other)}}, "test");
  EXPECT_TRUE(registry.check_support(PluginKind::kQuantization, name, {model, DeviceKind::kCpu, KvFormat{}, off}).empty());
  EXPECT_TRUE(registry.check_support(PluginKind::kQuantization, name, {model, DeviceKind::kCuda, KvFormat{}, params}).empty());
  const auto reasons = registry.check_support(PluginKind::kQuantization, name, {model, DeviceKind::kCuda, KvFormat{}, off});
  ASSERT_EQ(reasons.size(), 1u);
  EXPECT_NE(reasons[0].find("amx = \"" + other + "\" changes only the CPU kernels"), std::string::npos) << reasons[0];
#endif
}

}  // namespace inferlab::testing

// The tests both formats' plugins run, defined in the including test file as Suite.<Name>
// (BF16Linear, F16Linear) for the cpu::HalfFormat `format`: the rounding bound on the CPU
// (plain, AMX split, AMX bf16 with the two-operand bf16 bound) and on CUDA, the stored weights
// against the reference, and the errors of a mismatched weight and of the simulated device.
#define INFERLAB_HALF_LINEAR_TESTS(Suite, format)                                                    \
  TEST(Suite, CpuWithinTheFormatsRoundingBound) {                                                   \
    ::inferlab::CpuDevice device(2);                                                                \
    ::inferlab::testing::check_half_linear(format, device);                                         \
  }                                                                                                 \
  TEST(Suite, CpuMatchesReferenceOnTheStoredWeights) {                                              \
    ::inferlab::CpuDevice device(2);                                                                \
    ::inferlab::testing::check_half_linear_matches_reference(format, device);                       \
  }                                                                                                 \
  /* The AMX prefill modes (n = 17 of the shapes runs on the tiles where they run; elsewhere the */ \
  /* panels, which meet the same bounds). */                                                        \
  TEST(Suite, CpuAmxSplitWithinTheFormatsRoundingBound) {                                           \
    ::inferlab::CpuDevice device(2);                                                                \
    ::inferlab::testing::check_half_linear(format, device, ::inferlab::HalfAmx::kSplit);            \
  }                                                                                                 \
  TEST(Suite, CpuAmxBf16WithinTheTwoOperandBf16Bound) {                                             \
    ::inferlab::CpuDevice device(2);                                                                \
    ::inferlab::testing::check_half_linear(format, device, ::inferlab::HalfAmx::kBf16);             \
  }                                                                                                 \
  TEST(Suite, CudaWithinTheFormatsRoundingBound) {                                                  \
    INFERLAB_REQUIRE_CUDA();                                                                        \
    auto device = ::inferlab::make_device(::inferlab::DeviceKind::kCuda, 0);                        \
    ::inferlab::testing::check_half_linear(format, *device);                                        \
  }                                                                                                 \
  TEST(Suite, RejectsMismatchedWeightAndWrongDevice) {                                              \
    ::inferlab::testing::check_half_rejects_mismatched_weight_and_wrong_device(format);             \
  }
