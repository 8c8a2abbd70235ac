// Shortest-job-first admission on top of continuous (iteration-level) batching. Each step runs
// exactly the continuous scheduler's logic (decode first, then running prefills, then
// admissions under the token budget, max_batch and the free KV blocks, with preemption of the
// newest running request when a decode cannot grow); only the order in which waiting requests
// are offered for admission changes: shortest job first by a chosen length, arrival breaking
// ties, with aging so a long job cannot starve. SJF/SRPT are the classic mean-latency-optimal
// policies (Schrage 1968); for LLM serving see Fu et al., "Efficient LLM Scheduling by Learning
// to Rank", 2024, which ranks by predicted output length. Here the lengths are the requests'
// declared ones (an oracle, as in that paper's upper bound).
#pragma once
#include <string>
#include <vector>

#include "inferlab/plugin/scheduler.h"
#include "plugins/common/scheduling/continuous_scheduler.h"

namespace inferlab::plugins {

class SjfScheduler : public Scheduler {
 public:
  // Which length orders the waiting queue: prompt_len + max_output, prompt_len, max_output.
  enum class Key { kTotal, kPrompt, kOutput };
  // "total" | "prompt" | "output"; throws Error naming the allowed values otherwise.
  static Key parse_key(const std::string& text);

  // max_tokens, max_batch, chunked_prefill: as for ContinuousScheduler (>= 1 each).
  // starvation_s: a request waiting longer than this (now_s - arrival_s > starvation_s) goes
  // ahead of every shorter job, oldest first; 0 turns aging off. Must be >= 0.
  SjfScheduler(int max_tokens, int max_batch, bool chunked_prefill, Key key, double starvation_s);

  // The continuous step with the waiting requests reordered by admission_order().
  ScheduleDecision schedule(const SchedulerInput& input) override;

  // The order waiting requests are offered for admission, as indices into input.waiting:
  //   1. requests that were preempted after producing tokens (generated > 0), in the engine's
  //      order — they have already been admitted once and go first as under FCFS;
  //   2. aged requests (waiting longer than starvation_s), by arrival;
  //   3. the rest by (key length, arrival, id) ascending;
  //   4. requests whose whole life can never fit the KV pool, last, so they cannot block
  //      admission (the engine reports them once nothing else is left).
  std::vector<int> admission_order(const SchedulerInput& input) const;

  Key key() const { return key_; }
  double starvation_s() const { return starvation_s_; }

 private:
  int length_of(const SeqView& s) const;

  ContinuousScheduler step_;
  Key key_;
  double starvation_s_;
};

}  // namespace inferlab::plugins
