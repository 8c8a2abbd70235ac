// The conformance suites are only as wide as the registry's view of the built-in plugins'
// folder: every library there must load, and every kind must have at least one plugin.
#include <gtest/gtest.h>

#include "plugin_cases.h"
#include "test_support.h"

namespace inferlab::testing {
namespace {

TEST(ConformancePluginDiscovery, EveryLibraryLoadsAndEveryKindHasAPlugin) {
  if (!plugins_under_test().empty()) GTEST_SKIP() << "run on named plugin libraries: the built-ins are not under test";
  const Registry& reg = conformance_registry();
  for (const PluginLoadRecord& r : reg.load_log()) EXPECT_TRUE(r.ok) << r.path << ": " << r.message;
  for (PluginKind kind :
       {PluginKind::kAttention, PluginKind::kQuantization, PluginKind::kScheduling, PluginKind::kDecoding}) {
    EXPECT_FALSE(reg.list(kind).empty()) << "no " << plugin_kind_name(kind) << " plugin in " << builtin_plugin_dir();
    for (const PluginDescriptor* d : reg.list(kind)) {
      EXPECT_FALSE(d->devices.empty()) << d->name << " declares no device";
      EXPECT_NO_THROW(resolve_case(PluginCase{kind, d->name, DeviceKind::kCpu, "default", {}})) << d->name;
    }
  }
}

}  // namespace
}  // namespace inferlab::testing
