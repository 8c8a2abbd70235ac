#include "priority.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <tuple>

#include "inferlab/error.h"

namespace inferlab::plugins {

namespace {

bool scheduled(const ScheduleDecision& d, int id) {
  return std::any_of(d.scheduled.begin(), d.scheduled.end(), [&](const ScheduledSeq& s) { return s.id == id; });
}

}  // namespace

PriorityScheduler::PriorityScheduler(int max_tokens, int max_batch, bool chunked_prefill, double aging_s,
                                     bool preempt_lower)
    : step_(max_tokens, max_batch, chunked_prefill), max_batch_(max_batch), aging_s_(aging_s),
      preempt_lower_(preempt_lower) {
  check(aging_s >= 0, "scheduling 'priority': aging_s must be >= 0 (0 = no aging), got " + std::to_string(aging_s));
}

int PriorityScheduler::effective_class(const SeqView& s, double now_s) const {
  if (aging_s_ <= 0 || now_s <= s.arrival_s) return s.priority;
  return s.priority - static_cast<int>(std::floor((now_s - s.arrival_s) / aging_s_));
}

std::vector<int> PriorityScheduler::admission_order(const SchedulerInput& in) const {
  using Rank = std::tuple<int, int, int, double, int>;  // (never fits, class, fresh, arrival, position)
  const int n = static_cast<int>(in.waiting.size());
  std::vector<Rank> ranks(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    const SeqView& s = in.waiting[static_cast<std::size_t>(i)];
    const bool fresh = s.generated == 0;  // preempted ones with output keep the engine's order
    ranks[static_cast<std::size_t>(i)] = {in.never_fits(s) ? 1 : 0, effective_class(s, in.now_s), fresh,
                                          fresh ? s.arrival_s : 0.0, i};
  }
  std::vector<int> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(),
            [&](int a, int b) { return ranks[static_cast<std::size_t>(a)] < ranks[static_cast<std::size_t>(b)]; });
  return order;
}

ScheduleDecision PriorityScheduler::schedule(const SchedulerInput& in) {
  std::vector<SeqView> running(in.running.begin(), in.running.end());
  std::stable_sort(running.begin(), running.end(),
                   [](const SeqView& a, const SeqView& b) { return a.priority < b.priority; });
  std::vector<SeqView> waiting;
  for (int i : admission_order(in)) waiting.push_back(in.waiting[static_cast<std::size_t>(i)]);
  SchedulerInput view = in;
  view.running = running;
  view.waiting = waiting;
  ScheduleDecision d = step_.schedule(view);
  if (!preempt_lower_ || waiting.empty()) return d;

  // The head of the order was not admitted: if memory or max_batch held it back and less urgent
  // requests run, preempt them (least urgent, newest first) until its prompt's blocks and a
  // batch slot are free, then redo the step without them.
  const SeqView& head = waiting.front();
  if (scheduled(d, head.id) || in.never_fits(head)) return d;
  const int need = in.blocks_to_grow(head, head.pending());
  const bool memory_short = need > in.free_blocks;
  const bool batch_full = static_cast<int>(running.size()) >= max_batch_;
  if (!memory_short && !batch_full) return d;
  int free_blocks = in.free_blocks;
  std::size_t keep = running.size();
  std::vector<int> victims;
  while (keep > 0 && running[keep - 1].priority > head.priority &&
         (free_blocks < need || static_cast<int>(keep) >= max_batch_)) {
    --keep;
    free_blocks += running[keep].blocks_freed();
    victims.push_back(running[keep].id);
  }
  if (victims.empty() || free_blocks < need || static_cast<int>(keep) >= max_batch_) return d;
  running.resize(keep);
  view.running = running;
  view.free_blocks = free_blocks;
  ScheduleDecision redo = step_.schedule(view);
  redo.preempt.insert(redo.preempt.begin(), victims.begin(), victims.end());
  return redo;
}

}  // namespace inferlab::plugins
