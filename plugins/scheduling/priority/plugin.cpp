// Plugin descriptor for scheduling/priority.
#include "inferlab/plugin/plugin.h"
#include "priority.h"

namespace {

inferlab::PluginDescriptor describe() {
  using namespace inferlab;
  using namespace inferlab::plugins;
  PluginDescriptor d;
  d.kind = PluginKind::kScheduling;
  d.name = "priority";
  d.version = "1.0.0";
  d.summary =
      "Strict priority classes (trace 'priority', lower = more urgent) on continuous batching; preempts less "
      "urgent requests when memory is short; optional aging";
  d.params = ContinuousScheduler::param_specs();
  d.params.insert(d.params.end(), {
      {"aging_s", ParamType::kFloat, 0.0, 0.0, 1e9, {},
       "A waiting request moves up one class per this many seconds waited (0 = no aging)"},
      {"preempt_lower", ParamType::kBool, true, std::nullopt, std::nullopt, {},
       "Preempt running requests of less urgent classes when an urgent one is short of memory or a batch slot"},
  });
  d.devices = any_device([](const PluginContext& ctx) -> std::unique_ptr<Scheduler> {
    const Params& p = ctx.params;
    return std::make_unique<PriorityScheduler>(static_cast<int>(p.get_int("max_tokens")),
                                               static_cast<int>(p.get_int("max_batch")), p.get_bool("chunked_prefill"),
                                               p.get_float("aging_s"), p.get_bool("preempt_lower"));
  });
  return d;
}

}  // namespace

INFERLAB_PLUGIN(describe)
