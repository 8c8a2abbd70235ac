// Runs of the real Engine over the StubExecutor for the scheduling and decoding conformance
// suites, and the checks every run must pass. The stub's logits put their mass on a token that
// depends only on the row's token and position, so greedy outputs are known in advance and do
// not depend on batching, chunking, preemption or speculation.
#pragma once
#include <string>
#include <vector>

#include "inferlab/plugin/decoder.h"
#include "inferlab/engine/engine.h"
#include "inferlab/plugin/scheduler.h"
#include "stub_executor.h"

namespace inferlab::testing {

struct Workload {
  std::string name;
  std::vector<Request> requests;
  KvCacheConfig kv;  // num_blocks 0 = the engine's generous automatic pool
};

// All at once; staggered arrivals with an idle gap; long prompts that need chunking; a small
// KV pool that forces preemption; reservation = full; contiguous pow2 regions (Orca). `max_draft`
// (the decoder's) is added to the blocks the small pools keep for each request, so every request fits alone.
std::vector<Workload> scheduling_workloads(int max_draft);
// Prompts with repeated n-grams (so lookup decoders draft), arriving together and staggered.
Workload decoding_workload();

// Forwards to a scheduler and counts what its preemptions throw away: the tokens a preempted
// request had computed, which it must compute again (no prefix caching in these runs).
class ObservedScheduler final : public Scheduler {
 public:
  explicit ObservedScheduler(Scheduler& inner) : inner_(inner) {}
  ScheduleDecision schedule(const SchedulerInput& input) override;
  long long recomputed() const { return recomputed_; }
  int preemptions() const { return preemptions_; }

 private:
  Scheduler& inner_;
  long long recomputed_ = 0;
  int preemptions_ = 0;
};

struct StubRun {
  RunResult result;
  std::vector<std::string> violations;  // StubExecutor's batch-contract breaches
  std::vector<StubStep> steps;
  long long recomputed = 0;
  int observed_preemptions = 0;
  int num_blocks = 0;  // the pool the run used
  int max_draft = 0;   // the decoder's
};

// One run of `requests` through Engine(StubExecutor, scheduler, decoder).
StubRun run_on_stub(Scheduler& scheduler, Decoder& decoder, const Workload& workload, std::uint64_t seed);

// The tokens greedy decoding on the stub produces for each request.
std::vector<std::vector<int>> greedy_outputs(const std::vector<Request>& requests);

// Every request finished with exactly max_output tokens and a sane timeline; no batch-contract
// breach; the pool's peak within its size; every step's tokens counted once:
//   Σ rows = Σ (prompt + output − 1) + recomputed + (spec_proposed − spec_accepted)
// and without preemption or drafts Σ prefill = Σ prompts, Σ decode = Σ (output − 1).
void expect_run_conforms(const StubRun& run, const Workload& workload);

}  // namespace inferlab::testing
