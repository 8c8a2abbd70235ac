// Runs a Scheduler through the real Engine on the StubExecutor, for scheduler tests: no model,
// every step takes one modelled second (so SchedulerInput::now_s counts steps, and idle gaps
// are fast-forwarded as in any run), and a test decoder makes speculative steps accept a chosen
// number of drafts. What the engine does (block accounting, prefix hits, preemption order,
// errors for requests that can never fit) is exactly what a real run does.
#pragma once
#include <functional>
#include <map>
#include <span>
#include <vector>

#include "inferlab/engine/engine.h"
#include "inferlab/plugin/scheduler.h"

namespace inferlab::testing {

struct RequestSpec {
  int id = 0;  // 0 <= id < 4000
  double arrival_s = 0;
  int prompt = 0;  // prompt length in tokens
  int max_output = 0;
  int priority = 0;    // lower = more urgent
  int slo_class = -1;  // -1 = the priority
};

struct HarnessConfig {
  KvCacheConfig kv;  // num_blocks (0 = the engine sizes the pool), block_size, reservation, prefix_caching
  // Leading prompt tokens every request has in common (a shared system prompt); the rest of
  // each prompt is its own, starting with a token unique to the request, so no two prompts
  // share more than this prefix. Every prompt must be longer.
  int shared_prefix = 0;
  int max_draft_tokens = 0;  // the test decoder's max_draft_tokens()
  // Drafts accepted in a decode step proposing `drafts` drafts (clamped to [0, drafts]); step
  // is the schedule() call the step belongs to. Unset: none accepted.
  std::function<int(int id, int step, int drafts)> accepted;
  double step_s = 1.0;  // each step's modelled duration
  // EngineOptions' per-request limits (0 = none).
  double queue_timeout_s = 0;
  double timeout_s = 0;
  int max_new_tokens = 0;
};

// Called inside schedule(), before the decision goes back to the engine; step is the index of
// the schedule() call (a call that schedules nothing, while the engine waits for an arrival,
// counts too).
using StepObserver = std::function<void(int step, const SchedulerInput&, const ScheduleDecision&)>;

struct HarnessResult {
  RunTimeline timeline;
  // Per request: tokens scheduled (prefill chunks, 1 + accepted drafts per decode step);
  // rejected drafts are rolled back and not counted.
  std::map<int, long long> tokens_processed;
  // Per request: computed tokens a preemption threw away (less any prefix the re-queued
  // request found in the prefix cache).
  std::map<int, int> recomputed;
  std::map<int, int> generated;  // per request, at the end
  std::vector<int> finished;     // requests that finished, by finish time (ties in request order)
  int steps = 0;
  int preemptions = 0;
  int peak_blocks = 0;      // timeline.kv_blocks_peak
  int max_step_tokens = 0;  // most tokens one decision scheduled (drafts included)
  int max_running = 0;      // most requests running after a decision's admissions
};

// Runs every request to completion. Adds a GoogleTest failure for each StubExecutor batch
// contract breach and for any output token that is not the stub's greedy token (also when the
// engine throws). Throws what Engine::run throws, e.g. inferlab::Error naming a request that
// can never be scheduled.
HarnessResult run_scheduler(Scheduler& scheduler, const std::vector<RequestSpec>& requests,
                            const HarnessConfig& config, const StepObserver& observe = {});

// Single-step scheduler tests build their SchedulerInput from these views.
// A waiting request: nothing computed, num_tokens = prompt, priority and slo_class = priority.
SeqView waiting_seq(int id, double arrival, int prompt, int output, int priority = 0);
inline SeqView waiting_seq(int id, int prompt, int output) { return waiting_seq(id, 0.0, prompt, output); }
// A request in decode: prompt done, `generated` tokens out, K/V for all but the last token.
SeqView decode_seq(int id, int prompt, int generated, int output, int blocks_held, int priority = 0);
// The ids a decision scheduled, in its order.
std::vector<int> scheduled_ids(const ScheduleDecision& decision);
// A step's input over `running` and `waiting` (which must outlive it) with `free_blocks` free.
SchedulerInput step_input(std::span<const SeqView> running, std::span<const SeqView> waiting, int free_blocks);

// A run without preemption: every request finished, each processed every token once (its
// prompt and all outputs but the last, which is never fed back) and generated max_output.
void expect_every_token_once(const HarnessResult& r, const std::vector<RequestSpec>& requests);

}  // namespace inferlab::testing
