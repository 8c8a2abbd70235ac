// Strict priority classes: single hand-made steps for ordering and preemption, then whole runs
// through the real engine on the stub executor (tests/support/engine_harness.h; one modelled
// second per step), compared with FCFS (continuous) on the same two-class workload.
#include <gtest/gtest.h>

#include <cstdio>
#include <vector>

#include "engine_harness.h"
#include "inferlab/error.h"
#include "inferlab/results/metrics.h"
#include "plugins/common/scheduling/continuous_scheduler.h"
#include "priority.h"

namespace inferlab::testing {
using namespace plugins;
namespace {

// TTFT p99 (steps) of the requests of one class.
double ttft_p99(const HarnessResult& r, int cls) {
  std::vector<double> v;
  for (const RequestTimeline& rt : r.timeline.requests)
    if (rt.priority == cls && rt.first_token_s >= 0) v.push_back(rt.first_token_s - rt.arrival_s);
  return percentile(v, 99);
}

// Bursts of 12 requests every 30 steps; every fourth request is urgent (priority 0), the rest
// priority 1; prompts 40-199, outputs 10-29.
std::vector<RequestSpec> two_class_bursts(int count) {
  std::vector<RequestSpec> reqs;
  for (int i = 0; i < count; ++i)
    reqs.push_back({i, (i / 12) * 30.0, 40 + (i * 37) % 160, 10 + (i * 13) % 20, i % 4 == 3 ? 0 : 1});
  return reqs;
}

TEST(PriorityScheduler, RejectsBadParams) {
  EXPECT_THROW(PriorityScheduler(0, 4, true, 0, true), Error);
  EXPECT_THROW(PriorityScheduler(16, 4, true, -1, true), Error);
}

TEST(PriorityScheduler, UrgentClassAdmittedFirst) {
  PriorityScheduler sched(512, 1, true, 0, true);
  std::vector<SeqView> waiting = {waiting_seq(1, 0, 30, 5, 1), waiting_seq(2, 1, 300, 5, 0)};
  SchedulerInput in = step_input({}, waiting, 100);
  ScheduleDecision d = sched.schedule(in);
  ASSERT_EQ(d.scheduled.size(), 1u);
  EXPECT_EQ(d.scheduled[0].id, 2);
  EXPECT_EQ(sched.admission_order(in), (std::vector<int>{1, 0}));
}

TEST(PriorityScheduler, PreemptsLessUrgentWhenMemoryIsShort) {
  PriorityScheduler sched(512, 8, true, 0, true);
  // Request 1 (class 1) decodes in 5 blocks; request 2 (class 0) needs 3 blocks, 1 is free.
  std::vector<SeqView> running = {decode_seq(1, 64, 2, 50, 5, 1)};
  std::vector<SeqView> waiting = {waiting_seq(2, 0, 40, 5, 0)};
  SchedulerInput in = step_input(running, waiting, 1);
  ScheduleDecision d = sched.schedule(in);
  EXPECT_EQ(d.preempt, std::vector<int>{1});
  ASSERT_EQ(d.scheduled.size(), 1u);
  EXPECT_EQ(d.scheduled[0].id, 2);
  EXPECT_EQ(d.scheduled[0].num_tokens, 40);

  // The same class is never preempted for it; nor is anything with preempt_lower off.
  running[0].priority = 0;
  in.running = running;
  d = sched.schedule(in);
  EXPECT_TRUE(d.preempt.empty());
  ASSERT_EQ(d.scheduled.size(), 1u);
  EXPECT_EQ(d.scheduled[0].id, 1);
  running[0].priority = 1;
  in.running = running;
  PriorityScheduler polite(512, 8, true, 0, false);
  EXPECT_TRUE(polite.schedule(in).preempt.empty());
}

TEST(PriorityScheduler, FullBatchPreemptsLessUrgent) {
  PriorityScheduler sched(512, 2, true, 0, true);
  std::vector<SeqView> running = {decode_seq(1, 10, 2, 50, 1, 0), decode_seq(2, 10, 2, 50, 1, 1)};
  std::vector<SeqView> waiting = {waiting_seq(3, 0, 10, 5, 0)};
  SchedulerInput in = step_input(running, waiting, 100);
  ScheduleDecision d = sched.schedule(in);
  EXPECT_EQ(d.preempt, std::vector<int>{2});
  ASSERT_EQ(d.scheduled.size(), 2u);
  EXPECT_EQ(d.scheduled[0].id, 1);
  EXPECT_EQ(d.scheduled[1].id, 3);
}

TEST(PriorityScheduler, AgingMovesAWaitingRequestUp) {
  PriorityScheduler aging(512, 1, true, 10.0, true);
  SeqView old = waiting_seq(1, 0, 30, 5, 2);
  EXPECT_EQ(aging.effective_class(old, 9.0), 2);
  EXPECT_EQ(aging.effective_class(old, 10.0), 1);
  EXPECT_EQ(aging.effective_class(old, 25.0), 0);
  // Waited 25 s: class 0 now, and older than the fresh class-0 request.
  std::vector<SeqView> waiting = {waiting_seq(2, 24, 30, 5, 0), old};
  SchedulerInput in;
  in.now_s = 25;
  in.waiting = waiting;
  in.free_blocks = 100;
  EXPECT_EQ(aging.admission_order(in), (std::vector<int>{1, 0}));
  PriorityScheduler strict(512, 1, true, 0, true);
  EXPECT_EQ(strict.admission_order(in), (std::vector<int>{0, 1}));
}

TEST(PriorityScheduler, EveryTokenOnceAndPoolRespectedUnderPressure) {
  auto reqs = two_class_bursts(48);
  HarnessConfig cfg;
  cfg.kv.num_blocks = 40;
  PriorityScheduler sched(128, 16, true, 0, true);
  HarnessResult r = run_scheduler(sched, reqs, cfg);
  ASSERT_EQ(r.finished.size(), reqs.size());
  EXPECT_GT(r.preemptions, 0);
  EXPECT_LE(r.peak_blocks, cfg.kv.num_blocks);
  for (const auto& q : reqs) {
    EXPECT_EQ(r.generated[q.id], q.max_output);
    EXPECT_EQ(r.tokens_processed[q.id], q.prompt + q.max_output - 1 + r.recomputed[q.id]) << "request " << q.id;
  }
}

TEST(PriorityScheduler, LowersUrgentTtftP99AgainstFcfs) {
  auto reqs = two_class_bursts(96);
  HarnessConfig cfg;
  cfg.kv.num_blocks = 60;
  ContinuousScheduler fcfs(128, 8, true);
  PriorityScheduler prio(128, 8, true, 0, true);
  HarnessResult a = run_scheduler(fcfs, reqs, cfg);
  HarnessResult b = run_scheduler(prio, reqs, cfg);
  ASSERT_EQ(a.finished.size(), reqs.size());
  ASSERT_EQ(b.finished.size(), reqs.size());
  const double fcfs_hi = ttft_p99(a, 0), prio_hi = ttft_p99(b, 0);
  const double fcfs_lo = ttft_p99(a, 1), prio_lo = ttft_p99(b, 1);
  std::printf("TTFT p99 (steps): urgent fcfs %.2f priority %.2f (x%.3f); others fcfs %.2f priority %.2f; "
              "steps %d vs %d, preemptions %d vs %d\n",
              fcfs_hi, prio_hi, prio_hi / fcfs_hi, fcfs_lo, prio_lo, a.steps, b.steps, a.preemptions, b.preemptions);
  EXPECT_LT(prio_hi, 0.6 * fcfs_hi);
}

}  // namespace
}  // namespace inferlab::testing
