#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "half_checks.h"
#include "inferlab/error.h"
#include "inferlab/half_linear.h"
#include "inferlab/registry.h"
#include "inferlab/sim.h"
#include "test_support.h"

namespace inferlab {
namespace {

constexpr cpu::HalfFormat kFormat = cpu::HalfFormat::kBF16;

TEST(BF16Linear, CpuWithinTheFormatsRoundingBound) {
  CpuDevice device(2);
  testing::check_half_linear(kFormat, device);
}

TEST(BF16Linear, CpuMatchesReferenceOnTheStoredWeights) {
  // Against ref::matmul over the weights the linear actually stores: only fp32 accumulation
  // order differs, so 1e-5 relative to the row's magnitude.
  CpuDevice device(2);
  const int n = 3, out = 37, in = 129;
  Rng rng(11);
  std::vector<float> x(n * in), w(out * in);
  for (float& v : x) v = static_cast<float>(rng.normal());
  for (float& v : w) v = static_cast<float>(0.1 * rng.normal());
  HalfLinear linear(w, out, in, kFormat, device);
  const std::vector<float> stored = linear.dequantized();
  int changed = 0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    const float want = kFormat == cpu::HalfFormat::kF16 ? ref::f16_to_float(ref::float_to_f16(w[i]))
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

TEST(BF16Linear, CudaWithinTheFormatsRoundingBound) {
  INFERLAB_REQUIRE_CUDA();
  auto device = make_device(DeviceKind::kCuda, 0);
  testing::check_half_linear(kFormat, *device);
}

TEST(BF16Linear, RejectsMismatchedWeightAndWrongDevice) {
  CpuDevice device(2);
  HalfQuantization quant(kFormat, device);
  EXPECT_THROW(quant.make_linear("w", std::vector<float>(10), 3, 4), Error);
  SimDevice sim;
  EXPECT_THROW(HalfLinear(std::vector<float>(12, 1.0f), 3, 4, kFormat, sim), Error);
}

TEST(BF16Plugin, DescribesCpuAndCuda) {
  Registry registry({testing::plugin_dir()});
  const PluginDescriptor& d = registry.find(PluginKind::kQuantization, "bf16");
  EXPECT_EQ(d.devices, (std::vector<DeviceKind>{DeviceKind::kCpu, DeviceKind::kCuda}));
  CpuDevice device(2);
  const Params params = registry.resolve(PluginKind::kQuantization, "bf16", {}, "test");
  auto quant = registry.create_quantization("bf16", params, device);
  EXPECT_EQ(quant->make_linear("classifier", std::vector<float>(12, 0.5f), 3, 4)->weight_bytes(), 24u);
}

}  // namespace
}  // namespace inferlab
