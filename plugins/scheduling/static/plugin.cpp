// Plugin descriptor for scheduling/static.
#include "inferlab/plugin/plugin.h"
#include "static.h"

namespace {

inferlab::PluginDescriptor describe() {
  using namespace inferlab;
  using namespace inferlab::plugins;
  PluginDescriptor d;
  d.kind = PluginKind::kScheduling;
  d.name = "static";
  d.version = "1.0.0";
  d.summary = "Static batching: admit a batch when idle, run it to completion, never preempt";
  d.params = {
      {"max_batch", ParamType::kInt, std::int64_t{8}, 1.0, 4096.0, {},
       "Most requests admitted into one batch"},
  };
  d.devices = any_device([](const PluginContext& ctx) -> std::unique_ptr<Scheduler> {
    return std::make_unique<StaticScheduler>(static_cast<int>(ctx.params.get_int("max_batch")));
  });
  return d;
}

}  // namespace

INFERLAB_PLUGIN(describe)
