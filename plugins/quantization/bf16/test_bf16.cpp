#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "half_checks.h"
#include "inferlab/error.h"
#include "inferlab/plugin/registry.h"
#include "inferlab/sim/sim.h"
#include "plugins/common/quantization/half_linear.h"
#include "test_support.h"

namespace inferlab {
namespace {

constexpr cpu::HalfFormat kFormat = cpu::HalfFormat::kBF16;

TEST(BF16Linear, CpuWithinTheFormatsRoundingBound) {
  CpuDevice device(2);
  testing::check_half_linear(kFormat, device);
}

TEST(BF16Linear, CpuMatchesReferenceOnTheStoredWeights) {
  CpuDevice device(2);
  testing::check_half_linear_matches_reference(kFormat, device);
}

// The AMX prefill modes (n = 17 of the shapes runs on the tiles where they run; elsewhere the
// panels, which meet the same bounds).
TEST(BF16Linear, CpuAmxSplitWithinTheFormatsRoundingBound) {
  CpuDevice device(2);
  testing::check_half_linear(kFormat, device, HalfAmx::kSplit);
}

TEST(BF16Linear, CpuAmxBf16WithinTheTwoOperandBf16Bound) {
  CpuDevice device(2);
  testing::check_half_linear(kFormat, device, HalfAmx::kBf16);
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
  EXPECT_EQ(d.device_names(), "cpu, cuda");
  CpuDevice device(2);
  const Params params = registry.resolve(PluginKind::kQuantization, "bf16", {}, "test");
  EXPECT_EQ(params.get_string("amx"), "bf16");  // the default: both operands bf16, the format's own rounding
  EXPECT_THROW(registry.resolve(PluginKind::kQuantization, "bf16", {{"amx", ParamValue(std::string("on"))}}, "test"),
               Error);
  auto quant = registry.create_quantization("bf16", params, device);
  EXPECT_EQ(quant->make_linear("classifier", std::vector<float>(12, 0.5f), 3, 4)->weight_bytes(), 24u);
}

}  // namespace
}  // namespace inferlab
