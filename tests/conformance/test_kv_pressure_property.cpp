// KV-pressure property test: seeded random workloads × every registered scheduler (defaults) ×
// prefix caching off/on × decoders that draft (prompt lookup, speculative with a draft model)
// or branch (beam search, n > 1 samples) or neither × KV pools from the smallest that holds the
// largest request alone upward, all through the real Engine over the StubExecutor. Each run must
//  - never overcommit the pool (the engine throws "scheduler overcommitted the KV pool"),
//  - never deadlock or livelock (the engine throws "made no progress" / "can never be
//    scheduled"; a step bound catches a scheduler that spins),
//  - preempt when it must (a run that needs a preemption and does not make one stalls: caught
//    above), and the matrix does preempt,
//  - finish every request with its tokens (the greedy ones for lossless decoders, else those of
//    a roomy run without caching) or report it (status rejected),
//  - hold no more than the pool, leak no block, and count every row once (prefix hits
//    subtracted).
// A pool one block smaller than the smallest must be reported as such (or its requests that
// cannot fit rejected), not hang.
#include <algorithm>
#include <array>
#include <map>
#include <iostream>

#include <gtest/gtest.h>

#include "engine_runs.h"
#include "inferlab/error.h"
#include "inferlab/support/rng.h"
#include "inferlab/model/weights.h"
#include "plugin_cases.h"

namespace inferlab::testing {
namespace {

constexpr int kVocab = 64;
constexpr int kSeeds = 8;
constexpr long long kMaxSteps = 20000;  // far above any run here (a few hundred steps)

struct DecoderCase {
  std::string name;   // for messages
  std::string plugin;
  std::map<std::string, ParamValue> given;
  bool lossless = true;  // tokens are the greedy ones
};

std::vector<DecoderCase> decoder_cases() {
  return {{"greedy", "sampling", {}, true},
          {"prompt_lookup", "prompt_lookup", {{"num_draft", std::int64_t{3}}}, true},
          {"speculative", "speculative", {{"num_draft", std::int64_t{3}}, {"draft_layers", std::int64_t{1}}}, true},
          {"beam", "beam", {{"width", std::int64_t{3}}}, false},
          {"n3", "sampling", {{"n", std::int64_t{3}}, {"temperature", 1.0}}, false}};
}

// A draft model for 'speculative': random weights of the stub's vocabulary, so most drafts are
// rejected and rolled back.
const ModelWeights& draft_weights() {
  static const ModelWeights w = [] {
    ModelConfig c = stub_model_config(kVocab);
    c.n_layers = 2;
    c.max_seq_len = 4096;
    return random_weights(c, 3);
  }();
  return w;
}

// Requests that share one of two system prompts (whole blocks and a part block), or none, with
// random tails, outputs and arrivals (together, spread out, or in bursts).
Workload random_workload(std::uint64_t seed) {
  Rng rng(seed);
  Workload w;
  w.name = "seed " + std::to_string(seed);
  const int bs = std::array<int, 3>{2, 4, 8}[static_cast<std::size_t>(rng.uniform_int(0, 3))];
  w.kv.block_size = bs;
  std::vector<int> system[2];
  for (auto& p : system) {
    const int len = static_cast<int>(rng.uniform_int(0, 3 * bs + bs / 2 + 1));
    for (int t = 0; t < len; ++t) p.push_back(static_cast<int>(rng.uniform_int(3, kVocab)));
  }
  const int n = static_cast<int>(rng.uniform_int(4, 10));
  const int arrivals = static_cast<int>(rng.uniform_int(0, 3));
  double t = 0;
  for (int i = 0; i < n; ++i) {
    Request r;
    r.id = i;
    const int which = static_cast<int>(rng.uniform_int(0, 3));
    if (which < 2) r.prompt = system[which];
    const int tail = static_cast<int>(rng.uniform_int(1, 3 * bs + 1));
    for (int k = 0; k < tail; ++k) r.prompt.push_back(static_cast<int>(rng.uniform_int(3, kVocab)));
    r.max_output = static_cast<int>(rng.uniform_int(1, 13));
    r.priority = r.slo_class = static_cast<int>(rng.uniform_int(0, 3));
    if (arrivals == 1) t += 0.004 * rng.uniform();
    if (arrivals == 2 && i % 3 == 0) t += 0.05;
    r.arrival_s = t;
    w.requests.push_back(std::move(r));
  }
  return w;
}

// The blocks a request needs for its whole life, in the schedulers' arithmetic: the smallest
// pool it can run alone in.
int smallest_pool(const Workload& w, int branches) {
  int most = 0;
  for (const Request& r : w.requests) {
    const int prompt = static_cast<int>(r.prompt.size());
    most = std::max(most, SchedulerInput::branch_blocks(prompt + r.max_output - 1, prompt, branches, w.kv.block_size));
  }
  return most;
}

// Forwards to the scheduler, bounds the steps, and counts what preemption throws away and what
// prefix hits save (the tokens a waiting request already has when it is admitted).
class Probe final : public Scheduler {
 public:
  explicit Probe(Scheduler& inner) : inner_(inner) {}
  ScheduleDecision schedule(const SchedulerInput& in) override {
    if (++steps_ > kMaxSteps) throw Error("livelock: " + std::to_string(kMaxSteps) + " schedule calls");
    ScheduleDecision d = inner_.schedule(in);
    for (int id : d.preempt)
      for (const SeqView& s : in.running)
        if (s.id == id) recomputed_ += s.num_computed;
    for (const ScheduledSeq& sch : d.scheduled)
      for (const SeqView& s : in.waiting)
        if (s.id == sch.id) saved_ += s.num_computed;
    return d;
  }
  long long recomputed_ = 0, saved_ = 0, steps_ = 0;

 private:
  Scheduler& inner_;
};

struct Outcome {
  RunResult result;
  std::vector<std::string> violations;
  long long recomputed = 0, saved = 0;
};

class KvPressureProperty : public ::testing::TestWithParam<PluginCase> {
 protected:
  void SetUp() override {
    std::string why;
    device_ = open_device(GetParam().device, why);
    if (!device_) GTEST_SKIP() << why;
    INFERLAB_SKIP_IF_REFUSED(GetParam(), stub_model_config(kVocab));
    attention_ = reference_attention_on(*device_);
  }

  Outcome run(const DecoderCase& dc, const Workload& w, const std::string& scheduler) {
    const Registry& reg = conformance_registry();
    // edf with deadlines and admission control, so that refusals (reported) happen too.
    std::map<std::string, ParamValue> given;
    if (scheduler == "edf") given = {{"ttft_slo_ms", std::string("20,200,2000")}, {"reject_late", true}};
    std::shared_ptr<Scheduler> sched =
        reg.create_scheduler(scheduler, reg.resolve(PluginKind::kScheduling, scheduler, given, "property"), *device_);
    std::shared_ptr<Decoder> decoder =
        reg.create_decoder(dc.plugin, reg.resolve(PluginKind::kDecoding, dc.plugin, dc.given, "property"), *device_,
                           &draft_weights(), attention_.get());
    StubExecutor stub(stub_model_config(kVocab));
    Probe probe(*sched);
    EngineOptions options;
    options.kv = w.kv;
    options.seed = 5;
    Outcome o;
    o.result = Engine(stub, probe, *decoder, options).run(w.requests);
    o.violations = stub.violations();
    o.recomputed = probe.recomputed_;
    o.saved = probe.saved_;
    return o;
  }

  std::unique_ptr<Device> device_;
  std::shared_ptr<Attention> attention_;
};

TEST_P(KvPressureProperty, NeverOvercommitsStallsOrLosesARequest) {
  const std::string scheduler = GetParam().plugin;
  long long runs = 0, preemptions = 0, hits = 0, pressed = 0, rejected = 0;
  for (std::uint64_t seed = 1; seed <= kSeeds; ++seed) {
    const Workload base = random_workload(seed);
    for (const DecoderCase& dc : decoder_cases()) {
      const bool branching = !dc.lossless;
      const int min_pool = smallest_pool(base, branching ? 3 : 1);
      // The reference: continuous batching in an automatic (roomy) pool without caching.
      const Outcome ref = run(dc, base, "continuous");
      const auto expected = dc.lossless ? greedy_outputs(base.requests) : ref.result.outputs;
      for (bool caching : {false, true}) {
        for (int pool : {min_pool, min_pool + 1, min_pool + 2, min_pool + 5, 2 * min_pool}) {
          Workload w = base;
          w.kv.prefix_caching = caching;
          w.kv.num_blocks = pool;
          SCOPED_TRACE(w.name + ", block_size " + std::to_string(w.kv.block_size) + ", " + dc.name + ", prefix caching " +
                       (caching ? "on" : "off") + ", pool " + std::to_string(pool) + " (smallest " +
                       std::to_string(min_pool) + ")");
          Outcome o;
          try {
            o = run(dc, w, scheduler);
          } catch (const Error& e) {
            ADD_FAILURE() << e.what();
            continue;
          }
          ++runs;
          const RunTimeline& tl = o.result.timeline;
          pressed += tl.steps.size() > ref.result.timeline.steps.size();
          EXPECT_TRUE(o.violations.empty()) << o.violations.front();
          EXPECT_LE(tl.kv_blocks_peak, pool);
          EXPECT_EQ(tl.kv_blocks_free_end, pool) << "KV blocks leaked";
          long long prompts = 0, outputs = 0, n = 0, req_preemptions = 0;
          for (std::size_t i = 0; i < base.requests.size(); ++i) {
            const RequestTimeline& rt = tl.requests[i];
            req_preemptions += rt.preemptions;
            hits += rt.cached_prompt_tokens;
            if (rt.status == RequestStatus::kRejected) {  // reported
              ++rejected;
              continue;
            }
            EXPECT_EQ(rt.status, RequestStatus::kOk) << "request " << i;
            EXPECT_EQ(o.result.outputs[i], expected[i]) << "request " << i;
            prompts += static_cast<long long>(base.requests[i].prompt.size());
            outputs += static_cast<long long>(o.result.outputs[i].size());
            ++n;
          }
          EXPECT_EQ(tl.preemptions, req_preemptions);
          preemptions += tl.preemptions;
          if (!caching) {
            EXPECT_EQ(o.saved, 0);
          }
          // Rows: every known token but the last output once, plus recomputation after
          // preemption, less what prefix hits skipped, plus rejected drafts. (Branching
          // requests restart their beams when preempted, so only unpreempted ones are exact.)
          long long rows = 0;
          for (const StepTimeline& st : tl.steps) rows += st.rows;
          if (!branching || tl.preemptions == 0) {
            EXPECT_EQ(rows, prompts + outputs - n + o.recomputed - o.saved + (tl.spec_proposed - tl.spec_accepted) +
                                tl.branch_rows);
          }
        }
      }
      // One block short of the largest request: the run says so, or (admission control)
      // rejects every request that cannot fit; it never hangs.
      Workload too_small = base;
      too_small.kv.prefix_caching = true;
      too_small.kv.num_blocks = min_pool - 1;
      if (min_pool > 1) {
        SCOPED_TRACE(too_small.name + ", " + dc.name + ", pool " + std::to_string(min_pool - 1));
        try {
          const Outcome o = run(dc, too_small, scheduler);
          for (std::size_t i = 0; i < base.requests.size(); ++i) {
            const Request& r = base.requests[i];
            const int prompt = static_cast<int>(r.prompt.size());
            if (SchedulerInput::branch_blocks(prompt + r.max_output - 1, prompt, branching ? 3 : 1, base.kv.block_size) >=
                min_pool) {
              EXPECT_EQ(o.result.timeline.requests[i].status, RequestStatus::kRejected)
                  << "request " << i << " needs " << min_pool << " blocks of " << min_pool - 1;
            }
          }
        } catch (const Error& e) {
          EXPECT_NE(std::string(e.what()).find("can never be scheduled"), std::string::npos) << e.what();
        }
      }
    }
  }
  EXPECT_GT(pressed, runs / 4) << "few runs took longer than in a roomy pool: the pools are not tight enough";
  EXPECT_GT(hits, 0) << "no prefix hit: the workloads share no prefix";
  std::cout << "[          ] " << runs << " runs (" << pressed << " slowed by the pool), " << preemptions << " preemptions, " << hits
            << " prompt tokens from the prefix cache, "
            << rejected << " requests rejected\n";
}

INSTANTIATE_TEST_SUITE_P(Plugins, KvPressureProperty,
                         ::testing::ValuesIn(default_plugin_cases(PluginKind::kScheduling)), case_name);
// `inferlab conformance LIB.so` instantiates only the suites of its plugins' kinds.
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(KvPressureProperty);

}  // namespace
}  // namespace inferlab::testing
