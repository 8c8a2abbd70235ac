// The engine's step loop (see inferlab/engine/engine.h), internal to the core: its per-request state
// and its stages. engine.cpp holds the stages; step_loop_schedule.cpp the waiting queue, timeouts
// and the scheduler's views; step_loop_branches.cpp the part that runs a request as several
// sequences (beam search, n > 1 samples); step_loop_kv_breakdown.cpp the per-step KV memory
// breakdown.
#pragma once
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

#include "inferlab/kv/block_manager.h"
#include "inferlab/engine/engine.h"
#include "engine/waiting_queue.h"

namespace inferlab::detail {

double steady_seconds();

// One sequence of a branching request: its own K/V (a BlockManager seq id) and tokens.
struct Branch {
  int kv = 0;
  std::vector<int> tokens;  // prompt + generated
};

struct Seq {
  // Where the request is in the loop: per-step checks ask this instead of searching the queues.
  enum class Where : std::uint8_t { kNotArrived, kWaiting, kRunning, kDone };
  const Request* req = nullptr;
  Where where = Where::kNotArrived;
  long long scheduled_in = -1;  // the last step (StepLoop::step_index_) that scheduled it
  std::vector<int> tokens;  // prompt + generated (a branching request: its first live branch's)
  int num_computed = 0;     // tokens whose K/V are in the cache (every live branch alike)
  int generated = 0;
  bool finished = false;
  Rng rng;
  RequestTimeline* timeline = nullptr;
  // Branching decoders only: the live branches (one, K/V id = request id, until the first
  // token) and branch_width() RNG streams, stream j = mix_seed(request seed, j).
  std::vector<Branch> branches;
  std::vector<Rng> branch_rngs;
};

// Scheduled work for one sequence in this step.
struct Work {
  Seq* seq;
  int n_real;                // known tokens run this step
  std::vector<int> drafts;   // speculative tokens appended after them
  int logit_offset = -1;     // first logits row, -1 when no logits are needed
};

// The state of one run and its stages.
class StepLoop {
 public:
  StepLoop(StepExecutor& executor, Scheduler& scheduler, Decoder& decoder, const EngineOptions& options,
           const std::vector<Request>& requests, const KvCacheConfig& kv_config)
      : executor_(executor), scheduler_(scheduler), decoder_(decoder), options_(options), requests_(requests),
        kv_config_(kv_config), blocks_(kv_config), device_(executor.device()),
        vocab_(executor.config().vocab_size), max_draft_(decoder.max_draft_tokens()),
        width_(decoder.branch_width()) {}

  RunResult run();

 private:
  void setup();
  void enqueue(Seq* s, bool front);
  void admit_arrivals();
  ScheduleDecision schedule();
  // The scheduler's views: a waiting request's shows its prefix-cache hit (and records the
  // blocks it wants); a running request's counts the blocks a preemption would not free.
  // Waiting views first: running views read what they want. `input` gives the pool's shape.
  SeqView waiting_view(Seq& s, const SchedulerInput& input);
  SeqView running_view(const Seq& s);
  // Preempts, checks and reserves the scheduled work; false when nothing was scheduled and the
  // loop must wait for an arrival (throws when nothing can ever be scheduled).
  bool apply(const ScheduleDecision& decision);
  void build_batch();
  // Whether this step's tokens are chosen on the device (the decoder's device_choice, on an
  // executor that chooses, no drafts, no branches, at least one logit row); if so, draws the
  // kSample uniforms from each sequence's rng into draws_ (one per logit row).
  bool choose_on_device();
  // Accepts tokens (the device's choice when chose_, else Decoder::accept_for on the logits),
  // rolls back rejected drafts, publishes prefixes.
  void commit();
  // Stamps the emitted tokens with the step's end and records the step.
  void record_step(double step_start, double duration);
  void finish_requests();
  // Ends a waiting or running request early (timeout, rejection): out of the queue or batch,
  // its blocks freed now, counted as done.
  void drop(Seq* s, RequestStatus status);
  // Aborts the requests whose queue or total timeout has passed at now_.
  void expire_timeouts();
  // The earliest time a waiting request times out (+infinity when none will).
  double next_timeout() const;
  [[noreturn]] void throw_unschedulable() const;
  // Tokens of KV space `s` reserves at admission under kv.reservation (0 = on demand).
  int reservation_target(const Seq& s) const {
    return reservation_tokens(kv_config_.reservation, static_cast<int>(s.req->prompt.size()), s.req->max_output,
                              width_ > 0 ? 0 : max_draft_, kv_config_.max_seq_len);
  }
  // The step's KV memory breakdown beyond the stats (step_loop_kv_breakdown.cpp): reserved
  // slots no token will ever be written to, and free slots no waiting request can use.
  void measure_kv_breakdown(StepTimeline& st) const;
  // Slots of the request's K/V past the last position it will ever write (internal fragmentation).
  long long slots_past_final(const Seq& s) const;
  // Takes a waiting request out of the queue (admitted or dropped).
  void unqueue(Seq* s);

  // Branching (step_loop_branches.cpp). A request is in its branched phase once its first
  // token exists; before that it is one sequence under its own id, like any other.
  bool branched(const Seq& s) const { return width_ > 0 && s.generated > 0; }
  // (Re)starts a branching request from its prompt: one branch, fresh RNG streams.
  void reset_branches(Seq& s);
  // Frees every K/V sequence the request holds.
  void free_kv(Seq& s);
  // Distinct blocks the request holds (shared ones once).
  int blocks_held(const Seq& s) const;
  // Reserves one more position for every live branch; false when the pool is short.
  bool reserve_branches(Seq& s);
  // Adds the live branches to the batch (one token each) and counts the blocks sharing saves.
  void add_branches_to_batch(Work& w);
  // Asks the decoder for the next branches, forks and frees their K/V, ends the request when
  // the decoder says so.
  void commit_branches(Work& w);

  StepExecutor& executor_;
  Scheduler& scheduler_;
  Decoder& decoder_;
  const EngineOptions& options_;
  const std::vector<Request>& requests_;
  KvCacheConfig kv_config_;
  BlockManager blocks_;
  Device& device_;
  const int vocab_, max_draft_, width_;

  RunResult result_;
  std::vector<Seq> seqs_;
  std::unordered_map<int, Seq*> by_id_;
  std::vector<std::size_t> order_;   // request indices by arrival
  WaitingQueue waiting_;             // arrived, not admitted (preempted ones pushed to the front)
  std::vector<Seq*> running_;        // admission order
  std::size_t next_arrival_ = 0, finished_ = 0;
  double now_ = 0;
  OpTimes step_ops0_;                // the device's op times when the current step began
  Model::ForwardStats forward0_;      // the model's forward counters when the run began
  int preemptions_seen_ = 0;         // timeline preemptions recorded by earlier steps
  int next_kv_ = 0;                  // K/V ids for forked branches (above every request id)

  // Per-step scratch, reused.
  StepBatch batch_;
  std::vector<float> logits_;
  std::vector<Work> work_;
  double step_draft_s_ = -1;  // this step's seconds in Decoder::propose_batch, -1 when it drafted nothing
  std::vector<Work> scheduled_;  // apply(): the scheduled work before reservation
  std::vector<Decoder::DraftRequest> draft_requests_;  // apply(): the decodes that draft, into scheduled_
  std::vector<BlockCopy> copies_;
  std::vector<SeqView> running_views_, waiting_views_;  // waiting_views_: with prefix caching only
  std::vector<int> matched_, held_;          // prefix caching: a view's matched / held blocks
  std::vector<int> kv_ids_;                  // a branching request's K/V ids
  std::vector<long long> wanted_;            // [num_blocks] = wanted_stamp_: a waiting view shares it
  long long wanted_stamp_ = 0;
  std::vector<int> accepted_;
  // Token choice on the device: the decoder's (kNone when the run cannot use it), whether this
  // step used it, its draws and the chosen tokens, one per logit row.
  TokenChoice choice_;
  bool chose_ = false;
  std::vector<double> draws_;
  std::vector<int> chosen_;
  std::vector<BranchStep> next_branches_;
  // The step's emitted tokens: request `seq` emitted emitted_tokens_[begin, end).
  struct Emitted {
    Seq* seq;
    std::size_t begin, end;
    bool to_output;  // appended to the request's output (a branching request's is set whole)
  };
  std::vector<Emitted> emitted_;
  std::vector<int> emitted_tokens_;
  std::vector<int> step_tokens_;  // one sequence's rows of the batch being built
  long long step_index_ = 0;
  int prefill_tokens_ = 0, decode_tokens_ = 0;
};

}  // namespace inferlab::detail
