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

constexpr cpu::HalfFormat kFormat = cpu::HalfFormat::kF16;

TEST(F16Linear, CpuWithinTheFormatsRoundingBound) {
  CpuDevice device(2);
  testing::check_half_linear(kFormat, device);
}

TEST(F16Linear, CpuMatchesReferenceOnTheStoredWeights) {
  CpuDevice device(2);
  testing::check_half_linear_matches_reference(kFormat, device);
}

TEST(F16Linear, CudaWithinTheFormatsRoundingBound) {
  INFERLAB_REQUIRE_CUDA();
  auto device = make_device(DeviceKind::kCuda, 0);
  testing::check_half_linear(kFormat, *device);
}

TEST(F16Linear, RejectsMismatchedWeightAndWrongDevice) {
  CpuDevice device(2);
  HalfQuantization quant(kFormat, device);
  EXPECT_THROW(quant.make_linear("w", std::vector<float>(10), 3, 4), Error);
  SimDevice sim;
  EXPECT_THROW(HalfLinear(std::vector<float>(12, 1.0f), 3, 4, kFormat, sim), Error);
}

TEST(F16Plugin, DescribesCpuAndCuda) {
  Registry registry({testing::plugin_dir()});
  const PluginDescriptor& d = registry.find(PluginKind::kQuantization, "f16");
  EXPECT_EQ(d.devices, (std::vector<DeviceKind>{DeviceKind::kCpu, DeviceKind::kCuda}));
  CpuDevice device(2);
  const Params params = registry.resolve(PluginKind::kQuantization, "f16", {}, "test");
  auto quant = registry.create_quantization("f16", params, device);
  EXPECT_EQ(quant->make_linear("classifier", std::vector<float>(12, 0.5f), 3, 4)->weight_bytes(), 24u);
}

}  // namespace
}  // namespace inferlab
