// Static batching with prompt-length buckets: when nothing runs, a batch is formed from the
// waiting requests in the bucket of the oldest one (bucket b holds prompts in
// (edges[b-1], edges[b]], the last bucket everything above the last edge), up to max_batch,
// arrival order, no overtaking within the bucket; it runs to completion before the next batch
// is formed, never preempting. Grouping similar lengths is how static batching limits padding
// (TensorFlow Serving / Triton batchers, FasterTransformer-era serving): a short prompt does not
// wait for the longest prompt in its batch.
#pragma once
#include <string>
#include <vector>

#include "inferlab/plugin/scheduler.h"

namespace inferlab::plugins {

class BucketedScheduler : public Scheduler {
 public:
  // max_batch >= 1; edges strictly increasing, each >= 1.
  BucketedScheduler(int max_batch, std::vector<int> edges);

  // "128,512,2048" -> {128, 512, 2048}; throws Error naming the expected form otherwise.
  static std::vector<int> parse_edges(const std::string& text);

  // The bucket of a prompt length: the number of edges below it.
  int bucket_of(int prompt_len) const;

  ScheduleDecision schedule(const SchedulerInput& input) override;

 private:
  int max_batch_;
  std::vector<int> edges_;
};

}  // namespace inferlab::plugins
