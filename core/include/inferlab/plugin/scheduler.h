// Scheduling strategy interface, in vLLM v1's shape: each step the scheduler returns
// {request: number of tokens to process} — one format for prefill, chunked prefill, decode and
// speculative steps — plus which running requests to preempt (by recompute).
#pragma once
#include <span>
#include <vector>

#include "inferlab/kv/kv_reservation.h"

namespace inferlab {

// What a scheduler sees of one request.
struct SeqView {
  int id = 0;
  double arrival_s = 0;
  int priority = 0;      // lower = more urgent (vLLM's convention); 0 unless the trace gives one
  int slo_class = 0;     // which SLO applies (defaults to the priority in traces without one)
  int prompt_len = 0;
  int max_output = 0;
  int num_tokens = 0;    // prompt + generated so far
  int num_computed = 0;  // tokens whose K/V are in the cache
  int generated = 0;
  // KV blocks it holds (shared ones once). A waiting request holds none: its view shows the
  // prefix-cache hit it would take if admitted now (num_computed = the tokens matched) and
  // counts here the matched blocks running requests hold, which it shares for free; the other
  // matched blocks are evictable, counted in free_blocks, and cost one each (blocks_to_grow).
  int blocks_held = 0;
  // Of blocks_held, those that preempting it would not return to free_blocks: held by another
  // request too, or matched by a waiting request's prefix (which counted them as free to share).
  // 0 without prefix caching. A scheduler credits a preemption with blocks_freed().
  int blocks_shared = 0;
  // Sequences it runs after its prompt (beam width, n samples; 1 for plain decoding). Its
  // branches share the prompt's full blocks and each holds the rest on its own (at most).
  int branches = 1;
  // Tokens that must still be run through the model before the next token can be produced:
  // the (rest of the) prompt, or 1 in the decode phase.
  int pending() const { return num_tokens - num_computed; }
  bool in_decode() const { return pending() == 1 && num_computed > 0; }
  int blocks_freed() const { return blocks_held - blocks_shared; }
};

struct SchedulerInput {
  double now_s = 0;
  std::span<const SeqView> running;  // admitted, in admission order
  std::span<const SeqView> waiting;  // arrived, not admitted; preempted ones first, then by arrival
  // Blocks a reservation can take. Under a contiguous reservation policy this is the largest
  // run of free blocks, so any set of admissions whose blocks sum to it fits (in that run).
  int free_blocks = 0;
  // Blocks in the pool (the engine sets it): a request whose whole life needs more can never run.
  int total_blocks = 0;
  int block_size = 16;
  KvReservation reservation = KvReservation::kOnDemand;  // ahead policies reserve at admission
  int max_seq_len = 0;        // the model's, for the kMax / kPow2 policies
  int max_draft_tokens = 0;   // a decode step may take 1 + this many tokens (speculation)

  // total_blocks, or where it is unset (a hand-built input) free_blocks plus what the running
  // requests hold.
  int pool_blocks() const {
    if (total_blocks > 0) return total_blocks;
    int total = free_blocks;
    for (const SeqView& s : running) total += s.blocks_held;
    return total;
  }

  // Whether `s` can never run: its whole life (prompt and every output but the last, or the
  // reservation policy's) needs more blocks than pool_blocks() even alone, whatever it shares.
  bool never_fits(const SeqView& s) const {
    SeqView alone = s;
    alone.num_computed = alone.blocks_held = 0;
    const int life = s.prompt_len + (s.max_output > 1 ? s.max_output : 1) - 1;
    return blocks_to_grow(alone, life > s.num_tokens ? life : s.num_tokens) > pool_blocks();
  }

  // Blocks `s` needs beyond what it holds to process `new_tokens` more tokens, under the
  // cache's reservation policy. A scheduler sums these against free_blocks.
  int blocks_to_grow(const SeqView& s, int new_tokens) const {
    int target = s.num_computed + new_tokens;
    if (reserves_ahead(reservation)) {
      int full = reservation_tokens(reservation, s.prompt_len, s.max_output, max_draft_tokens, max_seq_len);
      if (full > target) target = full;
    }
    int need = branch_blocks(target, s.prompt_len, s.branches, block_size) - s.blocks_held;
    return need > 0 ? need : 0;
  }

  // Most distinct blocks `branches` sequences of `tokens` tokens each hold when they share
  // only the prompt's full blocks (an upper bound: beams share more).
  static int branch_blocks(int tokens, int prompt_len, int branches, int block_size) {
    const int per = (tokens + block_size - 1) / block_size;
    if (branches <= 1) return per;
    const int shared = prompt_len / block_size < per ? prompt_len / block_size : per;
    return shared + branches * (per - shared);
  }
};

struct ScheduledSeq {
  int id = 0;
  int num_tokens = 0;  // <= pending(), or 1 + drafts for a decode step
};

struct ScheduleDecision {
  std::vector<ScheduledSeq> scheduled;  // waiting ids listed here are admitted
  std::vector<int> preempt;             // running ids to free and send back to waiting
  // Waiting ids refused for good (admission control): the engine drops them, frees anything
  // they hold and records them with status `rejected`.
  std::vector<int> reject;
};

class Scheduler {
 public:
  virtual ~Scheduler() = default;
  // Must respect free_blocks (counting blocks freed by its own preemptions: blocks_freed() of
  // each, plus what it had granted them this step). Returning nothing
  // while requests wait and nothing runs means they can never fit: the engine reports it.
  virtual ScheduleDecision schedule(const SchedulerInput& input) = 0;
};

}  // namespace inferlab
