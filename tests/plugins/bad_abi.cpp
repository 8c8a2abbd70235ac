// A plugin built against a different ABI version: the registry must refuse it before
// touching its descriptor.
#include "inferlab/plugin/plugin.h"

namespace {
int bad_abi() { return ::inferlab::kPluginAbiVersion + 998; }
const ::inferlab::PluginDescriptor* bad_descriptor() { return nullptr; }  // never called
}  // namespace
BOOST_DLL_ALIAS(bad_abi, inferlab_plugin_abi)
BOOST_DLL_ALIAS(bad_descriptor, inferlab_plugin_descriptor)
