// Plugin descriptor for scheduling/continuous.
#include "continuous.h"
#include "inferlab/plugin.h"

namespace {

inferlab::PluginDescriptor describe() {
  using namespace inferlab;
  using namespace inferlab::plugins;
  PluginDescriptor d;
  d.kind = PluginKind::kScheduling;
  d.name = "continuous";
  d.version = "1.0.0";
  d.summary =
      "Continuous (iteration-level) batching under a token budget, chunked prefill, "
      "preemption by recompute";
  d.params = ContinuousScheduler::param_specs();
  d.make_scheduler = [](const Params& p) -> std::unique_ptr<Scheduler> {
    return std::make_unique<ContinuousScheduler>(ContinuousScheduler::from_params(p));
  };
  return d;
}

}  // namespace

INFERLAB_PLUGIN(describe)
