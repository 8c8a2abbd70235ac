#include "inferlab/engine.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <limits>
#include <unordered_map>

#include "inferlab/batch.h"
#include "inferlab/error.h"
#include "inferlab/log.h"

namespace inferlab {

namespace {

constexpr long long kAutoKvBytes = 1LL << 30;  // cap of an automatically sized KV pool

struct Seq {
  const Request* req = nullptr;
  std::vector<int> tokens;  // prompt + generated
  int num_computed = 0;     // tokens whose K/V are in the cache
  int generated = 0;
  bool finished = false;
  Rng rng;
  RequestTimeline* timeline = nullptr;
};

SeqView view_of(const Seq& s, const KvCache& kv) {
  SeqView v;
  v.id = s.req->id;
  v.arrival_s = s.req->arrival_s;
  v.priority = s.req->priority;
  v.prompt_len = static_cast<int>(s.req->prompt.size());
  v.max_output = s.req->max_output;
  v.num_tokens = static_cast<int>(s.tokens.size());
  v.num_computed = s.num_computed;
  v.generated = s.generated;
  v.blocks_held = kv.has(v.id) ? static_cast<int>(kv.block_table(v.id).size()) : 0;
  return v;
}

// Scheduled work for one sequence in this step.
struct Work {
  Seq* seq;
  int n_real;                // known tokens run this step
  std::vector<int> drafts;   // speculative tokens appended after them
  int logit_offset = -1;     // first logits row, -1 when no logits are needed
};

}  // namespace

Engine::Engine(Model& model, Attention& attention, Scheduler& scheduler, Decoder& decoder,
               ThreadPool& pool, EngineOptions options)
    : model_(model), attention_(attention), scheduler_(scheduler), decoder_(decoder), pool_(pool),
      options_(std::move(options)) {
  if (!options_.clock) {
    options_.clock = [] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
    };
  }
}

RunResult Engine::run(const std::vector<Request>& requests) {
  const int vocab = model_.config().vocab_size;
  const int max_draft = decoder_.max_draft_tokens();
  KvCacheConfig kv_config = options_.kv;
  check(kv_config.block_size > 0, "kv.block_size must be positive");
  if (kv_config.num_blocks <= 0) {
    long long blocks = 0;
    for (const auto& r : requests)
      blocks += (static_cast<long long>(r.prompt.size()) + r.max_output + max_draft + kv_config.block_size - 1) /
                kv_config.block_size;
    // Enough for every request at once, capped so a long trace cannot ask for more memory
    // than kAutoKvBytes; set kv.num_blocks to study memory pressure.
    const ModelConfig& mc = model_.config();
    const long long block_bytes = 2LL * mc.n_layers * mc.kv_dim() * kv_config.block_size * static_cast<long long>(sizeof(float));
    blocks = std::min(blocks, std::max<long long>(1, kAutoKvBytes / block_bytes));
    kv_config.num_blocks = static_cast<int>(std::max<long long>(1, blocks));
  }
  KvCache kv(model_.config(), kv_config);

  RunResult result;
  RunTimeline& tl = result.timeline;
  tl.block_size = kv_config.block_size;
  tl.kv_blocks_total = kv_config.num_blocks;
  tl.weights_bytes = model_.weight_bytes();
  tl.requests.resize(requests.size());
  result.outputs.resize(requests.size());

  std::vector<Seq> seqs(requests.size());
  std::unordered_map<int, Seq*> by_id;
  std::vector<std::size_t> order(requests.size());
  for (std::size_t i = 0; i < requests.size(); ++i) {
    const Request& r = requests[i];
    check(!r.prompt.empty(), "request " + std::to_string(r.id) + " has an empty prompt");
    check(r.max_output >= 1, "request " + std::to_string(r.id) + " asks for no output tokens");
    for (int t : r.prompt)
      check(t >= 0 && t < vocab, "request " + std::to_string(r.id) + " has token id " + std::to_string(t) +
                                     " outside the vocabulary [0, " + std::to_string(vocab) + ")");
    check(by_id.emplace(r.id, &seqs[i]).second, "duplicate request id " + std::to_string(r.id));
    seqs[i].req = &r;
    seqs[i].tokens = r.prompt;
    seqs[i].rng = Rng(mix_seed(options_.seed, static_cast<std::uint64_t>(r.id)));
    seqs[i].timeline = &tl.requests[i];
    tl.requests[i].id = r.id;
    tl.requests[i].arrival_s = r.arrival_s;
    tl.requests[i].prompt_tokens = static_cast<int>(r.prompt.size());
    order[i] = i;
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return requests[a].arrival_s < requests[b].arrival_s; });

  std::deque<Seq*> waiting;   // arrived, not admitted (preempted ones pushed to the front)
  std::vector<Seq*> running;  // admission order
  std::size_t next_arrival = 0, finished = 0;
  double now = requests.empty() ? 0.0 : requests[order[0]].arrival_s;

  StepBatch batch;
  std::vector<float> logits;
  std::vector<Work> work;
  std::vector<SeqView> running_views, waiting_views;
  std::vector<int> accepted;
  const bool keep_capacity = kv_config.reserve_full;

  // A request entering the queue (on arrival, or preempted) takes the longest cached prefix of
  // its known tokens; at least one token is left to compute so that it produces logits.
  auto enqueue = [&](Seq* s, bool front) {
    const int matched = kv.acquire_prefix(s->req->id, s->tokens, static_cast<int>(s->tokens.size()) - 1);
    s->num_computed = matched;
    if (s->timeline->preemptions == 0)
      s->timeline->cached_prompt_tokens = std::min(matched, static_cast<int>(s->req->prompt.size()));
    if (front) waiting.push_front(s);
    else waiting.push_back(s);
  };

  while (finished < requests.size()) {
    while (next_arrival < order.size() && requests[order[next_arrival]].arrival_s <= now)
      enqueue(&seqs[order[next_arrival++]], false);
    if (running.empty() && waiting.empty()) {
      now = requests[order[next_arrival]].arrival_s;  // fast-forward the idle gap
      continue;
    }
    const double t0 = options_.clock();

    running_views.clear();
    waiting_views.clear();
    for (Seq* s : running) running_views.push_back(view_of(*s, kv));
    for (Seq* s : waiting) waiting_views.push_back(view_of(*s, kv));
    SchedulerInput input;
    input.now_s = now;
    input.running = running_views;
    input.waiting = waiting_views;
    input.free_blocks = kv.free_blocks();
    input.block_size = kv_config.block_size;
    input.reserve_full = kv_config.reserve_full;
    input.max_draft_tokens = max_draft;
    ScheduleDecision decision = scheduler_.schedule(input);

    for (int id : decision.preempt) {
      auto it = std::find_if(running.begin(), running.end(), [&](Seq* s) { return s->req->id == id; });
      check(it != running.end(), "scheduler preempted request " + std::to_string(id) + " which is not running");
      Seq* s = *it;
      running.erase(it);
      kv.free(id);
      s->timeline->preemptions++;
      tl.preemptions++;
      enqueue(s, true);  // recompute prompt + generated tokens (minus any cached prefix) when readmitted
    }

    work.clear();
    for (const ScheduledSeq& sch : decision.scheduled) {
      auto found = by_id.find(sch.id);
      check(found != by_id.end(), "scheduler scheduled unknown request " + std::to_string(sch.id));
      Seq* s = found->second;
      check(std::none_of(work.begin(), work.end(), [&](const Work& w) { return w.seq == s; }),
            "scheduler scheduled request " + std::to_string(sch.id) + " twice in one step");
      auto wit = std::find(waiting.begin(), waiting.end(), s);
      bool is_running = std::find(running.begin(), running.end(), s) != running.end();
      check(wit != waiting.end() || is_running,
            "scheduler scheduled request " + std::to_string(sch.id) + " which is neither waiting nor running");
      const int pending = static_cast<int>(s->tokens.size()) - s->num_computed;
      const bool decode = pending == 1 && s->num_computed > 0;
      const int limit = decode ? 1 + max_draft : pending;
      check(sch.num_tokens >= 1 && sch.num_tokens <= limit,
            "scheduler asked for " + std::to_string(sch.num_tokens) + " tokens of request " +
                std::to_string(sch.id) + " which allows 1.." + std::to_string(limit));
      Work w{s, std::min(sch.num_tokens, pending), {}, -1};
      const int remaining = s->req->max_output - s->generated;
      if (decode && sch.num_tokens > 1 && remaining > 1)
        decoder_.propose(s->tokens, std::min(sch.num_tokens - 1, remaining - 1), w.drafts);
      int target = s->num_computed + w.n_real + static_cast<int>(w.drafts.size());
      if (kv_config.reserve_full)
        target = std::max(target, static_cast<int>(s->req->prompt.size()) + s->req->max_output + max_draft);
      if (!kv.reserve(s->req->id, target))
        throw Error("scheduler overcommitted the KV pool: request " + std::to_string(sch.id) + " needs " +
                    std::to_string(kv.blocks_needed(s->req->id, target)) + " blocks, " +
                    std::to_string(kv.free_blocks()) + " free");
      if (wit != waiting.end()) {
        waiting.erase(wit);
        running.push_back(s);
      }
      work.push_back(std::move(w));
    }
    if (work.empty()) {
      if (!running.empty() || !decision.preempt.empty())
        throw Error("scheduler made no progress with " + std::to_string(running.size()) + " running requests");
      if (next_arrival < order.size()) {  // nothing fits yet: wait for the next arrival
        now = std::max(now, requests[order[next_arrival]].arrival_s);
        continue;
      }
      const Seq* s = waiting.front();
      // The blocks for its whole life (prompt and all but the last output token), which is what
      // a scheduler checks against the pool before it admits a request.
      const int prompt = static_cast<int>(s->req->prompt.size());
      const int life = kv_config.reserve_full ? prompt + s->req->max_output + max_draft
                                              : prompt + std::max(s->req->max_output, 1) - 1;
      int need = kv.blocks_for(std::max(life, static_cast<int>(s->tokens.size()) + 1));
      throw Error("request " + std::to_string(s->req->id) + " can never be scheduled: it needs " +
                  std::to_string(need) + " KV blocks, the pool has " + std::to_string(kv_config.num_blocks) +
                  " (raise kv.num_blocks or lower the lengths)");
    }

    // Flatten into one batch.
    batch.clear();
    int logit_rows = 0, prefill_tokens = 0, decode_tokens = 0;
    for (Work& w : work) {
      Seq& s = *w.seq;
      const int id = s.req->id;
      const int start = s.num_computed;
      const int n = w.n_real + static_cast<int>(w.drafts.size());
      for (int i = 0; i < n; ++i) {
        const int pos = start + i;
        batch.tokens.push_back(i < w.n_real ? s.tokens[static_cast<std::size_t>(pos)]
                                            : w.drafts[static_cast<std::size_t>(i - w.n_real)]);
        batch.positions.push_back(pos);
        batch.slots.push_back(kv.slot(id, pos));
      }
      const bool reaches_end = start + w.n_real == static_cast<int>(s.tokens.size());
      if (reaches_end) {
        const int first = batch.query_start.back() + w.n_real - 1;
        w.logit_offset = logit_rows;
        for (int r = first; r < batch.query_start.back() + n; ++r) batch.logit_rows.push_back(r);
        logit_rows += 1 + static_cast<int>(w.drafts.size());
      }
      // A decode step feeds back a generated token; a prompt's last one-token chunk is prefill.
      const bool decode_step = s.num_computed > 0 && w.n_real == 1 && s.generated > 0;
      (decode_step ? decode_tokens : prefill_tokens) += n;
      // (sequence, step) pairs that emit tokens after the request's first, as compute_metrics
      // counts them: decode steps, and the recompute of a preempted request that had output.
      tl.decode_seq_steps += reaches_end && s.generated > 0;
      batch.query_start.push_back(batch.query_start.back() + n);
      batch.context_len.push_back(start + n);
      batch.block_tables.push_back(kv.block_table(id));
    }

    model_.forward(batch, kv, attention_, pool_, logits);

    std::vector<std::pair<Seq*, std::vector<int>>> emitted;
    for (Work& w : work) {
      Seq& s = *w.seq;
      const int id = s.req->id;
      if (w.logit_offset < 0) {  // a prefill chunk that does not reach the last known token
        s.num_computed += w.n_real;
        kv.set_length(id, s.num_computed);
        continue;
      }
      accepted.clear();
      decoder_.accept(s.tokens, w.drafts,
                      logits.data() + static_cast<std::size_t>(w.logit_offset) * vocab, vocab, s.rng, accepted);
      const int m = static_cast<int>(accepted.size());
      check(m >= 1 && m <= 1 + static_cast<int>(w.drafts.size()),
            "decoder accepted " + std::to_string(m) + " tokens for " + std::to_string(w.drafts.size()) + " drafts");
      for (int i = 0; i + 1 < m; ++i)
        check(accepted[static_cast<std::size_t>(i)] == w.drafts[static_cast<std::size_t>(i)],
              "decoder accepted a token that differs from the draft it verified");
      tl.spec_proposed += static_cast<long long>(w.drafts.size());
      tl.spec_accepted += m - 1;
      // K/V is valid for the known tokens plus the accepted drafts; rejected drafts roll back.
      s.num_computed += w.n_real + (m - 1);
      kv.set_length(id, s.num_computed + static_cast<int>(w.drafts.size()) - (m - 1));
      if (m - 1 < static_cast<int>(w.drafts.size())) kv.truncate(id, s.num_computed, keep_capacity);
      std::vector<int> out;
      for (int t : accepted) {
        if (s.generated >= s.req->max_output) break;
        s.tokens.push_back(t);
        s.generated++;
        out.push_back(t);
        if (std::find(options_.stop_tokens.begin(), options_.stop_tokens.end(), t) != options_.stop_tokens.end()) {
          s.finished = true;
          break;
        }
      }
      if (s.generated >= s.req->max_output) s.finished = true;
      if (!kv_config.enabled && !s.finished) {  // no KV cache: the next token recomputes everything
        kv.free(id);
        s.num_computed = 0;
      }
      emitted.emplace_back(&s, std::move(out));
    }

    for (const Work& w : work)
      if (kv.has(w.seq->req->id)) kv.publish_prefix(w.seq->req->id, w.seq->tokens);

    const double duration = options_.clock() - t0;
    const double end = now + std::max(0.0, duration);
    for (auto& [s, out] : emitted) {
      RequestTimeline& rt = *s->timeline;
      for (int t : out) {
        if (rt.first_token_s < 0) rt.first_token_s = end;
        rt.token_times.push_back(end);
        result.outputs[static_cast<std::size_t>(s - seqs.data())].push_back(t);
        if (options_.on_token) options_.on_token(s->req->id, t);
      }
      rt.output_tokens = s->generated;
    }
    StepTimeline st;
    st.start_s = now;
    st.duration_s = std::max(0.0, duration);
    st.seqs = static_cast<int>(work.size());
    st.rows = batch.rows();
    st.prefill_tokens = prefill_tokens;
    st.decode_tokens = decode_tokens;
    KvStats ks = kv.stats();
    st.kv_blocks_reserved = ks.blocks_reserved;
    st.kv_blocks_used = ks.blocks_used;
    st.kv_tokens = ks.tokens_stored;
    tl.steps.push_back(st);
    now = end;

    for (auto it = running.begin(); it != running.end();) {
      Seq* s = *it;
      if (!s->finished) {
        ++it;
        continue;
      }
      s->timeline->finish_s = now;
      kv.free(s->req->id);
      it = running.erase(it);
      ++finished;
    }
  }
  tl.kv_blocks_peak = kv.peak_blocks_reserved();
  return result;
}

}  // namespace inferlab
