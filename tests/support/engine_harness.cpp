#include "engine_harness.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <set>
#include <string>

#include "inferlab/error.h"
#include "stub_executor.h"

namespace inferlab::testing {

namespace {

constexpr int kVocab = 4096;
constexpr int kMaxId = 4000;
constexpr int kMarkerBase = 3;  // the token after the shared prefix is kMarkerBase + id

int hashed_token(int id, int pos) {
  const unsigned h = static_cast<unsigned>(id + 1) * 2246822519u ^ static_cast<unsigned>(pos) * 3266489917u;
  return kMarkerBase + static_cast<int>((h >> 5) % static_cast<unsigned>(kVocab - kMarkerBase));
}

// [shared prefix][kMarkerBase + id][the request's own tokens].
std::vector<int> prompt_of(const RequestSpec& r, int shared_prefix) {
  std::vector<int> p(static_cast<std::size_t>(r.prompt));
  for (int j = 0; j < r.prompt; ++j)
    p[static_cast<std::size_t>(j)] =
        j < shared_prefix ? hashed_token(-1, j) : j == shared_prefix ? kMarkerBase + r.id : hashed_token(r.id, j);
  return p;
}

// Greedy verification against the stub's logits; drafts are the stub's own greedy chain for
// the first accepted(id, step, n) of them and a wrong token after.
class DraftDecoder final : public Decoder {
 public:
  DraftDecoder(const StubExecutor& stub, const HarnessConfig& config, const int& step,
               std::map<int, long long>& tokens_processed)
      : stub_(stub), config_(config), step_(step), tokens_processed_(tokens_processed) {}

  int max_draft_tokens() const override { return config_.max_draft_tokens; }

  void propose(std::span<const int> tokens, int max_draft, std::vector<int>& drafts) override {
    drafts.clear();
    const int want = config_.accepted ? config_.accepted(id_of(tokens), step_, max_draft) : 0;
    const int right = std::clamp(want, 0, max_draft);
    int prev = tokens.back(), pos = static_cast<int>(tokens.size()) - 1;
    for (int i = 0; i < max_draft; ++i) {
      const int greedy = stub_.next_token(prev, pos++);
      prev = i < right ? greedy : (greedy == kMarkerBase ? kMarkerBase + 1 : kMarkerBase);
      drafts.push_back(prev);
    }
  }

  void accept(std::span<const int> tokens, std::span<const int> drafts, const float* logits, int vocab, Rng&,
              std::vector<int>& out) override {
    const std::size_t before = out.size();
    for (std::size_t i = 0; i <= drafts.size(); ++i) {
      const float* row = logits + i * static_cast<std::size_t>(vocab);
      const int best = static_cast<int>(std::max_element(row, row + vocab) - row);
      out.push_back(best);
      if (i == drafts.size() || drafts[i] != best) break;
    }
    // The decode step's 1 token is counted from the decision; the accepted drafts here.
    tokens_processed_[id_of(tokens)] += static_cast<long long>(out.size() - before) - 1;
  }

 private:
  int id_of(std::span<const int> tokens) const {
    return tokens[static_cast<std::size_t>(config_.shared_prefix)] - kMarkerBase;
  }

  const StubExecutor& stub_;
  const HarnessConfig& config_;
  const int& step_;
  std::map<int, long long>& tokens_processed_;
};

// Forwards to the scheduler under test, shows each decision to the observer and records it.
class RecordingScheduler final : public Scheduler {
 public:
  RecordingScheduler(Scheduler& inner, const StepObserver& observe, HarnessResult& result)
      : inner_(inner), observe_(observe), result_(result) {}

  const int& step() const { return step_; }

  ScheduleDecision schedule(const SchedulerInput& in) override {
    step_ = calls_++;
    // A request preempted last call was re-queued with whatever prefix the cache still had.
    for (const SeqView& s : in.waiting) {
      auto it = preempted_computed_.find(s.id);
      if (it == preempted_computed_.end()) continue;
      result_.recomputed[s.id] += it->second - s.num_computed;
      preempted_computed_.erase(it);
    }
    ScheduleDecision d = inner_.schedule(in);
    if (observe_) observe_(step_, in, d);

    auto view = [&](int id) -> const SeqView* {
      for (auto list : {in.running, in.waiting})
        for (const SeqView& s : list)
          if (s.id == id) return &s;
      return nullptr;
    };
    std::set<int> running;
    for (const SeqView& s : in.running) running.insert(s.id);
    for (int id : d.preempt) {
      if (const SeqView* s = view(id)) preempted_computed_[id] = s->num_computed;
      running.erase(id);
    }
    int step_tokens = 0;
    for (const ScheduledSeq& sc : d.scheduled) {
      step_tokens += sc.num_tokens;
      running.insert(sc.id);
      const SeqView* s = view(sc.id);
      if (s == nullptr) continue;  // the engine rejects it
      // A decode step counts its known token here and its accepted drafts in the decoder.
      result_.tokens_processed[sc.id] += s->in_decode() ? 1 : sc.num_tokens;
    }
    result_.max_step_tokens = std::max(result_.max_step_tokens, step_tokens);
    result_.max_running = std::max(result_.max_running, static_cast<int>(running.size()));
    return d;
  }

 private:
  Scheduler& inner_;
  const StepObserver& observe_;
  HarnessResult& result_;
  int calls_ = 0, step_ = 0;
  std::map<int, int> preempted_computed_;  // id -> tokens computed when it was preempted
};

void expect_clean(const StubExecutor& stub) {
  for (const std::string& v : stub.violations()) ADD_FAILURE() << "StubExecutor: " << v;
}

// Every output token must be the stub's greedy token after the one before it, whatever the
// batching, chunking, preemption and speculation did.
void expect_greedy_outputs(const StubExecutor& stub, const std::vector<Request>& requests, const RunResult& run) {
  for (std::size_t i = 0; i < requests.size(); ++i) {
    int prev = requests[i].prompt.back(), pos = static_cast<int>(requests[i].prompt.size()) - 1;
    const std::vector<int>& out = run.outputs[i];
    for (std::size_t k = 0; k < out.size(); ++k) {
      const int want = stub.next_token(prev, pos++);
      if (out[k] != want) {
        ADD_FAILURE() << "request " << requests[i].id << " output " << k << " is " << out[k] << ", the stub says "
                      << want;
        break;
      }
      prev = out[k];
    }
  }
}

}  // namespace

HarnessResult run_scheduler(Scheduler& scheduler, const std::vector<RequestSpec>& specs, const HarnessConfig& config,
                            const StepObserver& observe) {
  std::vector<Request> requests;
  for (const RequestSpec& s : specs) {
    check(s.id >= 0 && s.id < kMaxId, "run_scheduler: request id " + std::to_string(s.id) + " outside [0, 4000)");
    check(s.prompt > config.shared_prefix,
          "run_scheduler: request " + std::to_string(s.id) + " has no prompt tokens past the shared prefix");
    Request r;
    r.id = s.id;
    r.arrival_s = s.arrival_s;
    r.prompt = prompt_of(s, config.shared_prefix);
    r.max_output = s.max_output;
    r.priority = s.priority;
    r.slo_class = s.slo_class >= 0 ? s.slo_class : s.priority;
    requests.push_back(std::move(r));
  }

  const double step_s = config.step_s;
  StubExecutor stub(stub_model_config(kVocab), [step_s](const StepBatch&) { return step_s; });
  HarnessResult result;
  RecordingScheduler recording(scheduler, observe, result);
  DraftDecoder decoder(stub, config, recording.step(), result.tokens_processed);
  EngineOptions options;
  options.kv = config.kv;
  options.queue_timeout_s = config.queue_timeout_s;
  options.timeout_s = config.timeout_s;
  options.max_new_tokens = config.max_new_tokens;
  Engine engine(stub, recording, decoder, options);
  RunResult run;
  try {
    run = engine.run(requests);
  } catch (...) {
    expect_clean(stub);
    throw;
  }
  expect_clean(stub);
  expect_greedy_outputs(stub, requests, run);

  const RunTimeline& tl = run.timeline;
  std::vector<std::size_t> order(tl.requests.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return tl.requests[a].finish_s < tl.requests[b].finish_s; });
  for (std::size_t i : order)
    if (tl.requests[i].finish_s >= 0) result.finished.push_back(tl.requests[i].id);
  for (const RequestTimeline& rt : tl.requests) result.generated[rt.id] = rt.output_tokens;
  result.steps = static_cast<int>(tl.steps.size());
  result.preemptions = tl.preemptions;
  result.peak_blocks = tl.kv_blocks_peak;
  result.timeline = std::move(run.timeline);
  return result;
}

SeqView waiting_seq(int id, double arrival, int prompt, int output, int priority) {
  return SeqView{.id = id, .arrival_s = arrival, .priority = priority, .slo_class = priority,
                 .prompt_len = prompt, .max_output = output, .num_tokens = prompt};
}

SeqView decode_seq(int id, int prompt, int generated, int output, int blocks_held, int priority) {
  SeqView s = waiting_seq(id, 0.0, prompt, output, priority);
  s.generated = generated;
  s.num_tokens = prompt + generated;
  s.num_computed = s.num_tokens - 1;
  s.blocks_held = blocks_held;
  return s;
}

std::vector<int> scheduled_ids(const ScheduleDecision& decision) {
  std::vector<int> out;
  for (const ScheduledSeq& s : decision.scheduled) out.push_back(s.id);
  return out;
}

SchedulerInput step_input(std::span<const SeqView> running, std::span<const SeqView> waiting, int free_blocks) {
  SchedulerInput in;
  in.running = running;
  in.waiting = waiting;
  in.free_blocks = free_blocks;
  return in;
}

void expect_every_token_once(const HarnessResult& r, const std::vector<RequestSpec>& requests) {
  EXPECT_EQ(r.finished.size(), requests.size());
  EXPECT_EQ(r.preemptions, 0);
  for (const RequestSpec& q : requests) {
    const auto processed = r.tokens_processed.find(q.id);
    const auto generated = r.generated.find(q.id);
    EXPECT_EQ(processed == r.tokens_processed.end() ? -1 : processed->second, q.prompt + q.max_output - 1)
        << "request " << q.id;
    EXPECT_EQ(generated == r.generated.end() ? -1 : generated->second, q.max_output) << "request " << q.id;
  }
}

}  // namespace inferlab::testing
