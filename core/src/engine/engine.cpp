// The step loop as stages (see inferlab/engine/engine.h): admit → schedule → apply the decision
// (preempt, reserve blocks, draft) → build the batch → execute → commit (accept tokens, roll
// back rejected drafts, finish requests, record the step). Every stage but execute is the
// same for every backend.
#include "inferlab/engine/engine.h"

#include <algorithm>
#include <chrono>
#include <limits>

#include "inferlab/engine/batch.h"
#include "inferlab/error.h"
#include "inferlab/sim/sim.h"
#include "engine/step_loop.h"

namespace inferlab {

namespace detail {

double steady_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void StepLoop::setup() {
  RunTimeline& tl = result_.timeline;
  tl.block_size = kv_config_.block_size;
  tl.kv_blocks_total = kv_config_.num_blocks;
  tl.weights_bytes = executor_.weight_bytes();
  tl.kv_bytes_per_token = executor_.kv_bytes_per_block(1);
  forward0_ = executor_.forward_stats();
  tl.requests.resize(requests_.size());
  result_.outputs.resize(requests_.size());
  if (width_ > 0) {
    if (max_draft_ > 0) throw Error("a decoder cannot both branch (beam search, n > 1) and speculate");
    if (!kv_config_.enabled) throw Error("branching decoders (beam search, n > 1) need the KV cache (kv.enabled)");
    if (kv_config_.contiguous())
      throw Error(std::string("branching decoders (beam search, n > 1) share blocks between branches; kv.reservation = ") +
                  kv_reservation_name(kv_config_.reservation) +
                  " gives each sequence its own contiguous region; allowed: on_demand or full");
    result_.sequences.resize(requests_.size());
  }
  choice_ = decoder_.device_choice();
  if (choice_.kind == TokenChoice::Kind::kSample && !(choice_.temperature > 0))
    throw Error("decoder's device choice samples at temperature " + std::to_string(choice_.temperature) +
                "; allowed: > 0 (temperature 0 is argmax)");
  // Branches read every live branch's logits, drafts need a verification: host logits always.
  if (width_ > 0 || max_draft_ > 0 || !executor_.chooses_tokens()) choice_ = {};
  seqs_.resize(requests_.size());
  order_.resize(requests_.size());
  for (std::size_t i = 0; i < requests_.size(); ++i) {
    const Request& r = requests_[i];
    if (r.prompt.empty()) throw Error("request " + std::to_string(r.id) + " has an empty prompt");
    if (r.max_output < 1) throw Error("request " + std::to_string(r.id) + " asks for no output tokens");
    for (int t : r.prompt)
      if (t < 0 || t >= vocab_)  // (not check(): its message would be built for every token)
        throw Error("request " + std::to_string(r.id) + " has token id " + std::to_string(t) +
                    " outside the vocabulary [0, " + std::to_string(vocab_) + ")");
    if (kv_config_.reservation == KvReservation::kMax &&
        static_cast<long long>(r.prompt.size()) + r.max_output > kv_config_.max_seq_len)
      throw Error("request " + std::to_string(r.id) + " has " + std::to_string(r.prompt.size()) + " prompt + " +
                  std::to_string(r.max_output) + " output tokens, more than the max_seq_len " +
                  std::to_string(kv_config_.max_seq_len) +
                  " that kv.reservation = max reserves; allowed: prompt + output <= max_seq_len (clip the workload)");
    if (!by_id_.emplace(r.id, &seqs_[i]).second) throw Error("duplicate request id " + std::to_string(r.id));
    seqs_[i].req = &r;
    seqs_[i].tokens = r.prompt;
    seqs_[i].rng = Rng(mix_seed(options_.seed, static_cast<std::uint64_t>(r.id)));
    seqs_[i].timeline = &tl.requests[i];
    if (width_ > 0) reset_branches(seqs_[i]);
    tl.requests[i].id = r.id;
    tl.requests[i].priority = r.priority;
    tl.requests[i].slo_class = r.slo_class;
    tl.requests[i].arrival_s = r.arrival_s;
    tl.requests[i].prompt_tokens = static_cast<int>(r.prompt.size());
    order_[i] = i;
    next_kv_ = std::max(next_kv_, r.id + 1);
  }
  std::stable_sort(order_.begin(), order_.end(),
                   [&](std::size_t a, std::size_t b) { return requests_[a].arrival_s < requests_[b].arrival_s; });
  now_ = requests_.empty() ? 0.0 : requests_[order_[0]].arrival_s;
}

bool StepLoop::apply(const ScheduleDecision& decision) {
  RunTimeline& tl = result_.timeline;
  for (int id : decision.reject) {
    auto found = by_id_.find(id);
    if (found == by_id_.end() || found->second->where != Seq::Where::kWaiting)
      throw Error("scheduler rejected request " + std::to_string(id) + " which is not waiting");
    drop(found->second, RequestStatus::kRejected);
  }
  for (int id : decision.preempt) {
    auto it = std::find_if(running_.begin(), running_.end(), [&](Seq* s) { return s->req->id == id; });
    if (it == running_.end()) throw Error("scheduler preempted request " + std::to_string(id) + " which is not running");
    Seq* s = *it;
    running_.erase(it);
    free_kv(*s);
    s->timeline->preemptions++;
    tl.preemptions++;
    decoder_.release(id);
    if (width_ > 0) reset_branches(*s);  // nothing was returned yet: the beams start again
    enqueue(s, true);  // recompute prompt + generated tokens (minus any cached prefix) when readmitted
  }

  // Admissions take the prefix their views showed before any block is allocated this step, so
  // no allocation evicts a block the scheduler counted on.
  if (kv_config_.prefix_caching)
    for (const ScheduledSeq& sch : decision.scheduled) {
      auto found = by_id_.find(sch.id);
      if (found == by_id_.end() || found->second->where != Seq::Where::kWaiting || blocks_.has(sch.id)) continue;
      Seq* s = found->second;
      const int matched = blocks_.acquire_prefix(sch.id, s->tokens, static_cast<int>(s->tokens.size()) - 1);
      check(matched == s->num_computed, "prefix cache changed between a request's view and its admission");
    }
  work_.clear();
  copies_.clear();
  ++step_index_;
  // Checks below throw without check(): a message built per scheduled sequence per step was a
  // measurable share of a simulated run's time.
  // Pass 1: check what the scheduler asked for and collect the decodes that draft.
  step_draft_s_ = -1;
  scheduled_.clear();
  scheduled_.reserve(decision.scheduled.size());  // draft_requests_ point into it
  draft_requests_.clear();
  for (const ScheduledSeq& sch : decision.scheduled) {
    auto found = by_id_.find(sch.id);
    if (found == by_id_.end()) throw Error("scheduler scheduled unknown request " + std::to_string(sch.id));
    Seq* s = found->second;
    if (s->scheduled_in == step_index_)
      throw Error("scheduler scheduled request " + std::to_string(sch.id) + " twice in one step");
    const bool is_waiting = s->where == Seq::Where::kWaiting;
    if (!is_waiting && s->where != Seq::Where::kRunning)
      throw Error("scheduler scheduled request " + std::to_string(sch.id) + " which is neither waiting nor running");
    const int pending = static_cast<int>(s->tokens.size()) - s->num_computed;
    const bool decode = pending == 1 && s->num_computed > 0;
    const int limit = decode ? 1 + max_draft_ : pending;
    if (sch.num_tokens < 1 || sch.num_tokens > limit)
      throw Error("scheduler asked for " + std::to_string(sch.num_tokens) + " tokens of request " + std::to_string(sch.id) +
                  " which allows 1.." + std::to_string(limit));
    s->scheduled_in = step_index_;
    scheduled_.push_back(Work{s, std::min(sch.num_tokens, pending), {}, -1});
    const int remaining = s->req->max_output - s->generated;
    if (decode && sch.num_tokens > 1 && remaining > 1)
      draft_requests_.push_back({s->req->id, s->tokens, std::min(sch.num_tokens - 1, remaining - 1), &s->rng,
                                 &scheduled_.back().drafts});
  }
  if (!draft_requests_.empty()) {
    // Every sequence's drafts in one call (a draft model batches its passes over them). Its
    // ops are timed in their own categories (linear, ...); the whole call is also measured for
    // draft_time_frac. The drafts vectors live in scheduled_, which is not resized below.
    OpScope timed(device_, TimeCategory::kSampling);
    const double d0 = steady_seconds();
    decoder_.propose_batch(draft_requests_);
    step_draft_s_ = steady_seconds() - d0;
    result_.timeline.spec_seq_steps += static_cast<long long>(draft_requests_.size());
    result_.timeline.draft_s += step_draft_s_;
  }
  // Pass 2: reserve K/V and admit.
  for (Work& w : scheduled_) {
    Seq* s = w.seq;
    const bool is_waiting = s->where == Seq::Where::kWaiting;
    const int target = std::max(s->num_computed + w.n_real + static_cast<int>(w.drafts.size()), reservation_target(*s));
    const bool reserved = branched(*s) ? reserve_branches(*s) : blocks_.reserve(s->req->id, target, copies_);
    // A contiguous cache shows schedulers its largest hole; blocks a scheduler freed by
    // preempting need not join it, so such an admission waits for a later step.
    if (!reserved && kv_config_.contiguous() && is_waiting) {
      s->scheduled_in = -1;
      continue;
    }
    if (!reserved)
      throw Error("scheduler overcommitted the KV pool: request " + std::to_string(s->req->id) + " needs " +
                  (branched(*s) ? "up to " + std::to_string(s->branches.size()) + " (one per branch)"
                                : std::to_string(blocks_.blocks_needed(s->req->id, target))) +
                  " blocks, " + std::to_string(blocks_.free_blocks()) + " free");
    if (is_waiting) {
      if (s->timeline->preemptions == 0)
        s->timeline->cached_prompt_tokens = std::min(s->num_computed, static_cast<int>(s->req->prompt.size()));
      unqueue(s);
      running_.push_back(s);
      s->where = Seq::Where::kRunning;
    }
    if (s->timeline->first_scheduled_s < 0) s->timeline->first_scheduled_s = now_;
    work_.push_back(std::move(w));
  }
  if (!work_.empty()) return true;
  if (!decision.reject.empty()) return false;  // schedule again without them
  // A scheduler may preempt every running request, itself included, and run nothing (a request
  // whose growth found no room): schedule again with their blocks back in the pool.
  if (running_.empty() && !decision.preempt.empty()) return false;
  if (!running_.empty())
    throw Error("scheduler made no progress with " + std::to_string(running_.size()) + " running requests");
  // Nothing fits yet: wait for the next arrival or the next timeout, whichever comes first.
  double wake = next_timeout();
  if (next_arrival_ < order_.size()) wake = std::min(wake, requests_[order_[next_arrival_]].arrival_s);
  if (wake < std::numeric_limits<double>::infinity()) {
    now_ = std::max(now_, wake);
    return false;
  }
  throw_unschedulable();
}

void StepLoop::throw_unschedulable() const {
  const Seq* s = waiting_.front();
  // The blocks for its whole life (prompt and all but the last output token), which is what a
  // scheduler checks against the pool before it admits a request.
  const int prompt = static_cast<int>(s->req->prompt.size());
  const int life = kv_config_.reserves_ahead() ? reservation_target(*s) : prompt + std::max(s->req->max_output, 1) - 1;
  const int need = SchedulerInput::branch_blocks(std::max(life, static_cast<int>(s->tokens.size()) + 1), prompt,
                                                std::max(1, width_), kv_config_.block_size);
  throw Error("request " + std::to_string(s->req->id) + " can never be scheduled: it needs " + std::to_string(need) +
              " KV blocks, the pool has " + std::to_string(kv_config_.num_blocks) +
              " (raise kv.num_blocks or lower the lengths)");
}

void StepLoop::build_batch() {
  RunTimeline& tl = result_.timeline;
  batch_.clear();
  int logit_rows = 0;
  prefill_tokens_ = decode_tokens_ = 0;
  std::vector<int>& step_tokens = step_tokens_;
  for (Work& w : work_) {
    Seq& s = *w.seq;
    if (branched(s)) {
      w.logit_offset = logit_rows;
      logit_rows += static_cast<int>(s.branches.size());
      add_branches_to_batch(w);
      continue;
    }
    const int start = s.num_computed;
    const int n = w.n_real + static_cast<int>(w.drafts.size());
    step_tokens.assign(s.tokens.begin() + start, s.tokens.begin() + start + w.n_real);
    step_tokens.insert(step_tokens.end(), w.drafts.begin(), w.drafts.end());
    const bool reaches_end = start + w.n_real == static_cast<int>(s.tokens.size());
    // Logits follow the last known token and every draft.
    const int logits_begin = reaches_end ? w.n_real - 1 : 0, logits_end = reaches_end ? n : 0;
    if (reaches_end) {
      w.logit_offset = logit_rows;
      logit_rows += 1 + static_cast<int>(w.drafts.size());
    }
    batch_.add_sequence(step_tokens, start, blocks_.block_table(s.req->id), kv_config_.block_size, logits_begin,
                        logits_end);
    // A decode step feeds back a generated token; a prompt's last one-token chunk is prefill.
    const bool decode_step = s.num_computed > 0 && w.n_real == 1 && s.generated > 0;
    (decode_step ? decode_tokens_ : prefill_tokens_) += n;
    // (sequence, step) pairs that emit tokens after the request's first, as compute_metrics
    // counts them: decode steps, and the recompute of a preempted request that had output.
    tl.decode_seq_steps += reaches_end && s.generated > 0;
  }
}

bool StepLoop::choose_on_device() {
  if (choice_.kind == TokenChoice::Kind::kNone || batch_.logit_rows.empty()) return false;
  for (const Work& w : work_)
    if (!w.drafts.empty()) return false;
  draws_.assign(batch_.logit_rows.size(), 0.0);
  chosen_.clear();
  if (choice_.kind == TokenChoice::Kind::kSample)
    for (Work& w : work_)  // the one rng.uniform() accept_for would have drawn
      if (w.logit_offset >= 0) draws_[static_cast<std::size_t>(w.logit_offset)] = w.seq->rng.uniform();
  return true;
}

void StepLoop::commit() {
  RunTimeline& tl = result_.timeline;
  const bool keep_capacity = kv_config_.reserves_ahead();
  emitted_.clear();
  emitted_tokens_.clear();
  for (Work& w : work_) {
    Seq& s = *w.seq;
    const int id = s.req->id;
    if (w.logit_offset < 0) {  // a prefill chunk that does not reach the last known token
      s.num_computed += w.n_real;
      blocks_.set_length(id, s.num_computed);
      continue;
    }
    if (width_ > 0) {
      commit_branches(w);
      continue;
    }
    accepted_.clear();
    if (chose_) {
      const int t = chosen_.at(static_cast<std::size_t>(w.logit_offset));
      if (t < 0 || t >= vocab_)
        throw Error("the device chose token " + std::to_string(t) + " outside the vocabulary [0, " +
                    std::to_string(vocab_) + ")");
      accepted_.push_back(t);
    } else {
      OpScope timed(device_, TimeCategory::kSampling);
      decoder_.accept_for(id, s.tokens, w.drafts, logits_.data() + static_cast<std::size_t>(w.logit_offset) * vocab_,
                          vocab_, s.rng, accepted_);
    }
    const int m = static_cast<int>(accepted_.size());
    if (m < 1 || m > 1 + static_cast<int>(w.drafts.size()))
      throw Error("decoder accepted " + std::to_string(m) + " tokens for " + std::to_string(w.drafts.size()) + " drafts");
    for (int i = 0; i + 1 < m; ++i)
      if (accepted_[static_cast<std::size_t>(i)] != w.drafts[static_cast<std::size_t>(i)])
        throw Error("decoder accepted a token that differs from the draft it verified");
    tl.spec_proposed += static_cast<long long>(w.drafts.size());
    tl.spec_accepted += m - 1;
    // K/V is valid for the known tokens plus the accepted drafts; rejected drafts roll back.
    s.num_computed += w.n_real + (m - 1);
    blocks_.set_length(id, s.num_computed + static_cast<int>(w.drafts.size()) - (m - 1));
    if (m - 1 < static_cast<int>(w.drafts.size())) blocks_.truncate(id, s.num_computed, keep_capacity);
    const std::size_t begin = emitted_tokens_.size();
    for (int t : accepted_) {
      if (s.generated >= s.req->max_output) break;
      s.tokens.push_back(t);
      s.generated++;
      emitted_tokens_.push_back(t);
      if (std::find(options_.stop_tokens.begin(), options_.stop_tokens.end(), t) != options_.stop_tokens.end()) {
        s.finished = true;
        break;
      }
    }
    if (s.generated >= s.req->max_output) s.finished = true;
    if (!kv_config_.enabled && !s.finished) {  // no KV cache: the next token recomputes everything
      blocks_.free(id);
      s.num_computed = 0;
      decoder_.release(id);
    }
    emitted_.push_back({&s, begin, emitted_tokens_.size(), true});
  }
  for (const Work& w : work_) {
    if (width_ > 0) {
      for (const Branch& b : w.seq->branches)
        if (blocks_.has(b.kv)) blocks_.publish_prefix(b.kv, b.tokens);
    } else if (blocks_.has(w.seq->req->id)) {
      blocks_.publish_prefix(w.seq->req->id, w.seq->tokens);
    }
  }
}

void StepLoop::record_step(double step_start, double duration) {
  RunTimeline& tl = result_.timeline;
  const double end = step_start + duration;
  for (const auto& [s, begin, stop, to_output] : emitted_) {
    RequestTimeline& rt = *s->timeline;
    std::vector<int>& output = result_.outputs[static_cast<std::size_t>(s - seqs_.data())];
    if (rt.first_token_s < 0 && begin < stop) {  // grown once, not doubled along the way
      rt.token_times.reserve(static_cast<std::size_t>(s->req->max_output));
      if (to_output) output.reserve(static_cast<std::size_t>(s->req->max_output));
    }
    for (std::size_t i = begin; i < stop; ++i) {
      const int t = emitted_tokens_[i];
      if (rt.first_token_s < 0) rt.first_token_s = end;
      rt.token_times.push_back(end);
      if (to_output) output.push_back(t);
      if (options_.on_token) options_.on_token(s->req->id, t);
    }
    // A branching request returns its sequences at its end: every returned token counts.
    rt.output_tokens = width_ > 0 ? static_cast<int>(rt.token_times.size()) : s->generated;
  }
  StepTimeline st;
  st.start_s = step_start;
  st.duration_s = duration;
  st.seqs = static_cast<int>(work_.size());
  st.rows = batch_.rows();
  st.prefill_tokens = prefill_tokens_;
  st.decode_tokens = decode_tokens_;
  const KvStats ks = blocks_.stats();
  st.kv_blocks_reserved = ks.blocks_reserved;
  st.kv_blocks_used = ks.blocks_used;
  st.kv_tokens = ks.tokens_stored;
  st.kv_blocks_free = ks.blocks_free;
  st.kv_blocks_cached = ks.blocks_cached;
  st.preemptions = tl.preemptions - preemptions_seen_;
  preemptions_seen_ = tl.preemptions;
  const OpTimes& ops = device_.op_times();
  double timed = 0;
  for (std::size_t c = 0; c < st.time_s.size(); ++c) {
    st.time_s[c] = ops.seconds[c] - step_ops0_.seconds[c];
    timed += st.time_s[c];
  }
  st.time_s[static_cast<std::size_t>(TimeCategory::kFramework)] += std::max(0.0, duration - timed);
  measure_kv_breakdown(st);
  tl.steps.push_back(st);
  now_ = end;
}

void StepLoop::finish_requests() {
  for (auto it = running_.begin(); it != running_.end();) {
    Seq* s = *it;
    if (!s->finished) {
      ++it;
      continue;
    }
    s->timeline->finish_s = now_;
    s->where = Seq::Where::kDone;
    free_kv(*s);
    decoder_.release(s->req->id);
    it = running_.erase(it);
    ++finished_;
  }
}

RunResult StepLoop::run() {
  setup();
  executor_.prepare(kv_config_);
  device_.reset_op_times();
  double step_wall_s = 0;  // real time inside steps, whatever the injected clock says
  double modelled_s = 0;   // the executor's modelled durations
  while (finished_ < requests_.size()) {
    if (options_.stop && options_.stop()) throw Interrupted("run interrupted");
    admit_arrivals();
    expire_timeouts();
    if (finished_ == requests_.size()) break;
    if (running_.empty() && waiting_.empty()) {
      now_ = requests_[order_[next_arrival_]].arrival_s;  // fast-forward the idle gap
      continue;
    }
    const double wall0 = steady_seconds();
    const double t0 = options_.clock();
    step_ops0_ = device_.op_times();
    if (!apply(schedule())) continue;
    build_batch();
    chose_ = choose_on_device();
    const double modelled = chose_ ? executor_.execute_choosing(batch_, copies_, choice_, draws_, chosen_)
                                   : executor_.execute(batch_, copies_, logits_);
    if (chose_) ++result_.timeline.device_choice_steps;
    commit();
    const double duration = modelled >= 0 ? modelled : std::max(0.0, options_.clock() - t0);
    modelled_s += std::max(0.0, modelled);
    record_step(now_, duration);
    finish_requests();
    const double wall = steady_seconds() - wall0;
    step_wall_s += wall;
    if (step_draft_s_ >= 0) {  // a drafting step: the rest of its time is the verify pass and its bookkeeping
      ++result_.timeline.spec_steps;
      result_.timeline.spec_verify_s += modelled >= 0 ? modelled : wall - step_draft_s_;
    }
  }
  RunTimeline& tl = result_.timeline;
  tl.kv_blocks_peak = blocks_.peak_blocks_reserved();
  tl.kv_blocks_free_end = blocks_.free_blocks();
  // Where the steps' time went: each category as timed on the device, the rest is framework.
  const OpTimes& times = device_.op_times();
  double timed = 0;
  for (int c = 0; c < kTimeCategories; ++c) {
    tl.time_s[static_cast<std::size_t>(c)] = times.seconds[static_cast<std::size_t>(c)];
    timed += times.seconds[static_cast<std::size_t>(c)];
  }
  // A simulated device charges modelled seconds: its steps' time is the modelled time.
  if (device_.kind() == DeviceKind::kSim) {
    step_wall_s = modelled_s;
    // Drafting's host seconds are not part of the modelled time; a draft's modelled passes are.
    result_.timeline.draft_s = static_cast<const SimDevice&>(device_).draft_seconds();
  }
  tl.step_wall_s = std::max(step_wall_s, timed);
  tl.time_s[static_cast<std::size_t>(TimeCategory::kFramework)] += tl.step_wall_s - timed;
  tl.timer_overhead_s = static_cast<double>(times.ops) * device_.timer_overhead_s();
  const Model::ForwardStats fw = executor_.forward_stats();
  tl.forwards = fw.forwards - forward0_.forwards;
  tl.forward_host_s = fw.host_s - forward0_.host_s;
  tl.graph_captures = fw.graph_captures - forward0_.graph_captures;
  tl.graph_replays = fw.graph_replays - forward0_.graph_replays;
  return std::move(result_);
}

}  // namespace detail

std::uint64_t StepExecutor::kv_bytes_per_block(int block_size) const {
  const ModelConfig& mc = config();
  return 2ull * static_cast<std::uint64_t>(mc.n_layers) * static_cast<std::uint64_t>(mc.kv_dim()) *
         static_cast<std::uint64_t>(block_size) * sizeof(float);
}

ModelExecutor::ModelExecutor(Model& model, Attention& attention, KvFormat kv_format)
    : model_(model), attention_(attention), kv_format_(kv_format) {}

// Layers a layer plan skips hold no K/V: the pool's bytes per block count only the others, so
// an automatically sized pool holds more blocks in the same memory.
std::uint64_t ModelExecutor::kv_bytes_per_block(int block_size) const {
  const LayerPlan* plan = model_.layer_plan();
  return KvStorage::bytes_per_token(model_.config(), kv_format_, plan ? plan->skip : std::vector<bool>{}) *
         static_cast<std::uint64_t>(block_size);
}

void ModelExecutor::prepare(const KvCacheConfig& kv) {
  const LayerPlan* plan = model_.layer_plan();
  storage_ = std::make_unique<KvStorage>(model_.device(), model_.config(), kv.num_blocks, kv.block_size, kv_format_,
                                         plan ? plan->skip : std::vector<bool>{});
}

double StepExecutor::execute_choosing(const StepBatch&, std::span<const BlockCopy>, const TokenChoice&,
                                      std::span<const double>, std::vector<int>&) {
  throw Error("this executor does not choose tokens (execute_choosing); the engine asks only where chooses_tokens()");
}

void ModelExecutor::apply_copies(std::span<const BlockCopy> copies) {
  check(storage_ != nullptr, "ModelExecutor::execute before prepare");
  if (!copies.empty()) {
    OpScope timed(model_.device(), TimeCategory::kNormRopeAct);
    storage_->copy_blocks(copies);
  }
}

double ModelExecutor::execute(const StepBatch& batch, std::span<const BlockCopy> copies, std::vector<float>& logits) {
  apply_copies(copies);
  model_.forward(batch, *storage_, attention_, logits);
  return -1;
}

double ModelExecutor::execute_choosing(const StepBatch& batch, std::span<const BlockCopy> copies,
                                       const TokenChoice& choice, std::span<const double> draws,
                                       std::vector<int>& tokens) {
  apply_copies(copies);
  model_.forward_choosing(batch, *storage_, attention_, choice, draws, tokens);
  return -1;
}

Engine::Engine(StepExecutor& executor, Scheduler& scheduler, Decoder& decoder, EngineOptions options)
    : executor_(executor), scheduler_(scheduler), decoder_(decoder), options_(std::move(options)) {
  if (!options_.clock) options_.clock = detail::steady_seconds;
}

Engine::Engine(Model& model, Attention& attention, Scheduler& scheduler, Decoder& decoder, EngineOptions options)
    : owned_executor_(std::make_unique<ModelExecutor>(model, attention)),
      executor_(*owned_executor_),
      scheduler_(scheduler),
      decoder_(decoder),
      options_(std::move(options)) {
  if (!options_.clock) options_.clock = detail::steady_seconds;
  model.set_layer_plan(decoder.layer_plan());  // the decoder's layer skipping / early exit
}

Engine::~Engine() = default;

RunResult Engine::run(const std::vector<Request>& requests) {
  KvCacheConfig kv_config = options_.kv;
  check(kv_config.block_size > 0, "kv.block_size must be positive");
  if (kv_config.max_seq_len <= 0) kv_config.max_seq_len = executor_.config().max_seq_len;
  if (kv_config.num_blocks <= 0 && kv_config.memory_mb > 0) {
    // A fixed memory budget: as many blocks as its bytes hold in this executor's KV format.
    const std::uint64_t block_bytes = executor_.kv_bytes_per_block(kv_config.block_size);
    const std::uint64_t blocks = (static_cast<std::uint64_t>(kv_config.memory_mb) << 20) / std::max<std::uint64_t>(1, block_bytes);
    if (blocks < 1 || blocks > static_cast<std::uint64_t>(1 << 26))
      throw Error("kv.memory_mb = " + std::to_string(kv_config.memory_mb) + " holds " + std::to_string(blocks) +
                  " blocks of " + std::to_string(block_bytes) + " bytes; allowed: a budget of 1 to 2^26 blocks");
    kv_config.num_blocks = static_cast<int>(blocks);
  }
  if (kv_config.num_blocks <= 0) {
    const int max_draft = decoder_.max_draft_tokens();
    const int branches = std::max(1, decoder_.branch_width());
    long long blocks = 0;
    for (const auto& r : requests) {
      const int prompt = static_cast<int>(r.prompt.size());
      const int life = std::max(prompt + r.max_output + max_draft,
                                reservation_tokens(kv_config.reservation, prompt, r.max_output, max_draft, kv_config.max_seq_len));
      blocks += SchedulerInput::branch_blocks(life, prompt, branches, kv_config.block_size);
    }
    // Enough for every request at once, capped so a long trace cannot ask for more memory
    // than kAutoKvPoolBytes; set kv.num_blocks to study memory pressure.
    const long long block_bytes =
        std::max<long long>(1, static_cast<long long>(executor_.kv_bytes_per_block(kv_config.block_size)));
    blocks = std::min(blocks, std::max<long long>(1, kAutoKvPoolBytes / block_bytes));
    kv_config.num_blocks = static_cast<int>(std::max<long long>(1, blocks));
  }
  // The output cap: requests it cuts run with the capped length and are marked truncated.
  std::vector<Request> capped;
  const int cap = options_.max_new_tokens;
  const bool cuts = cap > 0 && std::any_of(requests.begin(), requests.end(),
                                           [&](const Request& r) { return r.max_output > cap; });
  if (cuts) {
    capped = requests;
    for (Request& r : capped) r.max_output = std::min(r.max_output, cap);
  }
  detail::StepLoop loop(executor_, scheduler_, decoder_, options_, cuts ? capped : requests, kv_config);
  RunResult result = loop.run();
  for (std::size_t i = 0; cuts && i < requests.size(); ++i) {
    RequestTimeline& rt = result.timeline.requests[i];
    if (requests[i].max_output > cap && rt.status == RequestStatus::kOk) rt.status = RequestStatus::kTruncated;
  }
  return result;
}

}  // namespace inferlab
