// Plugin descriptor for quantization/none.
#include "inferlab/plugin.h"
#include "none.h"

namespace {

inferlab::PluginDescriptor describe() {
  using namespace inferlab;
  using namespace inferlab::plugins;
  PluginDescriptor d;
  d.kind = PluginKind::kQuantization;
  d.name = "none";
  d.version = "1.0.0";
  d.summary = "No quantization: fp32 weights, fp32 matmul, fp32 KV cache";
  d.make_quantization = [](const Params&) -> std::unique_ptr<Quantization> {
    return std::make_unique<NoQuantization>();
  };
  return d;
}

}  // namespace

INFERLAB_PLUGIN(describe)
