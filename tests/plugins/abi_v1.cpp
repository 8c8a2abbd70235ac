// A plugin as built against ABI version 1 (before the device seam: factories took Params and
// Linear/Attention took a ThreadPool&). The registry must refuse it by its version, with a
// message that says to rebuild, before reading its descriptor.
#include "inferlab/plugin/plugin.h"

namespace {
int abi_v1() { return 1; }
const ::inferlab::PluginDescriptor* v1_descriptor() { return nullptr; }  // never called
}  // namespace
BOOST_DLL_ALIAS(abi_v1, inferlab_plugin_abi)
BOOST_DLL_ALIAS(v1_descriptor, inferlab_plugin_descriptor)
