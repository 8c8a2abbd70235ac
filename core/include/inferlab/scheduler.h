// Scheduling strategy interface, in vLLM v1's shape: each step the scheduler returns
// {request: number of tokens to process} — one format for prefill, chunked prefill, decode and
// speculative steps — plus which running requests to preempt (by recompute).
#pragma once
#include <span>
#include <vector>

#include "inferlab/kv_reservation.h"

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
  int blocks_held = 0;   // KV blocks currently allocated to it (shared ones once)
  // Sequences it runs after its prompt (beam width, n samples; 1 for plain decoding). Its
  // branches share the prompt's full blocks and each holds the rest on its own (at most).
  int branches = 1;
  // Tokens that must still be run through the model before the next token can be produced:
  // the (rest of the) prompt, or 1 in the decode phase.
  int pending() const { return num_tokens - num_computed; }
  bool in_decode() const { return pending() == 1 && num_computed > 0; }
};

struct SchedulerInput {
  double now_s = 0;
  std::span<const SeqView> running;  // admitted, in admission order
  std::span<const SeqView> waiting;  // arrived, not admitted; preempted ones first, then by arrival
  // Blocks a reservation can take. Under a contiguous reservation policy this is the largest
  // run of free blocks, so any set of admissions whose blocks sum to it fits (in that run).
  int free_blocks = 0;
  int block_size = 16;
  KvReservation reservation = KvReservation::kOnDemand;  // ahead policies reserve at admission
  int max_seq_len = 0;        // the model's, for the kMax / kPow2 policies
  int max_draft_tokens = 0;   // a decode step may take 1 + this many tokens (speculation)

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
  // Must respect free_blocks (counting blocks freed by its own preemptions). Returning nothing
  // while requests wait and nothing runs means they can never fit: the engine reports it.
  virtual ScheduleDecision schedule(const SchedulerInput& input) = 0;
};

}  // namespace inferlab
