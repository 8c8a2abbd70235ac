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
  d.params = {
      {"max_tokens", ParamType::kInt, std::int64_t{512}, 1.0, 1048576.0, {},
       "Tokens processed per step over all running requests (prefill chunks + decode)"},
      {"max_batch", ParamType::kInt, std::int64_t{64}, 1.0, 4096.0, {},
       "Most requests running at once"},
      {"chunked_prefill", ParamType::kBool, true, std::nullopt, std::nullopt, {},
       "Split prompts larger than the remaining budget into chunks; when false a prompt runs "
       "whole (one longer than max_tokens runs alone in its step)"},
  };
  d.make_scheduler = [](const Params& p) -> std::unique_ptr<Scheduler> {
    return std::make_unique<ContinuousScheduler>(static_cast<int>(p.get_int("max_tokens")),
                                                 static_cast<int>(p.get_int("max_batch")),
                                                 p.get_bool("chunked_prefill"));
  };
  return d;
}

}  // namespace

INFERLAB_PLUGIN(describe)
