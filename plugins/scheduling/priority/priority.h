// Strict priority classes on top of continuous (iteration-level) batching. Each step runs the
// continuous step (plugins/common/scheduling/continuous_scheduler.h) over a reordered view:
//   - waiting requests by class (SeqView::priority, lower = more urgent; with aging a request
//     moves up one class per aging_s it has waited), then within a class preempted-with-output
//     first, then by arrival; requests that can never fit the pool go last so they block no one;
//   - running requests by class, admission order within a class, so the decode that runs out
//     of blocks preempts the newest request of the least urgent class first.
// When the most urgent waiting request is held back by memory or max_batch, running requests
// of strictly less urgent classes are preempted (least urgent, newest first) until it fits:
// vLLM's priority policy (scheduling_policy = "priority"), after Orca/FastServe-style classes.
#pragma once
#include <vector>

#include "inferlab/plugin/scheduler.h"
#include "plugins/common/scheduling/continuous_scheduler.h"

namespace inferlab::plugins {

class PriorityScheduler : public Scheduler {
 public:
  // max_tokens, max_batch, chunked_prefill: as ContinuousScheduler. aging_s >= 0 (0 = strict
  // classes forever). preempt_lower: preempt less urgent running requests for an urgent one.
  PriorityScheduler(int max_tokens, int max_batch, bool chunked_prefill, double aging_s, bool preempt_lower);

  ScheduleDecision schedule(const SchedulerInput& input) override;

  // The class a waiting request is ranked in at now_s: priority, lowered by one per aging_s
  // waited (when aging_s > 0).
  int effective_class(const SeqView& s, double now_s) const;
  // Indices into input.waiting in the order they are offered for admission.
  std::vector<int> admission_order(const SchedulerInput& input) const;

 private:
  ContinuousScheduler step_;
  int max_batch_;
  double aging_s_;
  bool preempt_lower_;
};

}  // namespace inferlab::plugins
