// Shortest-job-first admission: single hand-made steps for the ordering rules, then whole runs
// through the real engine on the stub executor (tests/support/engine_harness.h; one modelled
// second per step), compared with FCFS (continuous).
#include <gtest/gtest.h>

#include <cstdio>
#include <set>
#include <string>

#include "engine_harness.h"
#include "inferlab/error.h"
#include "inferlab/plugin/registry.h"
#include "plugins/common/scheduling/continuous_scheduler.h"
#include "sjf.h"

namespace inferlab::testing {
using namespace plugins;
namespace {

using Key = SjfScheduler::Key;

// Ids admitted by one step over `waiting` alone, with a roomy pool.
std::vector<int> admitted(SjfScheduler& sched, const std::vector<SeqView>& waiting, double now = 0) {
  SchedulerInput in;
  in.now_s = now;
  in.waiting = waiting;
  in.free_blocks = 1000;
  std::vector<int> ids;
  for (const ScheduledSeq& sc : sched.schedule(in).scheduled) ids.push_back(sc.id);
  return ids;
}

// Mean time to first token in steps (one modelled second each), from the engine's timeline:
// arrival to the end of the step that produced the first token. Every request must have one.
double mean_ttft_steps(const testing::HarnessResult& r) {
  double sum = 0;
  for (const RequestTimeline& rt : r.timeline.requests) {
    EXPECT_GE(rt.first_token_s, rt.arrival_s) << "request " << rt.id;
    sum += rt.first_token_s - rt.arrival_s;
  }
  return r.timeline.requests.empty() ? 0 : sum / static_cast<double>(r.timeline.requests.size());
}

// Bursts of 8 requests every 40 steps; every third request is long (prompt 300-399, output
// 40-59), the others short (prompt 20-59, output 5-14).
std::vector<RequestSpec> bursty_mixed(int count) {
  std::vector<RequestSpec> reqs;
  for (int i = 0; i < count; ++i) {
    bool is_long = i % 3 == 0;
    int prompt = is_long ? 300 + (i * 53) % 100 : 20 + (i * 37) % 40;
    int output = is_long ? 40 + (i * 29) % 20 : 5 + (i * 29) % 10;
    reqs.push_back({i, (i / 8) * 40.0, prompt, output});
  }
  return reqs;
}

TEST(SjfScheduler, RejectsBadParams) {
  EXPECT_THROW(SjfScheduler::parse_key("longest"), Error);
  EXPECT_EQ(SjfScheduler::parse_key("output"), Key::kOutput);
  EXPECT_THROW(SjfScheduler(0, 4, true, Key::kTotal, 0), Error);
  EXPECT_THROW(SjfScheduler(16, 0, true, Key::kTotal, 0), Error);
  EXPECT_THROW(SjfScheduler(16, 4, true, Key::kTotal, -1), Error);
}

TEST(SjfScheduler, LoadsThroughTheRegistryWithTypedParams) {
  Registry reg(Registry::default_search_path());
  EXPECT_EQ(reg.find(PluginKind::kScheduling, "sjf").params.size(), 5u);
  Params p = reg.resolve(PluginKind::kScheduling, "sjf", {{"key", std::string("prompt")}}, "test");
  EXPECT_EQ(p.get_string("key"), "prompt");
  EXPECT_EQ(p.get_float("starvation_s"), 0.0);
  CpuDevice device(1);
  std::shared_ptr<Scheduler> sched = reg.create_scheduler("sjf", p, device);
  ASSERT_NE(sched, nullptr);
  // Shorter prompt first, though it arrived later.
  std::vector<SeqView> waiting = {waiting_seq(1, 0, 300, 2), waiting_seq(2, 1, 20, 100)};
  SchedulerInput in = step_input({}, waiting, 100);
  ScheduleDecision d = sched->schedule(in);
  ASSERT_EQ(d.scheduled.size(), 2u);
  EXPECT_EQ(d.scheduled[0].id, 2);
  EXPECT_THROW(reg.resolve(PluginKind::kScheduling, "sjf", {{"key", std::string("longest")}}, "test"), Error);
  EXPECT_THROW(reg.resolve(PluginKind::kScheduling, "sjf", {{"starvation_s", -1.0}}, "test"), Error);
}

TEST(SjfScheduler, ShortJobOvertakesEarlierLongOne) {
  // Request 1 arrived first with a long prompt and a short output; request 2 the other way.
  std::vector<SeqView> waiting = {waiting_seq(1, 0, 300, 2), waiting_seq(2, 1, 20, 100)};
  SjfScheduler total(512, 1, true, Key::kTotal, 0);    // 302 vs 120
  SjfScheduler prompt(512, 1, true, Key::kPrompt, 0);  // 300 vs 20
  SjfScheduler output(512, 1, true, Key::kOutput, 0);  // 2 vs 100
  EXPECT_EQ(admitted(total, waiting), std::vector<int>{2});
  EXPECT_EQ(admitted(prompt, waiting), std::vector<int>{2});
  EXPECT_EQ(admitted(output, waiting), std::vector<int>{1});
  // With room for both, both are admitted, shortest first.
  SjfScheduler roomy(512, 8, true, Key::kTotal, 0);
  EXPECT_EQ(admitted(roomy, waiting), (std::vector<int>{2, 1}));
}

TEST(SjfScheduler, TiesGoToTheEarlierArrival) {
  SjfScheduler sched(512, 8, true, Key::kTotal, 0);
  std::vector<SeqView> waiting = {waiting_seq(5, 3, 50, 10), waiting_seq(6, 1, 40, 20),
                                  waiting_seq(7, 2, 10, 5)};
  EXPECT_EQ(admitted(sched, waiting), (std::vector<int>{7, 6, 5}));
}

TEST(SjfScheduler, AgedRequestGoesFirst) {
  std::vector<SeqView> waiting = {waiting_seq(1, 0, 400, 50), waiting_seq(2, 9, 10, 5)};
  SjfScheduler aging(512, 1, true, Key::kTotal, 5.0);
  SjfScheduler no_aging(512, 1, true, Key::kTotal, 0);
  EXPECT_EQ(admitted(aging, waiting, 10.0), std::vector<int>{1});  // waited 10 s > 5 s
  EXPECT_EQ(admitted(aging, waiting, 4.0), std::vector<int>{2});   // waited 4 s: not yet aged
  EXPECT_EQ(admitted(no_aging, waiting, 10.0), std::vector<int>{2});
}

TEST(SjfScheduler, PreemptedWithOutputGoesFirst) {
  SjfScheduler sched(512, 1, true, Key::kTotal, 0);
  SeqView preempted = waiting_seq(3, 0, 200, 40);
  preempted.generated = 6;  // was running, produced tokens, lost its K/V
  preempted.num_tokens = 206;
  EXPECT_EQ(admitted(sched, {preempted, waiting_seq(4, 1, 10, 5)}), std::vector<int>{3});
}

TEST(SjfScheduler, NeverFittingRequestDoesNotBlockOthers) {
  SjfScheduler sched(512, 8, true, Key::kOutput, 0);
  // Request 0 is the shortest by output but needs 26 blocks for its life; the pool has 20.
  std::vector<SeqView> waiting = {waiting_seq(0, 0, 400, 8), waiting_seq(1, 0, 30, 9)};
  SchedulerInput in = step_input({}, waiting, 20);
  EXPECT_EQ(sched.admission_order(in), (std::vector<int>{1, 0}));
  ScheduleDecision d = sched.schedule(in);
  ASSERT_EQ(d.scheduled.size(), 1u);
  EXPECT_EQ(d.scheduled[0].id, 1);

  // The whole run: request 1 runs to completion, then the engine reports request 0 (an error
  // naming it, where the old simulation dropped it and carried on).
  HarnessConfig cfg;
  cfg.kv.num_blocks = 20;
  std::set<int> last_running, last_waiting;
  auto observe = [&](int, const SchedulerInput& in, const ScheduleDecision&) {
    last_running.clear();
    last_waiting.clear();
    for (const SeqView& s : in.running) last_running.insert(s.id);
    for (const SeqView& s : in.waiting) last_waiting.insert(s.id);
  };
  try {
    run_scheduler(sched, {{0, 0, 400, 8}, {1, 0, 30, 9}}, cfg, observe);
    ADD_FAILURE() << "the engine ran a request that can never fit";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("request 0 can never be scheduled: it needs 26 KV blocks, the pool has 20"),
              std::string::npos)
        << e.what();
  }
  // When the engine gave up, request 1 had finished and left; only request 0 was left waiting.
  EXPECT_TRUE(last_running.empty());
  EXPECT_EQ(last_waiting, std::set<int>{0});
  HarnessResult r = run_scheduler(sched, {{1, 0, 30, 9}}, cfg);
  EXPECT_EQ(r.finished, std::vector<int>{1});
  EXPECT_EQ(r.generated[1], 9);
}

TEST(SjfScheduler, EqualLengthsDecideExactlyLikeContinuous) {
  // With every key length equal, SJF order is arrival order: the step logic is continuous's.
  std::vector<RequestSpec> reqs;
  for (int i = 0; i < 20; ++i) reqs.push_back({i, i * 0.4, 30 + (i * 7) % 20, 80 - (30 + (i * 7) % 20)});
  HarnessConfig cfg;
  cfg.kv.num_blocks = 20;
  std::vector<std::string> log_sjf, log_cont;
  auto recorder = [](std::vector<std::string>& out) {
    return [&out](int step, const SchedulerInput&, const ScheduleDecision& d) {
      std::string line = std::to_string(step) + ":";
      for (const auto& sc : d.scheduled) line += " " + std::to_string(sc.id) + "x" + std::to_string(sc.num_tokens);
      for (int id : d.preempt) line += " p" + std::to_string(id);
      out.push_back(line);
    };
  };
  SjfScheduler sjf(64, 6, true, Key::kTotal, 0);
  ContinuousScheduler cont(64, 6, true);
  HarnessResult a = run_scheduler(sjf, reqs, cfg, recorder(log_sjf));
  HarnessResult b = run_scheduler(cont, reqs, cfg, recorder(log_cont));
  EXPECT_GT(a.preemptions, 0);  // the small pool exercises preemption too
  EXPECT_EQ(log_sjf, log_cont);
}

TEST(SjfScheduler, EveryTokenOnceBudgetBatchAndPoolRespected) {
  const int max_tokens = 128, max_batch = 5;
  SjfScheduler sched(max_tokens, max_batch, true, Key::kTotal, 30.0);
  auto reqs = bursty_mixed(40);
  HarnessConfig cfg;
  cfg.kv.num_blocks = 1000;
  HarnessResult r = run_scheduler(sched, reqs, cfg);
  expect_every_token_once(r, reqs);
  EXPECT_LE(r.max_step_tokens, max_tokens);
  EXPECT_EQ(r.max_running, max_batch);

  // A small pool: preemption, never over the pool, and new work still done exactly once.
  cfg.kv.num_blocks = 40;
  SjfScheduler tight(max_tokens, 16, true, Key::kTotal, 0);
  HarnessResult t = run_scheduler(tight, reqs, cfg);
  ASSERT_EQ(t.finished.size(), reqs.size());
  EXPECT_GT(t.preemptions, 0);
  EXPECT_LE(t.peak_blocks, cfg.kv.num_blocks);
  for (const auto& q : reqs)
    EXPECT_EQ(t.tokens_processed[q.id], q.prompt + q.max_output - 1 + t.recomputed[q.id]);
}

TEST(SjfScheduler, AgingBoundsTheWaitOfALongJob) {
  // A long job at t = 0 and two short jobs every step for 200 steps: two slots serve a short
  // job every ~2 steps, so short jobs always wait and plain SJF starves the long one.
  std::vector<RequestSpec> reqs = {{0, 0, 400, 20}};
  for (int i = 1; i <= 400; ++i) reqs.push_back({i, static_cast<double>((i - 1) / 2), 10, 4});
  HarnessConfig cfg;
  cfg.kv.num_blocks = 1000;
  // The time (in steps) at which the long job is first scheduled.
  auto first_admitted = [&](SjfScheduler& sched) {
    int step_in = -1;
    HarnessResult r = run_scheduler(sched, reqs, cfg, [&](int, const SchedulerInput& in, const ScheduleDecision& d) {
      for (const auto& sc : d.scheduled)
        if (sc.id == 0 && step_in < 0) step_in = static_cast<int>(in.now_s);
    });
    EXPECT_EQ(r.finished.size(), reqs.size());
    return step_in;
  };
  SjfScheduler plain(64, 2, true, Key::kTotal, 0);
  SjfScheduler aging(64, 2, true, Key::kTotal, 20.0);
  int starved = first_admitted(plain), aged = first_admitted(aging);
  EXPECT_GT(starved, 200);  // only once the stream of short jobs is over
  EXPECT_GT(aged, 20);      // not before it has waited starvation_s ...
  std::printf("long job first admitted at step %d without aging, %d with starvation_s = 20\n", starved, aged);
  EXPECT_LE(aged, 20 + 4);  // ... and at the next free slot: both slots free every 4 steps
}

TEST(SjfScheduler, LowerMeanTtftThanFcfsOnMixedBursts) {
  auto reqs = bursty_mixed(48);
  HarnessConfig cfg;
  cfg.kv.num_blocks = 1000;
  ContinuousScheduler fcfs(128, 4, true);
  SjfScheduler sjf(128, 4, true, Key::kTotal, 0);
  HarnessResult a = run_scheduler(fcfs, reqs, cfg);
  HarnessResult b = run_scheduler(sjf, reqs, cfg);
  ASSERT_EQ(a.finished.size(), reqs.size());
  ASSERT_EQ(b.finished.size(), reqs.size());
  const double fcfs_ttft = mean_ttft_steps(a), sjf_ttft = mean_ttft_steps(b);
  std::printf("mean TTFT (steps): fcfs %.2f, sjf %.2f; total steps fcfs %d, sjf %d\n", fcfs_ttft, sjf_ttft, a.steps,
              b.steps);
  // The bound was 0.8 against the old in-test simulation, whose unstable sort by arrival put
  // each burst's simultaneous arrivals in a scrambled order (FCFS 32.9 steps there); the engine
  // keeps them in request order (FCFS 28.8 steps) and SJF gives 23.3 either way.
  EXPECT_LT(sjf_ttft, 0.85 * fcfs_ttft);
}

}  // namespace
}  // namespace inferlab::testing
