// Plugin descriptor for quantization/int8.
#include "inferlab/plugin.h"
#include "int8.h"

namespace {

inferlab::PluginDescriptor describe() {
  using namespace inferlab;
  using namespace inferlab::plugins;
  PluginDescriptor d;
  d.kind = PluginKind::kQuantization;
  d.name = "int8";
  d.version = "1.0.0";
  d.summary = "Weight-only int8, symmetric per output channel; fp32 activations and KV cache";
  d.make_quantization = [](const PluginContext&) -> std::unique_ptr<Quantization> {
    return std::make_unique<Int8Quantization>();
  };
  return d;
}

}  // namespace

INFERLAB_PLUGIN(describe)
