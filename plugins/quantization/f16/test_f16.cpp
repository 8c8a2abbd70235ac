#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "half_checks.h"
#include "kernels/cpu/amx.h"
#include "inferlab/error.h"
#include "plugins/common/quantization/half_linear.h"
#include "inferlab/plugin/registry.h"
#include "inferlab/support/rng.h"
#include "inferlab/sim/sim.h"
#include "test_support.h"

namespace inferlab {
namespace {

constexpr cpu::HalfFormat kFormat = cpu::HalfFormat::kF16;

INFERLAB_HALF_LINEAR_TESTS(F16Linear, kFormat)

// Why amx = "bf16" is not f16's default: rounding weights and activations to bf16 leaves f16's
// CPU bound (2^-11 of Σ|x·w|) on some output of a 32-row prefill (4 inputs: little averaging of
// the roundings), while "split" stays inside it.
TEST(F16Linear, CpuAmxBf16LeavesF16sBoundSplitDoesNot) {
  if (!cpu::amx_bf16_enabled()) GTEST_SKIP() << "AMX bf16 tiles not running here";
  CpuDevice device(2);
  const int n = 32, out = 64, in = 4;
  Rng rng(5);
  std::vector<float> x(n * in), w(out * in);
  for (float& v : x) v = static_cast<float>(rng.normal());
  for (float& v : w) v = static_cast<float>(0.1 * rng.normal());
  double worst[2] = {0, 0};  // max |y - x·W_f16| / Σ|x·w| for split, bf16
  for (int m = 0; m < 2; ++m) {
    const HalfLinear linear(w, out, in, kFormat, device, m == 0 ? HalfAmx::kSplit : HalfAmx::kBf16);
    ASSERT_TRUE(linear.uses_amx(n));
    const std::vector<float> stored = linear.dequantized();
    std::vector<float> y(n * out);
    linear.forward(x.data(), y.data(), n, device);
    for (int r = 0; r < n; ++r)
      for (int c = 0; c < out; ++c) {
        double exact = 0, mag = 0;
        for (int k = 0; k < in; ++k) {
          exact += static_cast<double>(x[r * in + k]) * stored[c * in + k];
          mag += std::fabs(static_cast<double>(x[r * in + k]) * stored[c * in + k]);
        }
        worst[m] = std::max(worst[m], std::fabs(y[r * out + c] - exact) / mag);
      }
  }
  EXPECT_LT(worst[0], 0x1p-11);
  EXPECT_GT(worst[1], 0x1p-11);
}

TEST(F16Plugin, DescribesCpuAndCudaWhereBuilt) {
  Registry registry({testing::plugin_dir()});
  const PluginDescriptor& d = registry.find(PluginKind::kQuantization, "f16");
#if INFERLAB_HAVE_CUDA
  EXPECT_EQ(d.device_names(), "cpu, cuda");
#else
  EXPECT_EQ(d.device_names(), "cpu");  // a build without CUDA (the sanitizer pass) has no cuda implementation
#endif
  testing::check_half_plugin_params(registry, "f16", "split");  // the default: AMX prefill within the format's bound
}

}  // namespace
}  // namespace inferlab
