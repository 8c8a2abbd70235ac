// Static batching: a fixed batch is admitted when nothing runs and runs to completion before
// the next batch is admitted (the FasterTransformer-era baseline that continuous batching beats).
#pragma once
#include "inferlab/plugin/scheduler.h"

namespace inferlab::plugins {

class StaticScheduler : public Scheduler {
 public:
  // max_batch: most requests in one batch (>= 1).
  explicit StaticScheduler(int max_batch);

  // Nothing running: admits up to max_batch waiting requests in arrival order whose whole
  // lifetime (prompt + max_output - 1 tokens, the last generated token is never fed back)
  // fits the free blocks, and schedules each one's whole pending prompt. A batch running:
  // one decode token per request (1 + drafts under speculation). Never admits mid-batch,
  // never preempts.
  ScheduleDecision schedule(const SchedulerInput& input) override;

  int max_batch() const { return max_batch_; }

 private:
  int max_batch_;
};

}  // namespace inferlab::plugins
