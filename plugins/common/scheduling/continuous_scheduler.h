// Continuous (iteration-level) batching, as in Orca (Yu et al., OSDI 2022) and vLLM
// (Kwon et al., SOSP 2023): every step re-forms the batch under a token budget, so finished
// requests leave and waiting ones join between any two steps. Long prompts are split into
// budget-sized chunks (chunked prefill, Sarathi: Agrawal et al. 2023) and a decode request
// that cannot grow its KV preempts the most recently admitted one (recompute-style).
// Lives in plugins/common (the library inferlab_common_scheduling) because other strategies
// build on its step (scheduling/sjf reorders its admissions); the plugin scheduling/continuous
// exposes it as is.
#pragma once
#include <vector>

#include "inferlab/plugin/params.h"
#include "inferlab/plugin/scheduler.h"

namespace inferlab {

class ContinuousScheduler : public Scheduler {
 public:
  // max_tokens: tokens processed per step over all requests (>= 1); max_batch: most running
  // requests (>= 1); chunked_prefill: split prompts larger than the remaining budget.
  // prefill_first: vLLM's default order — a step that can run any prefill work (a running
  // request's next chunk or an admission) runs only prefill work, and decodes wait for a step
  // with none (decodes stall behind prefills); false: decodes first in every step (stall-free,
  // Sarathi-Serve). chunk_tile (>= 1): a chunk that does not finish its prompt is rounded down
  // to a multiple of min(chunk_tile, max_tokens) tokens (1 = no rounding).
  ContinuousScheduler(int max_tokens, int max_batch, bool chunked_prefill, bool prefill_first = false,
                      int chunk_tile = 1);

  // Order within a step: running requests in decode (1 token, or 1 + drafts while the budget
  // allows), then running requests still in prefill (their next chunk), then waiting requests
  // first come first served while budget, max_batch and free blocks allow; the first waiting
  // request that does not fit stops admission (no overtaking). A running request that cannot
  // get a block preempts the most recently admitted running request (possibly itself).
  ScheduleDecision schedule(const SchedulerInput& input) override;

  int max_tokens() const { return max_tokens_; }
  int max_batch() const { return max_batch_; }
  bool chunked_prefill() const { return chunked_prefill_; }
  bool prefill_first() const { return prefill_first_; }
  int chunk_tile() const { return chunk_tile_; }

  // The parameters above as plugin ParamSpecs (max_tokens, max_batch, chunked_prefill), shared
  // by strategies built on this step (scheduling/sjf), and the scheduler they describe.
  static std::vector<ParamSpec> param_specs();
  static ContinuousScheduler from_params(const Params& p);

 private:
  // One step; with_decodes = false leaves running decodes out (the prefill-only step).
  ScheduleDecision step(const SchedulerInput& input, bool with_decodes) const;
  // A chunk of n of `pending` tokens: n when it finishes the prompt, else n rounded down to the
  // tile (possibly 0).
  int round_chunk(int n, int pending) const;

  int max_tokens_;
  int max_batch_;
  bool chunked_prefill_;
  bool prefill_first_;
  int chunk_tile_;
};

}  // namespace inferlab
