// Plugin descriptor for scheduling/sarathi: stall-free batching (Sarathi-Serve). The step is
// the shared continuous step (plugins/common/scheduling/continuous_scheduler.h) fixed to
// decode-first order with chunked prefill, plus chunk sizes rounded down to a tile multiple.
#include "inferlab/plugin/plugin.h"
#include "plugins/common/scheduling/continuous_scheduler.h"

namespace {

inferlab::PluginDescriptor describe() {
  using namespace inferlab;
  PluginDescriptor d;
  d.kind = PluginKind::kScheduling;
  d.name = "sarathi";
  d.version = "1.0.0";
  d.summary =
      "Stall-free batching (Sarathi-Serve): every running decode first, then prefill chunks filling the token "
      "budget, chunks rounded down to a tile multiple";
  d.params = {
      {"max_tokens", ParamType::kInt, std::int64_t{512}, 1.0, 1048576.0, {},
       "Token budget per step: decodes plus prefill chunks"},
      {"max_batch", ParamType::kInt, std::int64_t{64}, 1.0, 4096.0, {}, "Most requests running at once"},
      {"chunk_tile", ParamType::kInt, std::int64_t{16}, 1.0, 4096.0, {},
       "A prefill chunk that does not finish its prompt is a multiple of min(chunk_tile, max_tokens) tokens"},
  };
  d.devices = any_device([](const PluginContext& ctx) -> std::unique_ptr<Scheduler> {
    const Params& p = ctx.params;
    return std::make_unique<ContinuousScheduler>(static_cast<int>(p.get_int("max_tokens")),
                                                 static_cast<int>(p.get_int("max_batch")), true, false,
                                                 static_cast<int>(p.get_int("chunk_tile")));
  });
  return d;
}

}  // namespace

INFERLAB_PLUGIN(describe)
