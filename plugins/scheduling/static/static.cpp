#include "static.h"

#include <algorithm>

#include "inferlab/error.h"

namespace inferlab::plugins {

namespace {

// Tokens a request feeds through the model over its whole life when nothing is preempted:
// the prompt and every generated token except the last.
int lifetime_tokens(const SeqView& s) { return s.prompt_len + std::max(s.max_output, 1) - 1; }

// Decode step size: 1 + drafts, drafts capped by the speculation limit, by the output still
// to produce (drafts past max_output would be thrown away) and by the blocks we may take.
int decode_tokens(const SchedulerInput& input, const SeqView& s, int free_blocks) {
  int remaining = s.max_output - s.generated;
  int drafts = std::max(0, std::min(input.max_draft_tokens, remaining - 1));
  int n = 1 + drafts;
  while (n > 0 && input.blocks_to_grow(s, n) > free_blocks) --n;
  return n;
}

}  // namespace

StaticScheduler::StaticScheduler(int max_batch) : max_batch_(max_batch) {
  check(max_batch >= 1, "scheduling 'static': max_batch must be >= 1, got " +
                            std::to_string(max_batch));
}

ScheduleDecision StaticScheduler::schedule(const SchedulerInput& input) {
  ScheduleDecision decision;
  int free_blocks = input.free_blocks;

  if (!input.running.empty()) {
    // A batch is in flight: advance every member; admit nothing.
    for (const SeqView& s : input.running) {
      int n;
      if (s.in_decode()) {
        n = decode_tokens(input, s, free_blocks);
      } else {
        // Only reachable if the engine hands us a half-prefilled request; finish its prompt.
        n = s.pending();
        if (input.blocks_to_grow(s, n) > free_blocks) n = 0;
      }
      if (n <= 0) continue;
      free_blocks -= input.blocks_to_grow(s, n);
      decision.scheduled.push_back({s.id, n});
    }
    return decision;
  }

  // Form a new batch. Because a static batch never preempts, each request's blocks are
  // counted for its whole life, not just its prompt: otherwise decode growth could stall the
  // batch with nobody able to give blocks back. Arrival order, no overtaking.
  for (const SeqView& s : input.waiting) {
    if (static_cast<int>(decision.scheduled.size()) >= max_batch_) break;
    int life = std::max(lifetime_tokens(s) - s.num_computed, s.pending());
    int need = input.blocks_to_grow(s, life);
    if (need > free_blocks) break;
    free_blocks -= need;
    decision.scheduled.push_back({s.id, s.pending()});
  }
  return decision;
}

}  // namespace inferlab::plugins
