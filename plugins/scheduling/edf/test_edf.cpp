// Earliest deadline first with admission control: single hand-made steps, then whole runs
// through the real engine on the stub executor (tests/support/engine_harness.h; one modelled
// second per step, so deadlines are in steps).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "edf.h"
#include "engine_harness.h"
#include "inferlab/error.h"
#include "inferlab/results/metrics.h"
#include "plugins/common/scheduling/continuous_scheduler.h"

namespace inferlab::testing {
using namespace plugins;
namespace {

double metric(const MetricRow& row, const std::string& name) {
  for (const auto& [k, v] : row)
    if (k == name) return v;
  ADD_FAILURE() << "no metric " << name;
  return 0;
}

TEST(EdfScheduler, ParsesPerClassSlos) {
  EXPECT_EQ(EdfScheduler::parse_slo_list("200, 2000"), (std::vector<double>{0.2, 2.0}));
  EXPECT_TRUE(EdfScheduler::parse_slo_list("").empty());
  EXPECT_THROW(EdfScheduler::parse_slo_list("200,,300"), Error);
  EXPECT_THROW(EdfScheduler::parse_slo_list("fast"), Error);
  EXPECT_THROW(EdfScheduler::parse_slo_list("-5"), Error);
}

TEST(EdfScheduler, EarliestDeadlineAdmittedFirst) {
  EdfScheduler sched(512, 1, true, {1.0, 10.0}, false);
  // Request 1 (class 1) arrived first, deadline 10; request 2 (class 0) at 2, deadline 3.
  std::vector<SeqView> waiting = {waiting_seq(1, 0, 30, 5, 1), waiting_seq(2, 2, 30, 5, 0)};
  EXPECT_EQ(sched.deadline(waiting[0]), 10.0);
  EXPECT_EQ(sched.deadline(waiting[1]), 3.0);
  SchedulerInput in;
  in.now_s = 2;
  in.waiting = waiting;
  in.free_blocks = 100;
  ScheduleDecision d = sched.schedule(in);
  ASSERT_EQ(d.scheduled.size(), 1u);
  EXPECT_EQ(d.scheduled[0].id, 2);
  // Classes past the list take its last entry; no list means no deadline (FCFS).
  EXPECT_EQ(sched.deadline(waiting_seq(3, 1, 30, 5, 7)), 11.0);
  EdfScheduler none(512, 1, true, {}, true);
  EXPECT_EQ(none.schedule(in).scheduled[0].id, 1);
}

TEST(EdfScheduler, RejectsOnlyWhenLateAndAsked) {
  std::vector<SeqView> waiting = {waiting_seq(1, 0, 30, 5, 0), waiting_seq(2, 4, 30, 5, 0)};
  SchedulerInput in;
  in.now_s = 5;  // request 1's deadline (1) has passed, request 2's (5) has not
  in.waiting = waiting;
  in.free_blocks = 100;
  EdfScheduler strict(512, 8, true, {1.0}, true);
  ScheduleDecision d = strict.schedule(in);
  EXPECT_EQ(d.reject, std::vector<int>{1});
  ASSERT_EQ(d.scheduled.size(), 1u);
  EXPECT_EQ(d.scheduled[0].id, 2);
  EdfScheduler lenient(512, 8, true, {1.0}, false);
  d = lenient.schedule(in);
  EXPECT_TRUE(d.reject.empty());
  EXPECT_EQ(d.scheduled.size(), 2u);
}

TEST(EdfScheduler, RejectedRequestsAreRecordedAndTheRestFinish) {
  // 30 requests at once, 2 slots, ~10 steps each: most cannot start within 12 steps.
  std::vector<RequestSpec> reqs;
  for (int i = 0; i < 30; ++i) reqs.push_back({i, 0, 20, 10});
  HarnessConfig cfg;
  cfg.kv.num_blocks = 200;
  EdfScheduler sched(64, 2, true, {12.0}, true);  // 12 s = 12 steps
  HarnessResult r = run_scheduler(sched, reqs, cfg);
  int rejected = 0;
  for (const RequestTimeline& rt : r.timeline.requests) {
    if (rt.status == RequestStatus::kRejected) {
      ++rejected;
      EXPECT_LT(rt.finish_s, 0);
      EXPECT_EQ(rt.output_tokens, 0);
    } else {
      EXPECT_GE(rt.finish_s, 0);
      EXPECT_LE(rt.first_scheduled_s - rt.arrival_s, 12.0) << "request " << rt.id;
    }
  }
  EXPECT_GT(rejected, 0);
  EXPECT_EQ(static_cast<int>(r.finished.size()) + rejected, 30);
  SloSpec slo;
  MetricRow row = compute_metrics(r.timeline, slo);
  EXPECT_EQ(metric(row, "requests_rejected"), rejected);
  EXPECT_EQ(metric(row, "requests"), 30 - rejected);
  EXPECT_EQ(metric(row, "requests_unfinished"), 0);
  EXPECT_NEAR(metric(row, "slo_attain_frac"), (30.0 - rejected) / 30.0, 1e-12);
  std::printf("edf reject_late: %d of 30 rejected, %zu finished\n", rejected, r.finished.size());
}

TEST(EdfScheduler, TwoClassesMeetMoreDeadlinesThanFcfs) {
  // Bursts of 10 every 40 steps; every fifth request has a tight 6-step TTFT SLO, the rest 60.
  std::vector<RequestSpec> reqs;
  for (int i = 0; i < 60; ++i) reqs.push_back({i, (i / 10) * 40.0, 30 + (i * 17) % 60, 6 + (i * 7) % 10, i % 5 == 4 ? 0 : 1});
  HarnessConfig cfg;
  cfg.kv.num_blocks = 400;
  SloSpec slo;
  slo.class_ttft_ms = {6000, 60000};
  ContinuousScheduler fcfs(64, 4, true);
  EdfScheduler edf(64, 4, true, {6.0, 60.0}, false);
  const double a = metric(compute_metrics(run_scheduler(fcfs, reqs, cfg).timeline, slo), "class0_slo_attain_frac");
  const double b = metric(compute_metrics(run_scheduler(edf, reqs, cfg).timeline, slo), "class0_slo_attain_frac");
  std::printf("tight class SLO attainment: fcfs %.3f, edf %.3f\n", a, b);
  EXPECT_GT(b, a);
}

}  // namespace
}  // namespace inferlab::testing
