// The step loop: admit arrivals, ask the scheduler what to run, let the decoder draft, flatten
// into one batch, run the model, accept tokens, finish requests, record the timeline.
// The clock measures each step's real duration and fast-forwards idle gaps between arrivals.
#pragma once
#include <cstdint>
#include <functional>
#include <vector>

#include "inferlab/attention.h"
#include "inferlab/decoder.h"
#include "inferlab/kv_cache.h"
#include "inferlab/metrics.h"
#include "inferlab/model.h"
#include "inferlab/scheduler.h"
#include "inferlab/workload.h"

namespace inferlab {

struct EngineOptions {
  KvCacheConfig kv;            // num_blocks 0 = enough for every request at once, at most 1 GiB
  std::uint64_t seed = 0;      // per-request RNG = mix_seed(seed, request id)
  std::vector<int> stop_tokens;  // a request finishes early when it emits one (empty = never)
  // Monotonic seconds; measures step durations. Tests inject a fake one.
  std::function<double()> clock;
  // Called with (request id, token) as each token is accepted (streaming).
  std::function<void(int, int)> on_token;
};

struct RunResult {
  RunTimeline timeline;
  std::vector<std::vector<int>> outputs;  // generated tokens, indexed like the requests
};

class Engine {
 public:
  Engine(Model& model, Attention& attention, Scheduler& scheduler, Decoder& decoder,
         ThreadPool& pool, EngineOptions options);
  // Runs every request to completion. Throws Error when a plugin breaks its contract or a
  // request can never fit in the KV pool.
  RunResult run(const std::vector<Request>& requests);

 private:
  Model& model_;
  Attention& attention_;
  Scheduler& scheduler_;
  Decoder& decoder_;
  ThreadPool& pool_;
  EngineOptions options_;
};

}  // namespace inferlab
