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

INFERLAB_HALF_LINEAR_TESTS(BF16Linear, kFormat)

TEST(BF16Plugin, DescribesCpuAndCudaWhereBuilt) {
  Registry registry({testing::plugin_dir()});
  const PluginDescriptor& d = registry.find(PluginKind::kQuantization, "bf16");
#if INFERLAB_HAVE_CUDA
  EXPECT_EQ(d.device_names(), "cpu, cuda");
#else
  EXPECT_EQ(d.device_names(), "cpu");  // a build without CUDA (the sanitizer pass) has no cuda implementation
#endif
  testing::check_half_plugin_params(registry, "bf16", "bf16");  // the default: both operands bf16, the format's own rounding
}

}  // namespace
}  // namespace inferlab
