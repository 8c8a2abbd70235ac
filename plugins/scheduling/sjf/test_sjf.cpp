// Shortest-job-first admission: single hand-made steps for the ordering rules, then whole runs
// against the in-test engine simulation (../sim_engine.h), compared with FCFS (continuous).
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <map>
#include <numeric>

#include "inferlab/continuous_scheduler.h"
#include "../sim_engine.h"
#include "inferlab/error.h"
#include "inferlab/registry.h"
#include "sjf.h"

namespace inferlab {
using namespace plugins;
namespace {

using Key = SjfScheduler::Key;

SeqView waiting_seq(int id, double arrival, int prompt, int output) {
  SeqView s;
  s.id = id;
  s.arrival_s = arrival;
  s.prompt_len = prompt;
  s.max_output = output;
  s.num_tokens = prompt;
  return s;
}

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

void expect_clean(const sim::Result& r) {
  EXPECT_TRUE(r.violations.empty()) << r.violations.front();
  EXPECT_FALSE(r.stalled);
}

// Steps from arrival to the first generated token, per request (the step producing it counts).
struct TtftProbe {
  std::map<int, int> ttft;
  void operator()(int step, const SchedulerInput& in, const ScheduleDecision& d) {
    for (const ScheduledSeq& sc : d.scheduled) {
      if (ttft.count(sc.id)) continue;
      for (auto list : {in.running, in.waiting})
        for (const SeqView& s : list)
          if (s.id == sc.id && s.generated == 0 && sc.num_tokens == s.pending())
            ttft[sc.id] = step + 1 - static_cast<int>(s.arrival_s);
    }
  }
  double mean() const {
    double sum = 0;
    for (const auto& [id, t] : ttft) sum += t;
    return ttft.empty() ? 0 : sum / static_cast<double>(ttft.size());
  }
};

// Bursts of 8 requests every 40 steps; every third request is long (prompt 300-399, output
// 40-59), the others short (prompt 20-59, output 5-14).
std::vector<sim::Request> bursty_mixed(int count) {
  std::vector<sim::Request> reqs;
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
  SchedulerInput in;
  in.waiting = waiting;
  in.free_blocks = 100;
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
  SchedulerInput in;
  in.waiting = waiting;
  in.free_blocks = 20;
  EXPECT_EQ(sched.admission_order(in), (std::vector<int>{1, 0}));
  ScheduleDecision d = sched.schedule(in);
  ASSERT_EQ(d.scheduled.size(), 1u);
  EXPECT_EQ(d.scheduled[0].id, 1);

  sim::Config cfg;
  cfg.num_blocks = 20;
  sim::Result r = sim::run(sched, {{0, 0, 400, 8}, {1, 0, 30, 9}}, cfg);
  expect_clean(r);
  EXPECT_EQ(r.finished, std::vector<int>{1});
  EXPECT_EQ(r.rejected, std::vector<int>{0});
}

TEST(SjfScheduler, EqualLengthsDecideExactlyLikeContinuous) {
  // With every key length equal, SJF order is arrival order: the step logic is continuous's.
  std::vector<sim::Request> reqs;
  for (int i = 0; i < 20; ++i) reqs.push_back({i, i * 0.4, 30 + (i * 7) % 20, 80 - (30 + (i * 7) % 20)});
  sim::Config cfg;
  cfg.num_blocks = 20;
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
  sim::Result a = sim::run(sjf, reqs, cfg, recorder(log_sjf));
  sim::Result b = sim::run(cont, reqs, cfg, recorder(log_cont));
  expect_clean(a);
  EXPECT_GT(a.preemptions, 0);  // the small pool exercises preemption too
  EXPECT_EQ(log_sjf, log_cont);
}

TEST(SjfScheduler, EveryTokenOnceBudgetBatchAndPoolRespected) {
  const int max_tokens = 128, max_batch = 5;
  SjfScheduler sched(max_tokens, max_batch, true, Key::kTotal, 30.0);
  auto reqs = bursty_mixed(40);
  sim::Config cfg;
  cfg.num_blocks = 1000;
  sim::Result r = sim::run(sched, reqs, cfg);
  expect_clean(r);
  ASSERT_EQ(r.finished.size(), reqs.size());
  EXPECT_EQ(r.preemptions, 0);
  EXPECT_LE(r.max_step_tokens, max_tokens);
  EXPECT_EQ(r.max_running, max_batch);
  for (const auto& q : reqs) {
    EXPECT_EQ(r.tokens_processed[q.id], q.prompt + q.max_output - 1) << "request " << q.id;
    EXPECT_EQ(r.generated[q.id], q.max_output);
  }

  // A small pool: preemption, never over the pool, and new work still done exactly once.
  cfg.num_blocks = 40;
  SjfScheduler tight(max_tokens, 16, true, Key::kTotal, 0);
  sim::Result t = sim::run(tight, reqs, cfg);
  expect_clean(t);
  ASSERT_EQ(t.finished.size(), reqs.size());
  EXPECT_GT(t.preemptions, 0);
  EXPECT_LE(t.peak_blocks, cfg.num_blocks);
  for (const auto& q : reqs)
    EXPECT_EQ(t.tokens_processed[q.id], q.prompt + q.max_output - 1 + t.recomputed[q.id]);
}

TEST(SjfScheduler, AgingBoundsTheWaitOfALongJob) {
  // A long job at t = 0 and two short jobs every step for 200 steps: two slots serve a short
  // job every ~2 steps, so short jobs always wait and plain SJF starves the long one.
  std::vector<sim::Request> reqs = {{0, 0, 400, 20}};
  for (int i = 1; i <= 400; ++i) reqs.push_back({i, static_cast<double>((i - 1) / 2), 10, 4});
  sim::Config cfg;
  cfg.num_blocks = 1000;
  auto first_admitted = [&](SjfScheduler& sched) {
    int step_in = -1;
    sim::Result r = sim::run(sched, reqs, cfg, [&](int step, const SchedulerInput&, const ScheduleDecision& d) {
      for (const auto& sc : d.scheduled)
        if (sc.id == 0 && step_in < 0) step_in = step;
    });
    expect_clean(r);
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
  sim::Config cfg;
  cfg.num_blocks = 1000;
  TtftProbe fcfs_ttft, sjf_ttft;
  ContinuousScheduler fcfs(128, 4, true);
  SjfScheduler sjf(128, 4, true, Key::kTotal, 0);
  sim::Result a = sim::run(fcfs, reqs, cfg, std::ref(fcfs_ttft));
  sim::Result b = sim::run(sjf, reqs, cfg, std::ref(sjf_ttft));
  expect_clean(a);
  expect_clean(b);
  ASSERT_EQ(fcfs_ttft.ttft.size(), reqs.size());
  ASSERT_EQ(sjf_ttft.ttft.size(), reqs.size());
  std::printf("mean TTFT (steps): fcfs %.2f, sjf %.2f; total steps fcfs %d, sjf %d\n",
              fcfs_ttft.mean(), sjf_ttft.mean(), a.steps, b.steps);
  EXPECT_LT(sjf_ttft.mean(), 0.8 * fcfs_ttft.mean());
}

}  // namespace
}  // namespace inferlab
