// Continuous (iteration-level) batching, as in Orca (Yu et al., OSDI 2022) and vLLM
// (Kwon et al., SOSP 2023): every step re-forms the batch under a token budget, so finished
// requests leave and waiting ones join between any two steps. Long prompts are split into
// budget-sized chunks (chunked prefill, Sarathi: Agrawal et al. 2023) and a decode request
// that cannot grow its KV preempts the most recently admitted one (recompute-style).
// Lives in core because other strategies build on its step (scheduling/sjf reorders its
// admissions); the plugin scheduling/continuous exposes it as is.
#pragma once
#include <vector>

#include "inferlab/params.h"
#include "inferlab/scheduler.h"

namespace inferlab {

class ContinuousScheduler : public Scheduler {
 public:
  // max_tokens: tokens processed per step over all requests (>= 1); max_batch: most running
  // requests (>= 1); chunked_prefill: split prompts larger than the remaining budget.
  ContinuousScheduler(int max_tokens, int max_batch, bool chunked_prefill);

  // Order within a step: running requests in decode (1 token, or 1 + drafts while the budget
  // allows), then running requests still in prefill (their next chunk), then waiting requests
  // first come first served while budget, max_batch and free blocks allow; the first waiting
  // request that does not fit stops admission (no overtaking). A running request that cannot
  // get a block preempts the most recently admitted running request (possibly itself).
  ScheduleDecision schedule(const SchedulerInput& input) override;

  int max_tokens() const { return max_tokens_; }
  int max_batch() const { return max_batch_; }
  bool chunked_prefill() const { return chunked_prefill_; }

  // The parameters above as plugin ParamSpecs (max_tokens, max_batch, chunked_prefill), shared
  // by strategies built on this step (scheduling/sjf), and the scheduler they describe.
  static std::vector<ParamSpec> param_specs();
  static ContinuousScheduler from_params(const Params& p);

 private:
  int max_tokens_;
  int max_batch_;
  bool chunked_prefill_;
};

}  // namespace inferlab
