// Earliest deadline first on top of continuous (iteration-level) batching, with optional
// admission control. A request's deadline is arrival + its class's TTFT SLO
// (SeqView::slo_class indexes ttft_slo_ms; classes past the list take its last entry; an
// empty list or a 0 entry = no deadline, ordered after every deadline by arrival). Each step
// is the continuous step with the waiting requests offered earliest deadline first
// (preempted-with-output first, never-fitting last, as in sjf). With reject_late, a request
// still waiting for its first token when its deadline has passed can no longer meet its SLO
// and is rejected (ScheduleDecision::reject) instead of taking capacity from ones that can:
// the admission control of deadline-aware LLM schedulers (e.g. SLOs-Serve, QLM).
#pragma once
#include <string>
#include <vector>

#include "inferlab/plugin/scheduler.h"
#include "plugins/common/scheduling/continuous_scheduler.h"

namespace inferlab::plugins {

class EdfScheduler : public Scheduler {
 public:
  // ttft_slo_s: per class, seconds (>= 0; 0 = no deadline). reject_late: see above.
  EdfScheduler(int max_tokens, int max_batch, bool chunked_prefill, std::vector<double> ttft_slo_s, bool reject_late);

  // "200, 2000" -> {0.2, 2.0}; throws Error naming the parameter and the text otherwise.
  static std::vector<double> parse_slo_list(const std::string& text);

  ScheduleDecision schedule(const SchedulerInput& input) override;

  // arrival_s + the class's TTFT SLO, or +infinity without one.
  double deadline(const SeqView& s) const;

 private:
  ContinuousScheduler step_;
  std::vector<double> ttft_slo_s_;
  bool reject_late_;
};

}  // namespace inferlab::plugins
