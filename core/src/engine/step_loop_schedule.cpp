// The scheduler's side of the step loop (see step_loop.h): requests entering and leaving the
// waiting queue (arrival, preemption, timeouts, drops) and the views the scheduler decides on.
#include <algorithm>
#include <limits>

#include "inferlab/error.h"
#include "engine/step_loop.h"

namespace inferlab::detail {

namespace {

// What the scheduler sees of a request (its blocks and branches given).
SeqView view_of(const Seq& s, int blocks_held, int branches) {
  SeqView v;
  v.id = s.req->id;
  v.arrival_s = s.req->arrival_s;
  v.priority = s.req->priority;
  v.slo_class = s.req->slo_class;
  v.prompt_len = static_cast<int>(s.req->prompt.size());
  v.max_output = s.req->max_output;
  v.num_tokens = static_cast<int>(s.tokens.size());
  v.num_computed = s.num_computed;
  v.generated = s.generated;
  v.blocks_held = blocks_held;
  v.branches = branches;
  return v;
}

}  // namespace

// A request entering the queue (on arrival, or preempted) holds no blocks while it waits (a
// queue that pinned cached blocks could hold memory no running request may take back); the
// prefix cache is consulted when it is viewed and taken when it is admitted.
void StepLoop::enqueue(Seq* s, bool front) {
  s->num_computed = 0;
  s->where = Seq::Where::kWaiting;
  // Without prefix caching its view is fixed until it is admitted or dropped (waiting_queue.h);
  // with it, schedule() views it against the cache as it is at that step.
  const SeqView view = view_of(*s, 0, std::max(1, width_));
  if (front) waiting_.push_front(s, view);
  else waiting_.push_back(s, view);
}

void StepLoop::unqueue(Seq* s) {
  if (!waiting_.erase(s)) throw Error("request " + std::to_string(s->req->id) + " is not in the waiting queue");
}

void StepLoop::admit_arrivals() {
  while (next_arrival_ < order_.size() && requests_[order_[next_arrival_]].arrival_s <= now_)
    enqueue(&seqs_[order_[next_arrival_++]], false);
}

// The longest cached prefix of a waiting request's known tokens (at least one token is left to
// compute so that it produces logits): its num_computed, and blocks_held = the matched blocks
// running requests hold, which are marked wanted so that no preemption is credited with them
// (unless the request can never run: its wants would only cost preemptions).
SeqView StepLoop::waiting_view(Seq& s, const SchedulerInput& input) {
  const int branches = std::max(1, width_);
  if (!kv_config_.prefix_caching) return view_of(s, 0, branches);
  blocks_.match_prefix(s.tokens, static_cast<int>(s.tokens.size()) - 1, matched_);
  s.num_computed = static_cast<int>(matched_.size()) * kv_config_.block_size;
  SeqView v = view_of(s, 0, branches);
  const bool admissible = !input.never_fits(v);
  for (int b : matched_)
    if (blocks_.seq_refs(b) > 0) {
      if (admissible) wanted_[static_cast<std::size_t>(b)] = wanted_stamp_;
      ++v.blocks_held;
    }
  v.blocks_shared = v.blocks_held;
  return v;
}

// A running request's view; with prefix caching, blocks_shared counts the blocks it holds that
// another request holds too or that a waiting view wants.
SeqView StepLoop::running_view(const Seq& s) {
  SeqView v = view_of(s, blocks_held(s), std::max(1, width_));
  if (!kv_config_.prefix_caching) return v;
  held_.clear();
  if (width_ == 0 || s.branches.size() <= 1) {
    const int kv = s.branches.empty() ? s.req->id : s.branches.front().kv;
    if (blocks_.has(kv)) held_.assign(blocks_.block_table(kv).begin(), blocks_.block_table(kv).end());
  } else {
    for (const Branch& b : s.branches)
      if (blocks_.has(b.kv)) held_.insert(held_.end(), blocks_.block_table(b.kv).begin(), blocks_.block_table(b.kv).end());
    std::sort(held_.begin(), held_.end());
  }
  for (std::size_t i = 0; i < held_.size();) {  // a block its own branches hold k times: k references
    std::size_t j = i;
    while (j < held_.size() && held_[j] == held_[i]) ++j;
    const int b = held_[i];
    if (blocks_.seq_refs(b) > static_cast<int>(j - i) || wanted_[static_cast<std::size_t>(b)] == wanted_stamp_)
      ++v.blocks_shared;
    i = j;
  }
  return v;
}

ScheduleDecision StepLoop::schedule() {
  SchedulerInput input;
  input.now_s = now_;
  input.free_blocks = blocks_.free_blocks();
  input.total_blocks = kv_config_.num_blocks;
  input.block_size = kv_config_.block_size;
  input.reservation = kv_config_.reservation;
  input.max_seq_len = kv_config_.max_seq_len;
  input.max_draft_tokens = max_draft_;
  running_views_.clear();
  if (kv_config_.prefix_caching) {
    // A waiting request's cached prefix changes as the cache does: viewed afresh each step (the
    // views mark the blocks they want before the running views count what a preemption frees).
    wanted_.resize(static_cast<std::size_t>(kv_config_.num_blocks), 0);
    ++wanted_stamp_;
    waiting_views_.clear();
    for (Seq* s : waiting_.items()) waiting_views_.push_back(waiting_view(*s, input));
    input.waiting = waiting_views_;
  } else {
    input.waiting = waiting_.views();  // made once, at enqueue
  }
  for (Seq* s : running_) running_views_.push_back(running_view(*s));
  input.running = running_views_;
  OpScope timed(device_, TimeCategory::kScheduler);
  return scheduler_.schedule(input);
}

void StepLoop::drop(Seq* s, RequestStatus status) {
  if (s->where == Seq::Where::kWaiting) unqueue(s);
  if (s->where == Seq::Where::kRunning) running_.erase(std::find(running_.begin(), running_.end(), s));
  s->where = Seq::Where::kDone;
  free_kv(*s);
  decoder_.release(s->req->id);  // a draft cache's blocks, a beam's hypotheses
  s->finished = true;
  s->timeline->status = status;
  ++finished_;
}

double StepLoop::next_timeout() const {
  double t = std::numeric_limits<double>::infinity();
  for (const Seq* s : waiting_.items()) {
    if (options_.timeout_s > 0) t = std::min(t, s->req->arrival_s + options_.timeout_s);
    if (options_.queue_timeout_s > 0 && s->timeline->first_scheduled_s < 0)
      t = std::min(t, s->req->arrival_s + options_.queue_timeout_s);
  }
  return t;
}

void StepLoop::expire_timeouts() {
  if (options_.timeout_s <= 0 && options_.queue_timeout_s <= 0) return;
  std::vector<Seq*> expired;
  // Deadlines computed exactly as next_timeout() does, so a clock set to one always fires it.
  auto late = [&](const Seq* s) {
    return (options_.timeout_s > 0 && now_ >= s->req->arrival_s + options_.timeout_s) ||
           (options_.queue_timeout_s > 0 && s->timeline->first_scheduled_s < 0 &&
            now_ >= s->req->arrival_s + options_.queue_timeout_s);
  };
  for (Seq* s : running_)
    if (late(s)) expired.push_back(s);
  for (Seq* s : waiting_.items())
    if (late(s)) expired.push_back(s);
  for (Seq* s : expired) drop(s, RequestStatus::kAborted);
}

}  // namespace inferlab::detail
