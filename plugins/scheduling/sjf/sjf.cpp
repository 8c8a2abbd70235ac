#include "sjf.h"

#include <algorithm>
#include <numeric>
#include <tuple>

#include "inferlab/error.h"

namespace inferlab::plugins {

SjfScheduler::Key SjfScheduler::parse_key(const std::string& text) {
  if (text == "total") return Key::kTotal;
  if (text == "prompt") return Key::kPrompt;
  if (text == "output") return Key::kOutput;
  throw Error("scheduling 'sjf': key = \"" + text + "\"; allowed: total, prompt, output");
}

SjfScheduler::SjfScheduler(int max_tokens, int max_batch, bool chunked_prefill, Key key,
                           double starvation_s)
    : step_(max_tokens, max_batch, chunked_prefill), key_(key), starvation_s_(starvation_s) {
  check(starvation_s >= 0, "scheduling 'sjf': starvation_s must be >= 0 (0 = no aging), got " +
                               std::to_string(starvation_s));
}

int SjfScheduler::length_of(const SeqView& s) const {
  switch (key_) {
    case Key::kPrompt: return s.prompt_len;
    case Key::kOutput: return s.max_output;
    case Key::kTotal: break;
  }
  return s.prompt_len + s.max_output;
}

std::vector<int> SjfScheduler::admission_order(const SchedulerInput& in) const {
  // (class as documented in the header, then what orders within the class). Positions keep
  // the engine's order where no other order applies.
  using Rank = std::tuple<int, double, double, int>;
  const int n = static_cast<int>(in.waiting.size());
  std::vector<Rank> ranks(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    const SeqView& s = in.waiting[static_cast<std::size_t>(i)];
    Rank& r = ranks[static_cast<std::size_t>(i)];
    if (in.never_fits(s))
      r = {3, i, 0, 0};
    else if (s.generated > 0)
      r = {0, i, 0, 0};
    else if (starvation_s_ > 0 && in.now_s - s.arrival_s > starvation_s_)
      r = {1, s.arrival_s, 0, s.id};
    else
      r = {2, length_of(s), s.arrival_s, s.id};
  }
  std::vector<int> order(static_cast<std::size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return ranks[static_cast<std::size_t>(a)] < ranks[static_cast<std::size_t>(b)];
  });
  return order;
}

ScheduleDecision SjfScheduler::schedule(const SchedulerInput& in) {
  std::vector<SeqView> ordered;
  ordered.reserve(in.waiting.size());
  for (int i : admission_order(in)) ordered.push_back(in.waiting[static_cast<std::size_t>(i)]);
  SchedulerInput reordered = in;
  reordered.waiting = ordered;
  return step_.schedule(reordered);
}

}  // namespace inferlab::plugins
