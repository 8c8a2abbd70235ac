// Plugin descriptor for scheduling/continuous.
#include "inferlab/plugin/plugin.h"
#include "plugins/common/scheduling/continuous_scheduler.h"

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
  d.params.push_back({"prefill_first", ParamType::kBool, false, std::nullopt, std::nullopt, {},
                      "vLLM's default order: a step with any prefill work to do runs only prefill work and "
                      "decodes wait (false: decodes first in every step, stall-free)"});
  d.devices = any_device([](const PluginContext& ctx) -> std::unique_ptr<Scheduler> {
    const Params& p = ctx.params;
    return std::make_unique<ContinuousScheduler>(static_cast<int>(p.get_int("max_tokens")),
                                                 static_cast<int>(p.get_int("max_batch")),
                                                 p.get_bool("chunked_prefill"), p.get_bool("prefill_first"));
  });
  return d;
}

}  // namespace

INFERLAB_PLUGIN(describe)
