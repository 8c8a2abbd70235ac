// The engine's waiting queue is kept incrementally (a step costs the same whatever the queue's
// length, docs/simulation.md "Speed"): every scheduler must still see exactly the views and make
// exactly the decisions it made when the engine rebuilt the whole queue each step. Each case runs
// a real scheduler plugin on a simulated overloaded workload (small pool: preemption; prefix
// caching; timeouts; rejection; speculation; beams) through a recording wrapper, and compares a
// digest of every step's input and decision with the one the rebuilding engine gave (recorded at
// commit 88559d1, before the change; the speculative case again once its draft's passes were
// charged, which moves its steps' times; prefix-caching-timeout again when waiting requests
// stopped holding prefix-cache blocks and sjf's admission stopped counting shared blocks as
// freed, the KV-pressure fix; and the cases with unfinished requests when their finish time
// of -1 was hashed through int64: UBSan caught the old conversion). A digest that moves
// means a scheduler decided differently:
// print it with --gtest_filter='SimQueue.*' and look at why before updating it.
#include <cstdint>
#include <cstdio>

#include <gtest/gtest.h>

#include "inferlab/engine/engine.h"
#include "inferlab/plugin/registry.h"
#include "inferlab/sim/sim.h"
#include "inferlab/model/weights.h"
#include "inferlab/workload/workload.h"
#include "test_support.h"

namespace inferlab {
namespace {

// FNV-1a over everything a scheduler is shown and everything it answers, step by step.
class RecordingScheduler final : public Scheduler {
 public:
  explicit RecordingScheduler(std::shared_ptr<Scheduler> inner) : inner_(std::move(inner)) {}
  ScheduleDecision schedule(const SchedulerInput& in) override {
    mix(0xA11CE);
    mix(static_cast<std::uint64_t>(in.now_s * 1e9));
    mix(static_cast<std::uint64_t>(in.free_blocks));
    for (auto views : {in.running, in.waiting}) {
      mix(views.size());
      for (const SeqView& s : views) {
        mix(static_cast<std::uint64_t>(s.id));
        mix(static_cast<std::uint64_t>(s.num_tokens));
        mix(static_cast<std::uint64_t>(s.num_computed));
        mix(static_cast<std::uint64_t>(s.generated));
        mix(static_cast<std::uint64_t>(s.blocks_held));
        mix(static_cast<std::uint64_t>(s.branches));
      }
    }
    ScheduleDecision d = inner_->schedule(in);
    for (const ScheduledSeq& s : d.scheduled) {
      mix(static_cast<std::uint64_t>(s.id));
      mix(static_cast<std::uint64_t>(s.num_tokens));
    }
    mix(0xBEEF);
    for (int id : d.preempt) mix(static_cast<std::uint64_t>(id));
    preempted_ += static_cast<long long>(d.preempt.size());
    mix(0xDEAD);
    for (int id : d.reject) mix(static_cast<std::uint64_t>(id));
    ++steps_;
    return d;
  }
  // After the run: what the engine recorded of every step's KV memory and every request.
  void mix_timeline(const RunTimeline& t) {
    for (const StepTimeline& s : t.steps) {
      mix(static_cast<std::uint64_t>(s.kv_blocks_reserved));
      mix(static_cast<std::uint64_t>(s.kv_tokens));
      mix(static_cast<std::uint64_t>(s.kv_slots_internal));
      mix(static_cast<std::uint64_t>(s.kv_slots_external));
    }
    for (const RequestTimeline& r : t.requests) {
      mix(static_cast<std::uint64_t>(r.status));
      mix(static_cast<std::uint64_t>(r.preemptions));
      mix(static_cast<std::uint64_t>(r.cached_prompt_tokens));
      mix(static_cast<std::uint64_t>(static_cast<std::int64_t>(r.finish_s * 1e9)));  // -1: not finished
    }
  }
  std::uint64_t digest() const { return hash_; }
  long long steps() const { return steps_; }
  long long preempted() const { return preempted_; }

 private:
  void mix(std::uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      hash_ ^= (v >> (8 * i)) & 0xFF;
      hash_ *= 0x100000001B3ull;
    }
  }
  std::shared_ptr<Scheduler> inner_;
  std::uint64_t hash_ = 0xCBF29CE484222325ull;
  long long steps_ = 0, preempted_ = 0;
};

struct Case {
  const char* name;
  std::uint64_t want;
  const char* scheduler;
  std::map<std::string, ParamValue> sched_params;
  const char* decoder = "sampling";
  std::map<std::string, ParamValue> dec_params = {};
  int num_blocks = 96;
  bool prefix_caching = false;
  double queue_timeout_s = 0;
  KvReservation reservation = KvReservation::kOnDemand;
};

std::uint64_t run_case(const Case& c, long long& steps, long long& preempted) {
  Registry reg({testing::plugin_dir()});
  const ModelConfig m = preset_config("stories15m");
  SimOptions o;
  o.profile = hw_profile("h100");
  SimDevice dev;
  dev.set_options(std::make_shared<const SimOptions>(o));  // a speculative draft charges its passes
  SimExecutor ex(m, o, dev);
  ModelWeights w;
  w.config = m;
  RecordingScheduler sched(reg.create_scheduler(
      c.scheduler, reg.resolve(PluginKind::kScheduling, c.scheduler, c.sched_params, "t"), dev));
  auto dec = reg.create_decoder(c.decoder, reg.resolve(PluginKind::kDecoding, c.decoder, c.dec_params, "t"), dev, &w,
                                nullptr);
  WorkloadSpec ws;
  ws.num_requests = 240;
  ws.arrival = "poisson";
  ws.rate = 4000;  // far past what the model serves: the queue grows to most of the workload
  ws.prompt_len = {"lognormal", 64, 8, 160, 64, 0.6};
  ws.output_len = {"uniform", 16, 2, 48, 16, 0.5};
  ws.seed = 7;
  ws.shared_prefix = c.prefix_caching ? 32 : 0;
  ws.class_mix = {0.3, 0.7};
  EngineOptions eo;
  eo.seed = 3;
  eo.kv.num_blocks = c.num_blocks;
  eo.kv.prefix_caching = c.prefix_caching;
  eo.queue_timeout_s = c.queue_timeout_s;
  eo.kv.reservation = c.reservation;
  eo.kv.max_seq_len = 256;
  Engine engine(ex, sched, *dec, eo);
  sched.mix_timeline(engine.run(build_workload(ws, ex.config().vocab_size)).timeline);
  steps = sched.steps();
  preempted = sched.preempted();
  return sched.digest();
}

TEST(SimQueue, SchedulersDecideAsWhenTheQueueWasRebuiltEachStep) {
  const std::vector<Case> cases = {
      {"continuous", 0xb1e98354d0c096e5ull, "continuous", {{"max_batch", std::int64_t{16}}, {"max_tokens", std::int64_t{256}}}},
      {"continuous-whole-prompts", 0xef1e9fae885034d3ull, "continuous",
       {{"max_batch", std::int64_t{16}}, {"max_tokens", std::int64_t{256}}, {"chunked_prefill", false}}},
      {"continuous-prefill-first", 0xf4849a25e4a455e6ull, "continuous", {{"max_batch", std::int64_t{16}}, {"prefill_first", true}}},
      {"static", 0x4b3bc465388ad3dfull, "static", {{"max_batch", std::int64_t{8}}}},
      {"sjf", 0xf93dc71d9aca35baull, "sjf", {{"max_batch", std::int64_t{16}}, {"starvation_s", 0.01}}},
      {"priority", 0x829da01e81f4e770ull, "priority", {{"max_batch", std::int64_t{16}}, {"preempt_lower", true}}},
      {"edf-reject", 0xdcc656d2c99223a7ull, "edf", {{"max_batch", std::int64_t{16}}, {"ttft_slo_ms", std::string("5,20")}, {"reject_late", true}}},
      {"sarathi", 0xee59cb081bf6d0c3ull, "sarathi", {{"max_batch", std::int64_t{16}}, {"max_tokens", std::int64_t{128}}}},
      {"bucketed", 0x4eb7fd8cf638699dull, "bucketed", {{"max_batch", std::int64_t{8}}}},
      {"speculative", 0x5293d007d9476adcull, "continuous", {{"max_batch", std::int64_t{16}}}, "speculative",
       {{"sim_accept_prob", 0.7}, {"num_draft", std::int64_t{3}}}},
      {"beam", 0xd5ee6357dd7f47bfull, "continuous", {{"max_batch", std::int64_t{8}}}, "beam", {{"width", std::int64_t{2}}}, 128},
      {"prefix-caching", 0x001e31380abba496ull, "continuous", {{"max_batch", std::int64_t{16}}}, "sampling", {}, 96, true},
      {"queue-timeout", 0x4ff94ff40dc99e81ull, "continuous", {{"max_batch", std::int64_t{16}}}, "sampling", {}, 96, false, 0.02},
      {"prefix-caching-timeout", 0xa6361da0bab416b4ull, "sjf", {{"max_batch", std::int64_t{16}}}, "sampling", {}, 64, true, 0.02},
      {"contiguous-pow2", 0xac60ee9d1eca4addull, "continuous", {{"max_batch", std::int64_t{16}}}, "sampling", {}, 96, false, 0,
       KvReservation::kPow2},
  };
  long long all_preempted = 0;
  for (const Case& c : cases) {
    long long steps = 0, preempted = 0;
    const std::uint64_t got = run_case(c, steps, preempted);
    std::printf("%-26s steps %5lld preemptions %4lld digest 0x%016llxull\n", c.name, steps, preempted,
                static_cast<unsigned long long>(got));
    EXPECT_EQ(got, c.want) << c.name;
    all_preempted += preempted;
  }
  EXPECT_GT(all_preempted, 0);  // the small pool exercises the queue's push to the front
}

}  // namespace
}  // namespace inferlab
