#include "plugins/common/scheduling/continuous_scheduler.h"

#include <algorithm>
#include <string>
#include <vector>

#include "inferlab/error.h"

namespace inferlab {

namespace {

// Largest n in [min_tokens, want] whose block growth fits `free_blocks`, or 0.
int fit_tokens(const SchedulerInput& in, const SeqView& s, int want, int min_tokens,
               int free_blocks) {
  int room = (s.blocks_held + free_blocks) * in.block_size - s.num_computed;
  int n = std::min(want, room);
  if (n < min_tokens) return 0;
  return in.blocks_to_grow(s, n) <= free_blocks ? n : 0;  // an ahead reservation may still refuse
}

// Per-step bookkeeping for the running requests (indices into input.running).
struct StepState {
  const SchedulerInput& in;
  std::vector<int> tokens, grown;
  std::vector<char> preempted;
  std::vector<int> preempt_order;
  int budget, free_blocks, live;

  StepState(const SchedulerInput& input, int max_tokens)
      : in(input),
        tokens(input.running.size(), 0),
        grown(input.running.size(), 0),
        preempted(input.running.size(), 0),
        budget(max_tokens),
        free_blocks(input.free_blocks),
        live(static_cast<int>(input.running.size())) {}

  // Preempts the most recently admitted live request, giving back its blocks and any budget
  // it had been granted this step. Returns its index (-1 if none is left).
  int preempt_newest() {
    for (int v = static_cast<int>(tokens.size()) - 1; v >= 0; --v) {
      if (preempted[v]) continue;
      preempted[v] = 1;
      free_blocks += in.running[v].blocks_freed() + grown[v];
      budget += tokens[v];
      tokens[v] = grown[v] = 0;
      --live;
      preempt_order.push_back(in.running[v].id);
      return v;
    }
    return -1;
  }

  // Grants running request i between min_tokens and want tokens, preempting newer requests
  // (and finally i itself) until its blocks fit.
  void place(int i, int want, int min_tokens) {
    const SeqView& s = in.running[i];
    while (!preempted[i]) {
      int n = fit_tokens(in, s, want, min_tokens, free_blocks);
      if (n > 0) {
        tokens[i] = n;
        grown[i] = in.blocks_to_grow(s, n);
        free_blocks -= grown[i];
        budget -= n;
        return;
      }
      if (preempt_newest() < 0) return;
    }
  }
};

}  // namespace

ContinuousScheduler::ContinuousScheduler(int max_tokens, int max_batch, bool chunked_prefill, bool prefill_first,
                                         int chunk_tile)
    : max_tokens_(max_tokens),
      max_batch_(max_batch),
      chunked_prefill_(chunked_prefill),
      prefill_first_(prefill_first),
      chunk_tile_(chunk_tile) {
  check(chunk_tile >= 1, "scheduling: chunk_tile must be >= 1, got " + std::to_string(chunk_tile));
  check(max_tokens >= 1, "scheduling 'continuous': max_tokens must be >= 1, got " +
                             std::to_string(max_tokens));
  check(max_batch >= 1, "scheduling 'continuous': max_batch must be >= 1, got " +
                            std::to_string(max_batch));
}

int ContinuousScheduler::round_chunk(int n, int pending) const {
  if (n >= pending) return n;
  const int tile = std::min(chunk_tile_, max_tokens_);
  return n / tile * tile;
}

ScheduleDecision ContinuousScheduler::schedule(const SchedulerInput& in) {
  if (prefill_first_) {
    ScheduleDecision prefill_only = step(in, false);
    if (!prefill_only.scheduled.empty()) return prefill_only;
  }
  return step(in, true);
}

ScheduleDecision ContinuousScheduler::step(const SchedulerInput& in, bool with_decodes) const {
  StepState st(in, max_tokens_);
  const int nrun = static_cast<int>(in.running.size());

  // 1. Running requests in decode, oldest first, so preemption falls on the newest.
  for (int i = 0; i < nrun; ++i) {
    const SeqView& s = in.running[i];
    if (!with_decodes) break;
    if (st.preempted[i] || !s.in_decode()) continue;
    if (st.budget < 1) break;
    int remaining = s.max_output - s.generated;
    int drafts = std::max(0, std::min({in.max_draft_tokens, remaining - 1, st.budget - 1}));
    st.place(i, 1 + drafts, 1);
  }

  // 2. Running requests still in prefill: their next chunk.
  for (int i = 0; i < nrun; ++i) {
    const SeqView& s = in.running[i];
    if (st.preempted[i] || s.in_decode()) continue;
    if (st.budget < 1) break;
    int pending = s.pending();
    if (chunked_prefill_) {
      const int want = round_chunk(std::min(pending, st.budget), pending);
      if (want > 0) st.place(i, want, 1);
    } else if (pending <= st.budget || st.budget == max_tokens_) {
      st.place(i, pending, pending);  // whole, or alone when longer than the whole budget
      if (pending > max_tokens_ && st.tokens[i] > 0) st.budget = 0;
    }
  }

  ScheduleDecision decision;
  for (int pass = 0; pass < 2; ++pass)
    for (int i = 0; i < nrun; ++i)
      if (st.tokens[i] > 0 && in.running[i].in_decode() == (pass == 0))
        decision.scheduled.push_back({in.running[i].id, st.tokens[i]});
  decision.preempt = st.preempt_order;

  // 3. Admit waiting requests, first come first served. Blocks for the whole remaining prompt
  // are set aside (not just this step's chunk) so requests admitted together cannot starve
  // each other's prefill; a request whose whole life exceeds the pool is never admitted.
  int batch = st.live;
  for (const SeqView& w : in.waiting) {
    if (batch >= max_batch_ || st.budget < 1) break;
    int pending = w.pending();
    if (in.never_fits(w)) break;
    int need = in.blocks_to_grow(w, pending);
    if (need > st.free_blocks) break;
    int n;
    if (chunked_prefill_) {
      n = round_chunk(std::min(pending, st.budget), pending);
      if (n == 0) break;
    } else if (pending <= st.budget) {
      n = pending;
    } else if (st.budget == max_tokens_) {
      n = pending;  // longer than the whole budget: runs alone in this step
    } else {
      break;
    }
    st.free_blocks -= need;
    st.budget -= std::min(n, st.budget);
    ++batch;
    decision.scheduled.push_back({w.id, n});
  }
  return decision;
}

std::vector<ParamSpec> ContinuousScheduler::param_specs() {
  return {
      {"max_tokens", ParamType::kInt, std::int64_t{512}, 1.0, 1048576.0, {},
       "Tokens processed per step over all running requests (prefill chunks + decode)"},
      {"max_batch", ParamType::kInt, std::int64_t{64}, 1.0, 4096.0, {}, "Most requests running at once"},
      {"chunked_prefill", ParamType::kBool, true, std::nullopt, std::nullopt, {},
       "Split prompts larger than the remaining budget into chunks; when false a prompt runs "
       "whole (one longer than max_tokens runs alone in its step)"},
  };
}

ContinuousScheduler ContinuousScheduler::from_params(const Params& p) {
  return ContinuousScheduler(static_cast<int>(p.get_int("max_tokens")), static_cast<int>(p.get_int("max_batch")),
                             p.get_bool("chunked_prefill"));
}

}  // namespace inferlab
