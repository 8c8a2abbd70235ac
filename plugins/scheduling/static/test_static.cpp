// Static batching against the in-test engine simulation (../sim_engine.h).
#include <gtest/gtest.h>

#include "../sim_engine.h"
#include "inferlab/error.h"
#include "static.h"

namespace inferlab {
using namespace plugins;
namespace {

std::vector<sim::Request> uniform_requests(int count, int prompt, int output, double gap = 0) {
  std::vector<sim::Request> reqs;
  for (int i = 0; i < count; ++i) reqs.push_back({i, i * gap, prompt + 7 * (i % 3), output + i % 4});
  return reqs;
}

void expect_clean(const sim::Result& r) {
  EXPECT_TRUE(r.violations.empty()) << r.violations.front();
  EXPECT_FALSE(r.stalled);
}

TEST(StaticScheduler, RejectsZeroBatch) { EXPECT_THROW(StaticScheduler(0), Error); }

TEST(StaticScheduler, EveryTokenProcessedExactlyOnce) {
  StaticScheduler sched(4);
  auto reqs = uniform_requests(10, 40, 12, 0.5);
  sim::Config cfg;
  cfg.num_blocks = 200;
  sim::Result r = sim::run(sched, reqs, cfg);
  expect_clean(r);
  ASSERT_EQ(r.finished.size(), reqs.size());
  EXPECT_EQ(r.preemptions, 0);
  for (const auto& q : reqs) {
    EXPECT_EQ(r.tokens_processed[q.id], q.prompt + q.max_output - 1) << "request " << q.id;
    EXPECT_EQ(r.generated[q.id], q.max_output);
  }
  EXPECT_LE(r.max_running, 4);
}

TEST(StaticScheduler, NoAdmissionWhileABatchRuns) {
  StaticScheduler sched(3);
  auto reqs = uniform_requests(8, 20, 9, 1.0);  // requests keep arriving during batches
  sim::Config cfg;
  cfg.num_blocks = 100;
  int admissions_mid_batch = 0, batches = 0;
  sim::Result r = sim::run(sched, reqs, cfg, [&](int, const SchedulerInput& in, const ScheduleDecision& d) {
    std::set<int> running;
    for (const SeqView& s : in.running) running.insert(s.id);
    bool admits = false;
    for (const ScheduledSeq& sc : d.scheduled) {
      if (!running.count(sc.id)) admits = true;
      // Prompts are processed whole in the admitting step; decode steps take one token.
      if (running.count(sc.id)) {
        EXPECT_EQ(sc.num_tokens, 1);
      }
    }
    if (admits && !in.running.empty()) ++admissions_mid_batch;
    if (admits) ++batches;
    EXPECT_TRUE(d.preempt.empty());
  });
  expect_clean(r);
  EXPECT_EQ(admissions_mid_batch, 0);
  EXPECT_EQ(r.finished.size(), reqs.size());
  EXPECT_GE(batches, 3);  // 8 requests, at most 3 per batch
}

TEST(StaticScheduler, FirstStepProcessesWholePrompts) {
  StaticScheduler sched(8);
  std::vector<sim::Request> reqs = {{0, 0, 1000, 3}, {1, 0, 5, 3}};
  sim::Config cfg;
  cfg.num_blocks = 100;
  bool checked = false;
  sim::run(sched, reqs, cfg, [&](int step, const SchedulerInput&, const ScheduleDecision& d) {
    if (step != 0) return;
    ASSERT_EQ(d.scheduled.size(), 2u);
    EXPECT_EQ(d.scheduled[0].num_tokens, 1000);
    EXPECT_EQ(d.scheduled[1].num_tokens, 5);
    checked = true;
  });
  EXPECT_TRUE(checked);
}

TEST(StaticScheduler, BatchLimitedByBlocksForWholeLifetime) {
  // Each request needs ceil((32 + 17 - 1) / 16) = 3 blocks over its life; 7 blocks hold two.
  StaticScheduler sched(8);
  std::vector<sim::Request> reqs;
  for (int i = 0; i < 5; ++i) reqs.push_back({i, 0, 32, 17});
  sim::Config cfg;
  cfg.num_blocks = 7;
  sim::Result r = sim::run(sched, reqs, cfg);
  expect_clean(r);
  EXPECT_EQ(r.finished.size(), 5u);
  EXPECT_EQ(r.max_running, 2);
  EXPECT_LE(r.peak_blocks, 7);
  EXPECT_EQ(r.preemptions, 0);
}

TEST(StaticScheduler, RequestThatCanNeverFitIsLeftUnscheduled) {
  StaticScheduler sched(4);
  // 300 + 10 - 1 tokens need 20 blocks; the pool has 10.
  std::vector<sim::Request> reqs = {{0, 0, 300, 10}, {1, 0, 20, 5}};
  sim::Config cfg;
  cfg.num_blocks = 10;
  SchedulerInput in;
  std::vector<SeqView> waiting(1);
  waiting[0].id = 0;
  waiting[0].prompt_len = 300;
  waiting[0].max_output = 10;
  waiting[0].num_tokens = 300;
  in.waiting = waiting;
  in.free_blocks = 10;
  EXPECT_TRUE(sched.schedule(in).scheduled.empty());

  sim::Result r = sim::run(sched, reqs, cfg);
  expect_clean(r);
  ASSERT_EQ(r.rejected.size(), 1u);
  EXPECT_EQ(r.rejected[0], 0);
  ASSERT_EQ(r.finished.size(), 1u);
  EXPECT_EQ(r.finished[0], 1);
}

TEST(StaticScheduler, SpeculativeStepsStayWithinOutputAndBlocks) {
  StaticScheduler sched(4);
  auto reqs = uniform_requests(6, 30, 20);
  sim::Config cfg;
  cfg.num_blocks = 40;
  cfg.max_draft_tokens = 4;
  cfg.accepted = [](int id, int step, int drafts) { return (id + step) % (drafts + 1); };
  int spec_steps = 0;
  sim::Result r = sim::run(sched, reqs, cfg, [&](int, const SchedulerInput& in, const ScheduleDecision& d) {
    for (const ScheduledSeq& sc : d.scheduled)
      for (const SeqView& s : in.running)
        if (s.id == sc.id) {
          EXPECT_LE(sc.num_tokens, s.max_output - s.generated);  // no draft past the end
          if (sc.num_tokens > 1) ++spec_steps;
        }
  });
  expect_clean(r);
  EXPECT_GT(spec_steps, 0);
  ASSERT_EQ(r.finished.size(), reqs.size());
  for (const auto& q : reqs) {
    EXPECT_EQ(r.generated[q.id], q.max_output);
    EXPECT_EQ(r.tokens_processed[q.id], q.prompt + q.max_output - 1);
  }
}

TEST(StaticScheduler, ReserveFullPolicyIsRespected) {
  StaticScheduler sched(8);
  auto reqs = uniform_requests(6, 25, 10);
  sim::Config cfg;
  cfg.num_blocks = 9;
  cfg.reserve_full = true;
  sim::Result r = sim::run(sched, reqs, cfg);
  expect_clean(r);
  EXPECT_EQ(r.finished.size(), reqs.size());
  EXPECT_LE(r.peak_blocks, 9);
}

}  // namespace
}  // namespace inferlab
