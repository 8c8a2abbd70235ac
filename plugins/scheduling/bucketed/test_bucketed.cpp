// Bucketed static batching: bucket edges, batch formation from the oldest request's bucket,
// then whole runs through the real engine on the stub executor (tests/support/engine_harness.h).
#include <gtest/gtest.h>

#include <cstdio>
#include <set>

#include "bucketed.h"
#include "engine_harness.h"
#include "inferlab/error.h"

namespace inferlab::testing {
using namespace plugins;
namespace {

TEST(BucketedScheduler, ParsesEdges) {
  EXPECT_EQ(BucketedScheduler::parse_edges("128, 512,2048"), (std::vector<int>{128, 512, 2048}));
  EXPECT_TRUE(BucketedScheduler::parse_edges("").empty());
  EXPECT_THROW(BucketedScheduler::parse_edges("512,128"), Error);
  EXPECT_THROW(BucketedScheduler::parse_edges("64,x"), Error);
  EXPECT_THROW(BucketedScheduler::parse_edges("0"), Error);
  EXPECT_THROW(BucketedScheduler(0, {}), Error);
  EXPECT_THROW(BucketedScheduler(4, {5, 5}), Error);
}

TEST(BucketedScheduler, BucketsAreHalfOpenAbove) {
  BucketedScheduler b(4, {128, 512});
  EXPECT_EQ(b.bucket_of(1), 0);
  EXPECT_EQ(b.bucket_of(128), 0);
  EXPECT_EQ(b.bucket_of(129), 1);
  EXPECT_EQ(b.bucket_of(512), 1);
  EXPECT_EQ(b.bucket_of(513), 2);
}

TEST(BucketedScheduler, BatchFromTheOldestRequestsBucket) {
  BucketedScheduler sched(3, {128, 512});
  std::vector<SeqView> waiting = {waiting_seq(1, 100, 4), waiting_seq(2, 300, 4), waiting_seq(3, 50, 4),
                                  waiting_seq(4, 120, 4), waiting_seq(5, 10, 4)};
  SchedulerInput in = step_input({}, waiting, 1000);
  ScheduleDecision d = sched.schedule(in);
  EXPECT_EQ(scheduled_ids(d), (std::vector<int>{1, 3, 4}));  // bucket 0, max_batch 3; request 2 is bucket 1
  EXPECT_EQ(d.scheduled[0].num_tokens, 100);
  // While a batch runs nothing is admitted.
  SeqView run = waiting_seq(1, 100, 4);
  run.num_tokens = 101;
  run.num_computed = 100;
  run.generated = 1;
  run.blocks_held = 7;
  std::vector<SeqView> running = {run};
  in.running = running;
  EXPECT_EQ(scheduled_ids(sched.schedule(in)), std::vector<int>{1});
}

TEST(BucketedScheduler, WholeRunBatchesStayInOneBucket) {
  std::vector<RequestSpec> reqs;
  for (int i = 0; i < 40; ++i) reqs.push_back({i, i * 0.5, 10 + (i * 97) % 600, 3 + (i * 7) % 12});
  BucketedScheduler sched(6, {64, 256});
  HarnessConfig cfg;
  cfg.kv.num_blocks = 300;
  int batches = 0;
  HarnessResult r = run_scheduler(sched, reqs, cfg, [&](int, const SchedulerInput& in, const ScheduleDecision& d) {
    if (!in.running.empty() || d.scheduled.empty()) return;
    ++batches;
    std::set<int> buckets;
    for (const ScheduledSeq& sc : d.scheduled)
      for (const SeqView& w : in.waiting)
        if (w.id == sc.id) buckets.insert(sched.bucket_of(w.prompt_len));
    EXPECT_EQ(buckets.size(), 1u);
  });
  ASSERT_EQ(r.finished.size(), reqs.size());
  EXPECT_EQ(r.preemptions, 0);
  EXPECT_LE(r.peak_blocks, cfg.kv.num_blocks);
  for (const auto& q : reqs) EXPECT_EQ(r.tokens_processed[q.id], q.prompt + q.max_output - 1) << "request " << q.id;
  std::printf("bucketed: %d batches, %d steps\n", batches, r.steps);
}

}  // namespace
}  // namespace inferlab::testing
