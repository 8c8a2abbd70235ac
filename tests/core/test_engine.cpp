// The step loop with real plugins and a fake clock: batching, scheduling, speculation and
// preemption must never change greedy tokens; the timeline must be consistent.
#include <gtest/gtest.h>

#include "inferlab/engine/engine.h"
#include "inferlab/error.h"
#include "inferlab/plugin/registry.h"
#include "inferlab/workload/workload.h"
#include "stub_executor.h"
#include "test_support.h"

namespace inferlab {
namespace {

struct Fixture {
  Registry reg{{testing::plugin_dir()}};
  ModelWeights weights = random_weights(preset_config("stories260k"), 3);
  CpuDevice device{2};

  RunResult run(const std::vector<Request>& reqs, const std::string& sched,
                std::map<std::string, ParamValue> sched_params, const std::string& dec,
                std::map<std::string, ParamValue> dec_params, KvCacheConfig kv = {}, const std::string& att = "naive") {
    auto a = reg.create_attention(att, reg.resolve(PluginKind::kAttention, att, {}, "t"), device);
    auto q = reg.create_quantization("none", reg.resolve(PluginKind::kQuantization, "none", {}, "t"), device);
    auto s = reg.create_scheduler(sched, reg.resolve(PluginKind::kScheduling, sched, sched_params, "t"), device);
    auto d = reg.create_decoder(dec, reg.resolve(PluginKind::kDecoding, dec, dec_params, "t"), device);
    Model model(weights, *q, device);
    EngineOptions eo;
    eo.kv = kv;
    eo.seed = 11;
    double fake = 0;
    eo.clock = [&fake] { return fake += 0.001; };  // every clock read advances 1 ms
    Engine engine(model, *a, *s, *d, eo);
    return engine.run(reqs);
  }
};

std::vector<Request> make_requests(int n, int prompt, int output, std::uint64_t seed, double gap = 0) {
  WorkloadSpec w;
  w.num_requests = n;
  w.prompt_len.value = prompt;
  w.output_len.value = output;
  w.arrival = "all_at_once";
  w.seed = seed;
  auto reqs = build_workload(w, 512);
  for (std::size_t i = 0; i < reqs.size(); ++i) reqs[i].arrival_s = gap * static_cast<double>(i);
  return reqs;
}

// Repetitive prompts so that prompt lookup finds matches.
std::vector<Request> repetitive_requests() {
  std::vector<Request> reqs;
  for (int i = 0; i < 3; ++i) {
    Request r;
    r.id = i;
    for (int k = 0; k < 6; ++k)
      for (int t : {10 + i, 20, 30 + i, 40, 50}) r.prompt.push_back(t);
    r.max_output = 24;
    reqs.push_back(r);
  }
  return reqs;
}

TEST(Engine, ProducesExactLengthsAndAConsistentTimeline) {
  Fixture f;
  auto reqs = make_requests(5, 9, 7, 1, 0.002);
  RunResult r = f.run(reqs, "continuous", {{"max_tokens", std::int64_t{16}}}, "sampling", {});
  ASSERT_EQ(r.outputs.size(), 5u);
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    EXPECT_EQ(r.outputs[i].size(), 7u);
    const auto& t = r.timeline.requests[i];
    EXPECT_EQ(t.output_tokens, 7);
    EXPECT_EQ(t.token_times.size(), 7u);
    EXPECT_GE(t.first_token_s, t.arrival_s);
    EXPECT_GE(t.finish_s, t.first_token_s);
    EXPECT_DOUBLE_EQ(t.token_times.back(), t.finish_s);
  }
  long long prefill = 0, decode = 0;
  for (const auto& s : r.timeline.steps) {
    EXPECT_LE(s.rows, 16);  // the token budget
    prefill += s.prefill_tokens;
    decode += s.decode_tokens;
  }
  EXPECT_EQ(prefill, 5 * 9);      // every prompt token once
  EXPECT_EQ(decode, 5 * (7 - 1));  // every output token but the last is fed back once
}

TEST(Engine, BatchingAndSchedulingDoNotChangeGreedyTokens) {
  Fixture f;
  auto reqs = make_requests(4, 13, 9, 2);
  auto batched = f.run(reqs, "continuous", {}, "sampling", {}).outputs;
  auto chunked = f.run(reqs, "continuous", {{"max_tokens", std::int64_t{5}}}, "sampling", {}).outputs;
  auto stat = f.run(reqs, "static", {{"max_batch", std::int64_t{3}}}, "sampling", {}).outputs;
  auto flash = f.run(reqs, "continuous", {}, "sampling", {}, {}, "flash").outputs;
  for (std::size_t i = 0; i < reqs.size(); ++i) {
    auto alone = f.run({reqs[i]}, "continuous", {}, "sampling", {}).outputs[0];
    EXPECT_EQ(batched[i], alone) << "request " << i;
    EXPECT_EQ(chunked[i], alone) << "request " << i;
    EXPECT_EQ(stat[i], alone) << "request " << i;
    EXPECT_EQ(flash[i], alone) << "request " << i;
  }
}

TEST(Engine, PromptLookupEqualsGreedyAndAcceptsSome) {
  Fixture f;
  auto reqs = repetitive_requests();
  auto greedy = f.run(reqs, "continuous", {}, "sampling", {});
  auto spec = f.run(reqs, "continuous", {}, "prompt_lookup", {{"num_draft", std::int64_t{4}}});
  EXPECT_EQ(spec.outputs, greedy.outputs);
  EXPECT_GT(spec.timeline.spec_proposed, 0);
  EXPECT_LE(spec.timeline.spec_accepted, spec.timeline.spec_proposed);
  EXPECT_EQ(greedy.timeline.spec_proposed, 0);
  // Fewer steps when drafts are accepted.
  EXPECT_GT(spec.timeline.spec_accepted, 0);
  EXPECT_LT(spec.timeline.steps.size(), greedy.timeline.steps.size());
}

TEST(Engine, PreemptionUnderASmallPoolKeepsTokens) {
  Fixture f;
  auto reqs = make_requests(4, 12, 20, 4);
  auto roomy = f.run(reqs, "continuous", {}, "sampling", {});
  KvCacheConfig small;
  small.block_size = 4;
  small.num_blocks = 16;  // 64 tokens for 4 requests of 32: someone must be preempted
  auto tight = f.run(reqs, "continuous", {}, "sampling", {}, small);
  EXPECT_EQ(tight.outputs, roomy.outputs);
  EXPECT_GT(tight.timeline.preemptions, 0);
  EXPECT_LE(tight.timeline.kv_blocks_peak, 16);
}

TEST(Engine, FullReservationMatchesContiguousAllocation) {
  Fixture f;
  auto reqs = make_requests(3, 10, 6, 5);
  KvCacheConfig contiguous;
  contiguous.block_size = 64;  // >= prompt + output: one block per sequence
  contiguous.reservation = KvReservation::kFull;
  auto r = f.run(reqs, "static", {}, "sampling", {}, contiguous);
  EXPECT_EQ(r.timeline.kv_blocks_peak, 3);
  EXPECT_EQ(r.outputs, f.run(reqs, "static", {}, "sampling", {}).outputs);
  for (const auto& s : r.timeline.steps) EXPECT_EQ(s.kv_blocks_reserved, s.seqs);
  // The Orca policy places the same lengths as contiguous runs of small blocks: same tokens,
  // ceil(16 / 4) = 4 blocks per sequence held from admission.
  KvCacheConfig oracle;
  oracle.block_size = 4;
  oracle.reservation = KvReservation::kOracle;
  auto o = f.run(reqs, "static", {}, "sampling", {}, oracle);
  EXPECT_EQ(o.outputs, r.outputs);
  for (const auto& s : o.timeline.steps) EXPECT_EQ(s.kv_blocks_reserved, 4 * s.seqs);
}

TEST(Engine, SamplingIsSeededPerRequest) {
  Fixture f;
  auto reqs = make_requests(3, 6, 12, 6);
  std::map<std::string, ParamValue> hot = {{"temperature", 1.0}};
  auto a = f.run(reqs, "continuous", {}, "sampling", hot).outputs;
  auto b = f.run(reqs, "static", {{"max_batch", std::int64_t{1}}}, "sampling", hot).outputs;
  EXPECT_EQ(a, b);  // same seed, different batching: same samples
  auto greedy = f.run(reqs, "continuous", {}, "sampling", {}).outputs;
  EXPECT_NE(a, greedy);
}

TEST(Engine, WithoutAKvCacheEveryTokenRecomputesTheSequence) {
  Fixture f;
  auto reqs = make_requests(3, 7, 5, 12);
  KvCacheConfig off;
  off.enabled = false;
  auto cached = f.run(reqs, "continuous", {}, "sampling", {});
  for (const std::string& sched : {std::string("continuous"), std::string("static")}) {
    auto recompute = f.run(reqs, sched, {}, "sampling", {}, off);
    EXPECT_EQ(recompute.outputs, cached.outputs) << sched;
    long long rows = 0;
    const auto& steps = recompute.timeline.steps;
    for (std::size_t i = 0; i < steps.size(); ++i) {
      rows += steps[i].rows;
      // Nothing is kept between steps (the last step's finishing requests are freed after it).
      if (i + 1 < steps.size()) {
        EXPECT_EQ(steps[i].kv_blocks_reserved, 0) << sched << " step " << i;
      }
    }
    // Output token i (0-based) needs the prompt and the i tokens before it: sum of 7 + i, i < 5.
    EXPECT_EQ(rows, 3 * (5 * 7 + 0 + 1 + 2 + 3 + 4)) << sched;
  }
  // Chunked prefill under a small budget still completes (partial chunks keep their K/V).
  auto chunked = f.run(reqs, "continuous", {{"max_tokens", std::int64_t{4}}}, "sampling", {}, off);
  EXPECT_EQ(chunked.outputs, cached.outputs);
}

TEST(Engine, RequestThatCanNeverFitIsAnError) {
  Fixture f;
  auto reqs = make_requests(1, 40, 4, 7);
  KvCacheConfig tiny;
  tiny.block_size = 4;
  tiny.num_blocks = 3;
  try {
    f.run(reqs, "continuous", {}, "sampling", {}, tiny);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("can never be scheduled"), std::string::npos) << e.what();
  }
}

TEST(Engine, NeverFitsErrorCountsTheBlocksForTheWholeOutput) {
  Fixture f;
  auto reqs = make_requests(1, 4, 40, 7);  // a short prompt, a long output: 43 tokens of KV
  KvCacheConfig tiny;
  tiny.block_size = 4;
  tiny.num_blocks = 3;
  try {
    f.run(reqs, "continuous", {}, "sampling", {}, tiny);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs 11 KV blocks, the pool has 3"), std::string::npos) << e.what();
  }
}

TEST(Engine, IdleGapsAreFastForwarded) {
  Fixture f;
  auto reqs = make_requests(2, 4, 3, 8);
  reqs[1].arrival_s = 3600.0;  // an hour later
  RunResult r = f.run(reqs, "continuous", {}, "sampling", {});
  const auto& late = r.timeline.requests[1];
  EXPECT_GE(late.first_token_s, 3600.0);
  EXPECT_LT(late.first_token_s - 3600.0, 1.0);  // fake clock: a few ms of steps, no sleeping
}

// Speculation under a pool too small for every request: preemption may fall on a request
// between speculative steps; rolled-back drafts must never leak into the recomputed K/V.
TEST(Engine, PromptLookupUnderPreemptionEqualsGreedy) {
  Fixture f;
  auto reqs = repetitive_requests();
  auto greedy = f.run(reqs, "continuous", {}, "sampling", {});
  KvCacheConfig small;
  small.block_size = 4;
  small.num_blocks = 24;  // 96 tokens for 3 requests of 30 + 24 (+ drafts)
  auto spec = f.run(reqs, "continuous", {}, "prompt_lookup", {{"num_draft", std::int64_t{4}}}, small);
  EXPECT_EQ(spec.outputs, greedy.outputs);
  EXPECT_GT(spec.timeline.preemptions, 0);
  EXPECT_GT(spec.timeline.spec_accepted, 0);
  EXPECT_LE(spec.timeline.kv_blocks_peak, 24);
}

TEST(Engine, PromptLookupWithFullReservationEqualsGreedy) {
  Fixture f;
  auto reqs = repetitive_requests();
  auto greedy = f.run(reqs, "continuous", {}, "sampling", {});
  KvCacheConfig full;
  full.block_size = 4;
  full.reservation = KvReservation::kFull;
  auto spec = f.run(reqs, "continuous", {}, "prompt_lookup", {{"num_draft", std::int64_t{4}}}, full);
  EXPECT_EQ(spec.outputs, greedy.outputs);
  EXPECT_GT(spec.timeline.spec_accepted, 0);
  // Rolled-back drafts keep their blocks under full reservation: each request holds
  // ceil((30 + 24 + 4) / 4) = 15 blocks from admission to finish.
  for (const auto& s : spec.timeline.steps) EXPECT_EQ(s.kv_blocks_reserved % 15, 0);
}

TEST(Engine, PromptLookupNeverExceedsMaxOutput) {
  Fixture f;
  auto reqs = repetitive_requests();
  for (int n : {1, 2, 3, 5}) {
    for (auto& r : reqs) r.max_output = n;
    auto greedy = f.run(reqs, "continuous", {}, "sampling", {});
    auto spec = f.run(reqs, "continuous", {}, "prompt_lookup", {{"num_draft", std::int64_t{8}}});
    for (std::size_t i = 0; i < reqs.size(); ++i) {
      EXPECT_EQ(spec.outputs[i].size(), static_cast<std::size_t>(n));
      EXPECT_EQ(spec.timeline.requests[i].token_times.size(), static_cast<std::size_t>(n));
    }
    EXPECT_EQ(spec.outputs, greedy.outputs);
  }
}

// Without speculation every decode step emits exactly one token per sequence, so
// spec_tokens_per_step is 1 whatever the chunking or preemption. A prompt of 17 under a budget
// of 8 ends with a one-token chunk (not a decode step); a tight pool makes requests recompute
// (a prefill that emits a non-first token).
TEST(Engine, DecodeSequenceStepsCountOnlyStepsThatEmitALaterToken) {
  Fixture f;
  auto reqs = make_requests(1, 17, 5, 9);
  RunResult r = f.run(reqs, "continuous", {{"max_tokens", std::int64_t{8}}}, "sampling", {});
  EXPECT_EQ(r.timeline.decode_seq_steps, 4);  // tokens 2..5
  long long prefill = 0, decode = 0;
  for (const auto& s : r.timeline.steps) {
    prefill += s.prefill_tokens;
    decode += s.decode_tokens;
  }
  EXPECT_EQ(prefill, 17);
  EXPECT_EQ(decode, 4);
  auto tokens_per_step = [](const RunTimeline& tl) {
    for (const auto& [k, v] : compute_metrics(tl, {}))
      if (k == "spec_tokens_per_step") return v;
    return -1.0;
  };
  EXPECT_DOUBLE_EQ(tokens_per_step(r.timeline), 1.0);

  KvCacheConfig small;
  small.block_size = 4;
  small.num_blocks = 16;
  auto tight = f.run(make_requests(4, 12, 20, 4), "continuous", {}, "sampling", {}, small);
  ASSERT_GT(tight.timeline.preemptions, 0);
  EXPECT_EQ(tight.timeline.decode_seq_steps, 4 * 19);
  EXPECT_DOUBLE_EQ(tokens_per_step(tight.timeline), 1.0);
}

TEST(Engine, StopTokenEndsARequestEvenInsideAcceptedDrafts) {
  Fixture f;
  auto reqs = repetitive_requests();
  auto greedy = f.run(reqs, "continuous", {}, "sampling", {});
  const int stop = greedy.outputs[0][5];
  std::size_t cut = 0;
  while (greedy.outputs[0][cut] != stop) ++cut;  // first occurrence
  for (const char* dec : {"sampling", "prompt_lookup"}) {
    auto a = f.reg.create_attention("naive", f.reg.resolve(PluginKind::kAttention, "naive", {}, "t"), f.device);
    auto q = f.reg.create_quantization("none", f.reg.resolve(PluginKind::kQuantization, "none", {}, "t"), f.device);
    auto s = f.reg.create_scheduler("continuous", f.reg.resolve(PluginKind::kScheduling, "continuous", {}, "t"), f.device);
    auto d = f.reg.create_decoder(dec, f.reg.resolve(PluginKind::kDecoding, dec, {}, "t"), f.device);
    Model model(f.weights, *q, f.device);
    EngineOptions eo;
    eo.stop_tokens = {stop};
    double fake = 0;
    eo.clock = [&fake] { return fake += 0.001; };
    RunResult r = Engine(model, *a, *s, *d, eo).run(reqs);
    std::vector<int> want(greedy.outputs[0].begin(), greedy.outputs[0].begin() + static_cast<std::ptrdiff_t>(cut) + 1);
    EXPECT_EQ(r.outputs[0], want) << dec;
    EXPECT_EQ(r.timeline.requests[0].output_tokens, static_cast<int>(cut) + 1) << dec;
    EXPECT_EQ(r.timeline.requests[0].token_times.size(), cut + 1) << dec;
  }
}

// A scheduler that lists one request twice in a step would run its tokens twice into the same
// KV slots; the engine must refuse it and name the mistake.
TEST(Engine, SchedulingARequestTwiceInOneStepIsAnError) {
  struct Twice : Scheduler {
    ScheduleDecision schedule(const SchedulerInput& in) override {
      ScheduleDecision d;
      for (const SeqView& s : in.waiting) d.scheduled.push_back({s.id, 1});
      for (const SeqView& s : in.waiting) d.scheduled.push_back({s.id, 1});
      return d;
    }
  } twice;
  Fixture f;
  auto a = f.reg.create_attention("naive", f.reg.resolve(PluginKind::kAttention, "naive", {}, "t"), f.device);
  auto q = f.reg.create_quantization("none", f.reg.resolve(PluginKind::kQuantization, "none", {}, "t"), f.device);
  auto d = f.reg.create_decoder("sampling", f.reg.resolve(PluginKind::kDecoding, "sampling", {}, "t"), f.device);
  Model model(f.weights, *q, f.device);
  Engine engine(model, *a, twice, *d, EngineOptions{});
  try {
    engine.run(make_requests(1, 4, 2, 10));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("twice"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace inferlab

namespace inferlab {
namespace {

// The execute stage is a seam: a stub executor drives the same loop, and its modelled step
// durations are the timeline's.
TEST(Engine, StubExecutorDrivesTheRealStepLoop) {
  Registry reg({testing::plugin_dir()});
  CpuDevice device(1);
  testing::StubExecutor stub(testing::stub_model_config(), [](const StepBatch& b) { return 0.5 + b.rows(); });
  auto s = reg.create_scheduler("continuous", reg.resolve(PluginKind::kScheduling, "continuous",
                                                          {{"max_tokens", std::int64_t{16}}}, "t"), device);
  auto d = reg.create_decoder("sampling", reg.resolve(PluginKind::kDecoding, "sampling", {}, "t"), device);
  std::vector<Request> reqs(3);
  for (int i = 0; i < 3; ++i) {
    reqs[static_cast<std::size_t>(i)].id = i;
    reqs[static_cast<std::size_t>(i)].prompt = std::vector<int>(static_cast<std::size_t>(10 + 7 * i), 5 + i);
    reqs[static_cast<std::size_t>(i)].max_output = 6;
  }
  EngineOptions eo;
  eo.kv.block_size = 4;
  RunResult r = Engine(stub, *s, *d, eo).run(reqs);
  EXPECT_TRUE(stub.violations().empty()) << stub.violations().front();
  for (int i = 0; i < 3; ++i) {  // each output token is the stub's function of the previous one
    const auto& out = r.outputs[static_cast<std::size_t>(i)];
    ASSERT_EQ(out.size(), 6u);
    int prev = reqs[static_cast<std::size_t>(i)].prompt.back();
    int pos = static_cast<int>(reqs[static_cast<std::size_t>(i)].prompt.size()) - 1;
    for (int t : out) {
      EXPECT_EQ(t, stub.next_token(prev, pos++));
      prev = t;
    }
  }
  ASSERT_EQ(r.timeline.steps.size(), stub.steps().size());
  for (std::size_t k = 0; k < stub.steps().size(); ++k)
    EXPECT_DOUBLE_EQ(r.timeline.steps[k].duration_s, 0.5 + stub.steps()[k].rows);
}

// Every row says where its time went: the categories sum to 1, the model's ops are non-zero,
// and the timer's own cost stays small.
TEST(Engine, TimeFractionsCoverEveryStepAndSumToOne) {
  Fixture f;
  auto r = f.run(make_requests(4, 24, 8, 5), "continuous", {}, "sampling", {});
  const MetricRow row = compute_metrics(r.timeline, SloSpec{});
  double sum = 0;
  std::map<std::string, double> m(row.begin(), row.end());
  for (int c = 0; c < kTimeCategories; ++c) {
    const std::string name = std::string("time_") + time_category_name(static_cast<TimeCategory>(c)) + "_frac";
    ASSERT_TRUE(m.count(name)) << name;
    EXPECT_GE(m[name], 0.0) << name;
    sum += m[name];
  }
  EXPECT_NEAR(sum, 1.0, 1e-9);
  EXPECT_GT(m["time_linear_frac"], 0.0);
  EXPECT_GT(m["time_attention_frac"], 0.0);
  EXPECT_GT(m["time_norm_rope_act_frac"], 0.0);
  EXPECT_GT(m["time_sampling_frac"], 0.0);
  EXPECT_GT(m["time_scheduler_frac"], 0.0);
  EXPECT_NEAR(m["step_overhead_frac"],
              m["time_sampling_frac"] + m["time_scheduler_frac"] + m["time_framework_frac"], 1e-9);
  EXPECT_GT(r.timeline.timer_overhead_s, 0.0);
  EXPECT_LT(m["timer_overhead_frac"], 0.2);  // loose: a shared 2-core machine; the bench reports the real figure
}

}  // namespace
}  // namespace inferlab

namespace inferlab {
namespace {

// Every step with rows is one model forward; the run's timeline carries their count and host
// time (step_host_ms_mean), and no graph on the CPU.
TEST(Engine, TimelineCountsTheModelsForwardsAndTheirHostTime) {
  Fixture f;
  const RunResult r = f.run(make_requests(3, 6, 4, 2), "continuous", {}, "sampling", {});
  EXPECT_EQ(r.timeline.forwards, static_cast<long long>(r.timeline.steps.size()));
  EXPECT_GT(r.timeline.forward_host_s, 0.0);
  EXPECT_EQ(r.timeline.graph_captures, 0);
  EXPECT_EQ(r.timeline.graph_replays, 0);
}

}  // namespace
}  // namespace inferlab
