// Static batching, run through the real engine on the stub executor
// (tests/support/engine_harness.h; one modelled second per step).
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <set>
#include <string>

#include "engine_harness.h"
#include "inferlab/error.h"
#include "plugins/common/scheduling/continuous_scheduler.h"
#include "static.h"

namespace inferlab::testing {
using namespace plugins;
namespace {


std::vector<RequestSpec> uniform_requests(int count, int prompt, int output, double gap = 0) {
  std::vector<RequestSpec> reqs;
  for (int i = 0; i < count; ++i) reqs.push_back({i, i * gap, prompt + 7 * (i % 3), output + i % 4});
  return reqs;
}

TEST(StaticScheduler, RejectsZeroBatch) { EXPECT_THROW(StaticScheduler(0), Error); }

TEST(StaticScheduler, EveryTokenProcessedExactlyOnce) {
  StaticScheduler sched(4);
  auto reqs = uniform_requests(10, 40, 12, 0.5);
  HarnessConfig cfg;
  cfg.kv.num_blocks = 200;
  HarnessResult r = run_scheduler(sched, reqs, cfg);
  expect_every_token_once(r, reqs);
  EXPECT_LE(r.max_running, 4);
}

TEST(StaticScheduler, NoAdmissionWhileABatchRuns) {
  StaticScheduler sched(3);
  auto reqs = uniform_requests(8, 20, 9, 1.0);  // requests keep arriving during batches
  HarnessConfig cfg;
  cfg.kv.num_blocks = 100;
  int admissions_mid_batch = 0, batches = 0;
  HarnessResult r = run_scheduler(sched, reqs, cfg, [&](int, const SchedulerInput& in, const ScheduleDecision& d) {
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
  EXPECT_EQ(admissions_mid_batch, 0);
  EXPECT_EQ(r.finished.size(), reqs.size());
  EXPECT_GE(batches, 3);  // 8 requests, at most 3 per batch
}

TEST(StaticScheduler, FirstStepProcessesWholePrompts) {
  StaticScheduler sched(8);
  std::vector<RequestSpec> reqs = {{0, 0, 1000, 3}, {1, 0, 5, 3}};
  HarnessConfig cfg;
  cfg.kv.num_blocks = 100;
  bool checked = false;
  run_scheduler(sched, reqs, cfg, [&](int step, const SchedulerInput&, const ScheduleDecision& d) {
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
  std::vector<RequestSpec> reqs;
  for (int i = 0; i < 5; ++i) reqs.push_back({i, 0, 32, 17});
  HarnessConfig cfg;
  cfg.kv.num_blocks = 7;
  HarnessResult r = run_scheduler(sched, reqs, cfg);
  EXPECT_EQ(r.finished.size(), 5u);
  EXPECT_EQ(r.max_running, 2);
  EXPECT_LE(r.peak_blocks, 7);
  EXPECT_EQ(r.preemptions, 0);
}

TEST(StaticScheduler, RequestThatCanNeverFitIsLeftUnscheduled) {
  StaticScheduler sched(4);
  // 300 + 10 - 1 tokens need 20 blocks; the pool has 10.
  std::vector<RequestSpec> reqs = {{0, 0, 300, 10}, {1, 0, 20, 5}};
  HarnessConfig cfg;
  cfg.kv.num_blocks = 10;
  SchedulerInput in;
  std::vector<SeqView> waiting(1);
  waiting[0].id = 0;
  waiting[0].prompt_len = 300;
  waiting[0].max_output = 10;
  waiting[0].num_tokens = 300;
  in.waiting = waiting;
  in.free_blocks = 10;
  EXPECT_TRUE(sched.schedule(in).scheduled.empty());

  // The engine reports it instead of dropping it: request 1 waits behind it (arrival order,
  // no overtaking), so the run stops with an error naming request 0.
  try {
    run_scheduler(sched, reqs, cfg);
    ADD_FAILURE() << "the engine ran a request that can never fit";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("request 0 can never be scheduled: it needs 20 KV blocks, the pool has 10"),
              std::string::npos)
        << e.what();
  }
  // Without it, the other request runs.
  HarnessResult r = run_scheduler(sched, {reqs[1]}, cfg);
  ASSERT_EQ(r.finished.size(), 1u);
  EXPECT_EQ(r.finished[0], 1);
  EXPECT_EQ(r.generated[1], 5);
}

TEST(StaticScheduler, SpeculativeStepsStayWithinOutputAndBlocks) {
  StaticScheduler sched(4);
  auto reqs = uniform_requests(6, 30, 20);
  HarnessConfig cfg;
  cfg.kv.num_blocks = 40;
  cfg.max_draft_tokens = 4;
  cfg.accepted = [](int id, int step, int drafts) { return (id + step) % (drafts + 1); };
  int spec_steps = 0;
  HarnessResult r = run_scheduler(sched, reqs, cfg, [&](int, const SchedulerInput& in, const ScheduleDecision& d) {
    for (const ScheduledSeq& sc : d.scheduled)
      for (const SeqView& s : in.running)
        if (s.id == sc.id) {
          EXPECT_LE(sc.num_tokens, s.max_output - s.generated);  // no draft past the end
          if (sc.num_tokens > 1) ++spec_steps;
        }
  });
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
  HarnessConfig cfg;
  cfg.kv.num_blocks = 9;
  cfg.kv.reservation = KvReservation::kFull;
  HarnessResult r = run_scheduler(sched, reqs, cfg);
  EXPECT_EQ(r.finished.size(), reqs.size());
  EXPECT_LE(r.peak_blocks, 9);
}

// The figures in this plugin's and continuous's READMEs: 64 requests arriving every 0.5 steps,
// prompts 20-499, outputs 8-127, block_size 16, continuous with max_tokens 512.
TEST(StaticScheduler, TakesMoreStepsThanContinuousOnMixedArrivals) {
  std::vector<RequestSpec> reqs;
  for (int i = 0; i < 64; ++i) reqs.push_back({i, i * 0.5, 20 + (i * 37) % 480, 8 + (i * 13) % 120});
  auto tokens = [](const std::map<int, long long>& per_request) {
    long long sum = 0;
    for (const auto& [id, n] : per_request) sum += n;
    return sum;
  };
  for (int pool : {400, 100}) {
    HarnessConfig cfg;
    cfg.kv.num_blocks = pool;
    StaticScheduler batch8(8);
    ContinuousScheduler cont8(512, 8, true), cont64(512, 64, true);
    HarnessResult s = run_scheduler(batch8, reqs, cfg);
    HarnessResult c = run_scheduler(cont8, reqs, cfg);
    HarnessResult w = run_scheduler(cont64, reqs, cfg);
    long long recomputed = 0;
    for (const auto& [id, n] : w.recomputed) recomputed += n;
    std::printf("%d blocks: static(8) %d steps (%.1f tokens/step); continuous(8) %d steps (%.1f tokens/step); "
                "continuous(64) %d steps (%.1f tokens/step, %d preemptions, %.1f%% of tokens recomputed, %d running "
                "at peak)\n",
                pool, s.steps, static_cast<double>(tokens(s.tokens_processed)) / s.steps, c.steps,
                static_cast<double>(tokens(c.tokens_processed)) / c.steps, w.steps,
                static_cast<double>(tokens(w.tokens_processed)) / w.steps, w.preemptions,
                100.0 * static_cast<double>(recomputed) / static_cast<double>(tokens(w.tokens_processed)),
                w.max_running);
    EXPECT_EQ(s.finished.size(), reqs.size());
    EXPECT_LT(c.steps, s.steps) << pool << " blocks";
    EXPECT_LE(w.steps, c.steps) << pool << " blocks";
  }
}

}  // namespace
}  // namespace inferlab::testing
