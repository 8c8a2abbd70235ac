#include "edf.h"

#include <algorithm>
#include <limits>
#include <numeric>
#include <sstream>
#include <tuple>

#include "inferlab/error.h"

namespace inferlab::plugins {

EdfScheduler::EdfScheduler(int max_tokens, int max_batch, bool chunked_prefill, std::vector<double> ttft_slo_s,
                           bool reject_late)
    : step_(max_tokens, max_batch, chunked_prefill), ttft_slo_s_(std::move(ttft_slo_s)), reject_late_(reject_late) {
  for (double v : ttft_slo_s_) check(v >= 0, "scheduling 'edf': ttft_slo_ms entries must be >= 0");
}

std::vector<double> EdfScheduler::parse_slo_list(const std::string& text) {
  std::vector<double> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) {
    const auto b = item.find_first_not_of(" \t"), e = item.find_last_not_of(" \t");
    if (b == std::string::npos) throw Error("scheduling 'edf': ttft_slo_ms = \"" + text + "\" has an empty entry; "
                                            "expected milliseconds per class, e.g. \"200,2000\"");
    item = item.substr(b, e - b + 1);
    std::size_t used = 0;
    double ms = -1;
    try {
      ms = std::stod(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size() || !(ms >= 0))
      throw Error("scheduling 'edf': ttft_slo_ms entry '" + item + "' is not a number >= 0; expected milliseconds "
                  "per class, e.g. \"200,2000\"");
    out.push_back(ms / 1e3);
  }
  return out;
}

double EdfScheduler::deadline(const SeqView& s) const {
  if (ttft_slo_s_.empty()) return std::numeric_limits<double>::infinity();
  const std::size_t c = std::min<std::size_t>(static_cast<std::size_t>(std::max(s.slo_class, 0)), ttft_slo_s_.size() - 1);
  const double slo = ttft_slo_s_[c];
  return slo > 0 ? s.arrival_s + slo : std::numeric_limits<double>::infinity();
}

ScheduleDecision EdfScheduler::schedule(const SchedulerInput& in) {
  ScheduleDecision d;
  using Rank = std::tuple<int, int, double, double, int>;  // (never fits, fresh, deadline, arrival, position)
  std::vector<std::pair<Rank, int>> ranked;
  for (int i = 0; i < static_cast<int>(in.waiting.size()); ++i) {
    const SeqView& s = in.waiting[static_cast<std::size_t>(i)];
    const double dl = deadline(s);
    if (reject_late_ && s.generated == 0 && in.now_s > dl) {
      d.reject.push_back(s.id);
      continue;
    }
    const bool fresh = s.generated == 0;
    ranked.push_back({{in.never_fits(s), fresh, fresh ? dl : 0.0, fresh ? s.arrival_s : 0.0, i}, i});
  }
  std::sort(ranked.begin(), ranked.end());
  std::vector<SeqView> waiting;
  for (const auto& r : ranked) waiting.push_back(in.waiting[static_cast<std::size_t>(r.second)]);
  SchedulerInput view = in;
  view.waiting = waiting;
  ScheduleDecision step = step_.schedule(view);
  step.reject = std::move(d.reject);
  return step;
}

}  // namespace inferlab::plugins
