// Plugin descriptor for scheduling/bucketed.
#include "bucketed.h"
#include "inferlab/plugin/plugin.h"

namespace {

inferlab::PluginDescriptor describe() {
  using namespace inferlab;
  using namespace inferlab::plugins;
  PluginDescriptor d;
  d.kind = PluginKind::kScheduling;
  d.name = "bucketed";
  d.version = "1.0.0";
  d.summary = "Static batching in prompt-length buckets: a batch from the oldest request's bucket, run to completion";
  d.params = {
      {"max_batch", ParamType::kInt, std::int64_t{8}, 1.0, 4096.0, {}, "Most requests admitted into one batch"},
      {"bucket_edges", ParamType::kString, std::string("128,512,2048"), std::nullopt, std::nullopt, {},
       "Upper prompt lengths of the buckets, increasing, comma separated; one more bucket holds longer prompts"},
  };
  d.devices = any_device([](const PluginContext& ctx) -> std::unique_ptr<Scheduler> {
    return std::make_unique<BucketedScheduler>(static_cast<int>(ctx.params.get_int("max_batch")),
                                               BucketedScheduler::parse_edges(ctx.params.get_string("bucket_edges")));
  });
  return d;
}

}  // namespace

INFERLAB_PLUGIN(describe)
