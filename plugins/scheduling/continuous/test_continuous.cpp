// Continuous batching: hand-made single steps, then whole runs through the real engine on the
// stub executor (tests/support/engine_harness.h; one modelled second per step).
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "engine_harness.h"
#include "inferlab/error.h"
#include "plugins/common/scheduling/continuous_scheduler.h"

namespace inferlab::testing {
namespace {

std::vector<RequestSpec> mixed_requests(int count, double gap) {
  std::vector<RequestSpec> reqs;
  for (int i = 0; i < count; ++i)
    reqs.push_back({i, i * gap, 20 + (i * 37) % 180, 5 + (i * 13) % 40});
  return reqs;
}

TEST(ContinuousScheduler, RejectsBadParams) {
  EXPECT_THROW(ContinuousScheduler(0, 4, true), Error);
  EXPECT_THROW(ContinuousScheduler(16, 0, true), Error);
}

TEST(ContinuousScheduler, DecodeThenPrefillThenAdmission) {
  ContinuousScheduler sched(64, 8, true);
  std::vector<SeqView> running = {waiting_seq(1, 100, 5), decode_seq(2, 10, 3, 20, 1)};
  running[0].num_computed = 40;  // request 1 is mid-prefill
  running[0].blocks_held = 3;
  std::vector<SeqView> waiting = {waiting_seq(3, 30, 5), waiting_seq(4, 30, 5)};
  SchedulerInput in = step_input(running, waiting, 100);
  ScheduleDecision d = sched.schedule(in);
  ASSERT_EQ(d.scheduled.size(), 3u);
  EXPECT_EQ(d.scheduled[0].id, 2);  // decode first
  EXPECT_EQ(d.scheduled[0].num_tokens, 1);
  EXPECT_EQ(d.scheduled[1].id, 1);  // prefill chunk: 63 tokens left of the budget, 60 pending
  EXPECT_EQ(d.scheduled[1].num_tokens, 60);
  EXPECT_EQ(d.scheduled[2].id, 3);  // 3 tokens of budget left: a chunk of request 3
  EXPECT_EQ(d.scheduled[2].num_tokens, 3);
  EXPECT_TRUE(d.preempt.empty());
}

TEST(ContinuousScheduler, DecodeOutOfBlocksPreemptsNewest) {
  ContinuousScheduler sched(64, 8, true);
  // Both at a block boundary (16 tokens computed in 1 block): each needs a new block.
  std::vector<SeqView> running = {decode_seq(7, 12, 5, 20, 1), decode_seq(8, 12, 5, 20, 1)};
  SchedulerInput in = step_input(running, {}, 0);
  ScheduleDecision d = sched.schedule(in);
  ASSERT_EQ(d.preempt.size(), 1u);
  EXPECT_EQ(d.preempt[0], 8);
  ASSERT_EQ(d.scheduled.size(), 1u);
  EXPECT_EQ(d.scheduled[0].id, 7);
  EXPECT_EQ(d.scheduled[0].num_tokens, 1);
}

TEST(ContinuousScheduler, HeadThatDoesNotFitBlocksAdmission) {
  ContinuousScheduler sched(512, 8, true);
  std::vector<SeqView> waiting = {waiting_seq(1, 200, 4), waiting_seq(2, 10, 4)};
  SchedulerInput in = step_input({}, waiting, 5);  // 200 tokens need 13 blocks; request 2 would fit but may not overtake
  EXPECT_TRUE(sched.schedule(in).scheduled.empty());
}

TEST(ContinuousScheduler, SpeculativeDecodeTakesDraftsWithinBudget) {
  ContinuousScheduler sched(6, 8, true);
  std::vector<SeqView> running = {decode_seq(1, 10, 2, 50, 1), decode_seq(2, 10, 2, 50, 1)};
  SchedulerInput in = step_input(running, {}, 10);
  in.max_draft_tokens = 4;
  ScheduleDecision d = sched.schedule(in);
  ASSERT_EQ(d.scheduled.size(), 2u);
  EXPECT_EQ(d.scheduled[0].num_tokens, 5);  // 1 + 4 drafts
  EXPECT_EQ(d.scheduled[1].num_tokens, 1);  // one token of budget left
}

TEST(ContinuousScheduler, EveryTokenOnceBudgetAndBatchRespected) {
  const int max_tokens = 128, max_batch = 5;
  ContinuousScheduler sched(max_tokens, max_batch, true);
  auto reqs = mixed_requests(30, 0.7);
  HarnessConfig cfg;
  cfg.kv.num_blocks = 1000;
  HarnessResult r = run_scheduler(sched, reqs, cfg);
  expect_every_token_once(r, reqs);
  EXPECT_LE(r.max_step_tokens, max_tokens);
  EXPECT_LE(r.max_running, max_batch);
  EXPECT_EQ(r.max_running, max_batch);  // the batch does fill up
}

TEST(ContinuousScheduler, AdmitsWhileOthersRun) {
  ContinuousScheduler sched(256, 16, true);
  auto reqs = mixed_requests(10, 2.0);
  HarnessConfig cfg;
  cfg.kv.num_blocks = 1000;
  int mid_batch_admissions = 0;
  HarnessResult r = run_scheduler(sched, reqs, cfg, [&](int, const SchedulerInput& in, const ScheduleDecision& d) {
    if (!in.running.empty() && d.scheduled.size() > in.running.size()) ++mid_batch_admissions;
  });
  EXPECT_GT(mid_batch_admissions, 0);
}

TEST(ContinuousScheduler, SmallPoolCompletesWithPreemption) {
  ContinuousScheduler sched(256, 32, true);
  std::vector<RequestSpec> reqs;
  for (int i = 0; i < 12; ++i) reqs.push_back({i, 0, 40 + 3 * i, 60});
  HarnessConfig cfg;
  cfg.kv.num_blocks = 24;  // each request ends up needing 7-9 blocks: at most ~3 fit at the end
  HarnessResult r = run_scheduler(sched, reqs, cfg);
  ASSERT_EQ(r.finished.size(), reqs.size());
  EXPECT_GT(r.preemptions, 0);
  EXPECT_LE(r.peak_blocks, cfg.kv.num_blocks);
  for (const auto& q : reqs) {
    EXPECT_EQ(r.generated[q.id], q.max_output);
    // New work exactly once; recomputation only of what preemption threw away.
    EXPECT_EQ(r.tokens_processed[q.id], q.prompt + q.max_output - 1 + r.recomputed[q.id]);
  }
}

// The engine puts the requests one decision preempts back at the front of the waiting queue
// one by one in the decision's order, so the next step sees them reversed: continuous preempts
// newest first, and they come back oldest first. (The old
// in-test simulation re-queued them newest first.)
TEST(ContinuousScheduler, PreemptedRequestsComeBackOldestFirst) {
  ContinuousScheduler sched(256, 8, true);
  std::vector<RequestSpec> reqs;
  for (int i = 0; i < 6; ++i) reqs.push_back({i, 0, 32, 40});
  HarnessConfig cfg;
  cfg.kv.num_blocks = 13;  // six 2-block prompts fit; their first decode steps need six more blocks
  std::vector<std::vector<int>> preempted, waiting_after;
  std::vector<int> last;
  HarnessResult r = run_scheduler(sched, reqs, cfg, [&](int, const SchedulerInput& in, const ScheduleDecision& d) {
    if (!last.empty()) {
      std::vector<int> ids;
      for (const SeqView& s : in.waiting) ids.push_back(s.id);
      waiting_after.push_back(ids);
    }
    last = d.preempt;
    if (!d.preempt.empty()) preempted.push_back(d.preempt);
  });
  ASSERT_FALSE(preempted.empty());
  // Step 1: requests 0-3 decode into the free block and the blocks of 5 and 4.
  EXPECT_EQ(preempted[0], (std::vector<int>{5, 4}));
  ASSERT_FALSE(waiting_after.empty());
  EXPECT_EQ(waiting_after[0], (std::vector<int>{4, 5}));
  EXPECT_EQ(r.finished.size(), reqs.size());
}

TEST(ContinuousScheduler, ChunkedPrefillSplitsLongPrompt) {
  ContinuousScheduler sched(256, 8, true);
  std::vector<RequestSpec> reqs = {{0, 0, 1000, 2}};
  HarnessConfig cfg;
  cfg.kv.num_blocks = 100;
  std::vector<int> chunks;
  HarnessResult r = run_scheduler(sched, reqs, cfg, [&](int, const SchedulerInput&, const ScheduleDecision& d) {
    for (const ScheduledSeq& sc : d.scheduled) chunks.push_back(sc.num_tokens);
  });
  EXPECT_EQ(chunks, (std::vector<int>{256, 256, 256, 232, 1}));
}

TEST(ContinuousScheduler, UnchunkedLongPromptRunsAlone) {
  ContinuousScheduler sched(256, 8, false);
  std::vector<RequestSpec> reqs = {{0, 0, 100, 30}, {1, 1, 1000, 2}, {2, 1, 50, 2}};
  HarnessConfig cfg;
  cfg.kv.num_blocks = 200;
  bool saw_long = false;
  HarnessResult r = run_scheduler(sched, reqs, cfg, [&](int, const SchedulerInput&, const ScheduleDecision& d) {
    for (const ScheduledSeq& sc : d.scheduled) {
      if (sc.num_tokens == 1000) {
        saw_long = true;
        EXPECT_EQ(d.scheduled.size(), 1u);  // alone in its step
      } else {
        EXPECT_LE(sc.num_tokens, 256);
      }
    }
  });
  EXPECT_TRUE(saw_long);
  EXPECT_EQ(r.finished.size(), 3u);
  for (const auto& q : reqs) EXPECT_EQ(r.tokens_processed[q.id], q.prompt + q.max_output - 1);
}

TEST(ContinuousScheduler, RequestThatCanNeverFitIsLeftUnscheduled) {
  ContinuousScheduler sched(512, 8, true);
  // 400 + 8 - 1 tokens need 26 blocks; the pool has 20.
  std::vector<SeqView> waiting = {waiting_seq(0, 400, 8)};
  SchedulerInput in = step_input({}, waiting, 20);
  EXPECT_TRUE(sched.schedule(in).scheduled.empty());

  // The engine reports it instead of dropping it: with FCFS (no overtaking) request 1 waits
  // behind it, so the run stops with an error naming request 0.
  HarnessConfig cfg;
  cfg.kv.num_blocks = 20;
  try {
    run_scheduler(sched, {{0, 0, 400, 8}, {1, 0, 30, 8}}, cfg);
    ADD_FAILURE() << "the engine ran a request that can never fit";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("request 0 can never be scheduled: it needs 26 KV blocks, the pool has 20"),
              std::string::npos)
        << e.what();
  }
  // Without it, the other request runs.
  HarnessResult r = run_scheduler(sched, {{1, 0, 30, 8}}, cfg);
  EXPECT_EQ(r.finished, std::vector<int>{1});
  EXPECT_EQ(r.generated[1], 8);
}

// With prefix caching a request arriving after another has published a shared prefix starts
// with that prefix computed: the scheduler sees it (num_computed, blocks_held) and schedules
// only the rest.
TEST(ContinuousScheduler, PrefixHitsAreNotRecomputed) {
  ContinuousScheduler sched(256, 8, true);
  std::vector<RequestSpec> reqs = {{0, 0, 100, 4}, {1, 2, 90, 4}, {2, 3, 70, 4}};
  HarnessConfig cfg;
  cfg.kv.num_blocks = 40;
  cfg.kv.prefix_caching = true;
  cfg.shared_prefix = 64;  // 4 full blocks of 16
  std::map<int, int> computed_on_arrival;
  HarnessResult r = run_scheduler(sched, reqs, cfg, [&](int, const SchedulerInput& in, const ScheduleDecision&) {
    for (const SeqView& s : in.waiting)
      if (!computed_on_arrival.count(s.id)) computed_on_arrival[s.id] = s.num_computed;
  });
  EXPECT_EQ(computed_on_arrival, (std::map<int, int>{{0, 0}, {1, 64}, {2, 64}}));
  EXPECT_EQ(r.tokens_processed[0], 100 + 4 - 1);
  EXPECT_EQ(r.tokens_processed[1], 90 + 4 - 1 - 64);
  EXPECT_EQ(r.tokens_processed[2], 70 + 4 - 1 - 64);
  EXPECT_EQ(r.timeline.requests[1].cached_prompt_tokens, 64);
  EXPECT_EQ(r.finished.size(), reqs.size());
}

TEST(ContinuousScheduler, SpeculationWithSmallPool) {
  ContinuousScheduler sched(64, 16, true);
  auto reqs = mixed_requests(10, 0.3);
  HarnessConfig cfg;
  cfg.kv.num_blocks = 30;
  cfg.max_draft_tokens = 3;
  cfg.accepted = [](int id, int step, int drafts) { return (id * 7 + step) % (drafts + 1); };
  HarnessResult r = run_scheduler(sched, reqs, cfg);
  ASSERT_EQ(r.finished.size(), reqs.size());
  EXPECT_GT(r.timeline.spec_accepted, 0);  // drafts were really verified and accepted
  EXPECT_LT(r.timeline.spec_accepted, r.timeline.spec_proposed);  // and some rejected
  EXPECT_LE(r.max_step_tokens, 64);
  for (const auto& q : reqs) {
    EXPECT_EQ(r.generated[q.id], q.max_output);
    EXPECT_EQ(r.tokens_processed[q.id], q.prompt + q.max_output - 1 + r.recomputed[q.id]);
  }
}

TEST(ContinuousScheduler, ReserveFullPolicyIsRespected) {
  ContinuousScheduler sched(128, 16, true);
  auto reqs = mixed_requests(12, 0.5);
  HarnessConfig cfg;
  cfg.kv.num_blocks = 40;
  cfg.kv.reservation = KvReservation::kFull;
  HarnessResult r = run_scheduler(sched, reqs, cfg);
  EXPECT_EQ(r.finished.size(), reqs.size());
  EXPECT_EQ(r.preemptions, 0);  // everything was reserved up front
}

}  // namespace
}  // namespace inferlab::testing
