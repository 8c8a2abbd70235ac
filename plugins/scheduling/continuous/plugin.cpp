// Plugin descriptor for scheduling/continuous.
#include "inferlab/continuous_scheduler.h"
#include "inferlab/plugin.h"

namespace {

inferlab::PluginDescriptor describe() {
  using namespace inferlab;
  PluginDescriptor d;
  d.kind = PluginKind::kScheduling;
  d.name = "continuous";
  d.version = "1.0.0";
  d.summary =
      "Continuous (iteration-level) batching under a token budget, chunked prefill, "
      "preemption by recompute";
  d.params = ContinuousScheduler::param_specs();
  d.make_scheduler = [](const PluginContext& ctx) -> std::unique_ptr<Scheduler> {
    return std::make_unique<ContinuousScheduler>(ContinuousScheduler::from_params(ctx.params));
  };
  return d;
}

}  // namespace

INFERLAB_PLUGIN(describe)
