// Host-side (runs without a GPU): in a CUDA build every attention and quantization plugin that
// has a CUDA path declares the cuda device kind, so the registry lets experiments and the
// conformance suites run them there; in a CPU-only build none claims it.
#include <algorithm>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "inferlab/plugin/registry.h"
#include "test_support.h"

namespace inferlab::testing {
namespace {

bool lists(const PluginDescriptor& d, DeviceKind kind) {
  return d.devices.count(kind) == 1;
}

// The plugins with kernels in kernels/cuda (quantization/none and the half formats are
// cuda-core's; they are checked by its own tests).
const std::set<std::string> kAttention = {"naive", "flash", "split_k"};
const std::set<std::string> kQuantization = {"int8", "int4", "gptq", "awq", "smoothquant", "gguf"};

TEST(CudaPluginDevices, AttentionAndQuantizationPluginsDeclareCudaExactlyWhenBuiltWithIt) {
  const Registry registry({plugin_dir()});
  int seen = 0;
  for (const auto& [kind, names] : {std::pair{PluginKind::kAttention, kAttention},
                                    std::pair{PluginKind::kQuantization, kQuantization}}) {
    for (const std::string& name : names) {
      const PluginDescriptor& d = registry.find(kind, name);
      ++seen;
      EXPECT_TRUE(lists(d, DeviceKind::kCpu)) << name;
#if INFERLAB_HAVE_CUDA
      EXPECT_TRUE(lists(d, DeviceKind::kCuda)) << name << " has a CUDA path but does not declare cuda";
#else
      EXPECT_FALSE(lists(d, DeviceKind::kCuda)) << name << " declares cuda in a build without CUDA";
#endif
    }
  }
  EXPECT_EQ(seen, 9);
}

}  // namespace
}  // namespace inferlab::testing
