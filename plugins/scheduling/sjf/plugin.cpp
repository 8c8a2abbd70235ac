// Plugin descriptor for scheduling/sjf.
#include "inferlab/plugin/plugin.h"
#include "sjf.h"

namespace {

inferlab::PluginDescriptor describe() {
  using namespace inferlab;
  using namespace inferlab::plugins;
  PluginDescriptor d;
  d.kind = PluginKind::kScheduling;
  d.name = "sjf";
  d.version = "1.0.0";
  d.summary =
      "Shortest-job-first admission (with aging) on top of continuous batching: token budget, "
      "chunked prefill, preemption by recompute";
  d.params = ContinuousScheduler::param_specs();
  d.params.insert(d.params.end(), {
      {"key", ParamType::kString, std::string("total"), std::nullopt, std::nullopt,
       {"total", "prompt", "output"},
       "Length that orders the waiting queue: prompt_len + max_output, prompt_len or max_output"},
      {"starvation_s", ParamType::kFloat, 0.0, 0.0, std::nullopt, {},
       "A request waiting longer than this many seconds goes first, oldest first (0 = no aging)"},
  });
  d.devices = any_device([](const PluginContext& ctx) -> std::unique_ptr<Scheduler> {
    return std::make_unique<SjfScheduler>(
        static_cast<int>(ctx.params.get_int("max_tokens")), static_cast<int>(ctx.params.get_int("max_batch")),
        ctx.params.get_bool("chunked_prefill"), SjfScheduler::parse_key(ctx.params.get_string("key")),
        ctx.params.get_float("starvation_s"));
  });
  return d;
}

}  // namespace

INFERLAB_PLUGIN(describe)
