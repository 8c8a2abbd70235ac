// The conformance suites' parameter: one registered plugin, one device kind it declares and one
// parameter setting. Cases are listed from the Registry over the build's plugin directory, so a
// new plugin is covered without editing any test.
#pragma once
#include <map>
#include <memory>
#include <ostream>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "inferlab/device/device.h"
#include "inferlab/model/model_config.h"
#include "inferlab/plugin/params.h"
#include "inferlab/plugin/plugin.h"
#include "inferlab/plugin/registry.h"

namespace inferlab::testing {

struct PluginCase {
  PluginKind kind = PluginKind::kAttention;
  std::string plugin;
  DeviceKind device = DeviceKind::kCpu;
  // "default", or "<param>_<value>" for a setting that moves one parameter off its default.
  std::string setting = "default";
  std::map<std::string, ParamValue> given;  // the parameters the setting gives (empty = defaults)
};

// GoogleTest prints the parameter in failure messages: "attention/flash on cpu, tile = 1".
void PrintTo(const PluginCase& c, std::ostream* os);

// The plugin libraries under test, named on test_conformance's command line (what `inferlab
// conformance LIB.so...` runs): the suites are instantiated for their plugins only. Set before
// GoogleTest is initialised (which is when the suites list their cases); returns "" or, for a
// library that does not load as a plugin, the registry's reason. Unset: every built-in plugin.
std::string set_plugins_under_test(const std::vector<std::string>& libraries);
const std::vector<std::string>& plugins_under_test();
// "attention/onepass" for each plugin those libraries hold.
const std::set<std::string>& plugin_labels_under_test();

// The registry over the plugins under test and the built-in plugins' folder (whose plugins the
// suites run beside the one under test); with none named, over $INFERLAB_PLUGIN_PATH's folders
// and the built-ins, all under test. Loaded once for the whole binary (objects it creates keep
// their libraries loaded).
const Registry& conformance_registry();
// The built-in plugins' folder: inferlab/ beside the loaded libinferlab_core (build/lib/inferlab,
// <prefix>/lib/inferlab), the last entry of the registry's default search path.
std::string builtin_plugin_dir();

// Every plugin of `kind` × every device kind it declares × its default parameters and, for
// each declared parameter, its range's min and max (numbers), the other value (bools) and every
// other choice (strings). Settings equal to the default are not repeated.
std::vector<PluginCase> plugin_cases(PluginKind kind);
// As plugin_cases, defaults only.
std::vector<PluginCase> default_plugin_cases(PluginKind kind);

// "flash_cpu_tile_1": a GoogleTest-safe name for INSTANTIATE_TEST_SUITE_P.
std::string case_name(const ::testing::TestParamInfo<PluginCase>& info);

// The case's parameters resolved through the registry (defaults filled).
Params resolve_case(const PluginCase& c);
// Reasons the registry (device, its supports()) refuses the case on `model`; empty = runs.
std::vector<std::string> refusals(const PluginCase& c, const ModelConfig& model);

// A device of the case's kind, or null with `why` set when this build or machine has none.
std::unique_ptr<Device> open_device(DeviceKind kind, std::string& why);

// The attention a suite runs beside the plugin under test on `device`: kernels/ref's paged
// attention on the CPU (it reads host memory), the registry's 'naive' plugin on CUDA (K/V in
// device memory; itself held to kernels/ref by the attention conformance suite).
std::shared_ptr<Attention> reference_attention_on(Device& device);

}  // namespace inferlab::testing

// Skips the test when the registry refuses the case on `model`, naming the reasons.
#define INFERLAB_SKIP_IF_REFUSED(c, model)                                                  \
  do {                                                                                      \
    const auto reasons_ = ::inferlab::testing::refusals(c, model);                          \
    if (!reasons_.empty()) {                                                                \
      std::string joined_;                                                                  \
      for (const auto& r_ : reasons_) joined_ += (joined_.empty() ? "" : "; ") + r_;        \
      GTEST_SKIP() << (c).plugin << " (" << (c).setting << ") refuses this problem: " << joined_; \
    }                                                                                       \
  } while (0)
