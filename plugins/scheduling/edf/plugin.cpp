// Plugin descriptor for scheduling/edf.
#include "edf.h"
#include "inferlab/plugin/plugin.h"

namespace {

inferlab::PluginDescriptor describe() {
  using namespace inferlab;
  using namespace inferlab::plugins;
  PluginDescriptor d;
  d.kind = PluginKind::kScheduling;
  d.name = "edf";
  d.version = "1.0.0";
  d.summary =
      "Earliest deadline first (arrival + per-class TTFT SLO) on continuous batching; optionally rejects requests "
      "whose deadline has passed";
  d.params = ContinuousScheduler::param_specs();
  d.params.insert(d.params.end(), {
      {"ttft_slo_ms", ParamType::kString, std::string(""), std::nullopt, std::nullopt, {},
       "TTFT SLO per slo_class in ms, comma separated (\"200,2000\"; classes past the list take the last; "
       "empty or 0 = no deadline)"},
      {"reject_late", ParamType::kBool, false, std::nullopt, std::nullopt, {},
       "Reject a request still waiting for its first token once its deadline has passed"},
  });
  d.devices = any_device([](const PluginContext& ctx) -> std::unique_ptr<Scheduler> {
    const Params& p = ctx.params;
    return std::make_unique<EdfScheduler>(static_cast<int>(p.get_int("max_tokens")),
                                          static_cast<int>(p.get_int("max_batch")), p.get_bool("chunked_prefill"),
                                          EdfScheduler::parse_slo_list(p.get_string("ttft_slo_ms")),
                                          p.get_bool("reject_late"));
  });
  return d;
}

}  // namespace

INFERLAB_PLUGIN(describe)
