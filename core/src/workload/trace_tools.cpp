#include "inferlab/workload/trace_tools.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <unordered_set>

#include "inferlab/results/metrics.h"

namespace inferlab {

namespace {

void sort_by_arrival(std::vector<TraceRow>& rows) {
  std::stable_sort(rows.begin(), rows.end(),
                   [](const TraceRow& a, const TraceRow& b) { return a.arrival_s < b.arrival_s; });
}

std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

}  // namespace

TraceStats trace_stats(std::vector<TraceRow> rows) {
  sort_by_arrival(rows);
  TraceStats s;
  s.count = static_cast<int>(rows.size());
  if (rows.empty()) return s;
  s.duration_s = rows.back().arrival_s - rows.front().arrival_s;
  s.rate_req_s = s.duration_s > 0 ? (s.count - 1) / s.duration_s : 0.0;
  std::vector<double> gaps, prompt, output;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (i > 0) gaps.push_back(rows[i].arrival_s - rows[i - 1].arrival_s);
    prompt.push_back(rows[i].prompt_tokens);
    output.push_back(rows[i].output_tokens);
  }
  if (gaps.size() >= 2) {
    double mean = 0, var = 0;
    for (double g : gaps) mean += g;
    mean /= static_cast<double>(gaps.size());
    for (double g : gaps) var += (g - mean) * (g - mean);
    var /= static_cast<double>(gaps.size());
    s.gap_cv = mean > 0 ? std::sqrt(var) / mean : 0.0;
  }
  static constexpr double kQs[] = {50, 90, 99};
  const std::vector<double> pp = percentiles(std::move(prompt), kQs), op = percentiles(std::move(output), kQs);
  s.prompt_p50 = pp[0], s.prompt_p90 = pp[1], s.prompt_p99 = pp[2];
  s.output_p50 = op[0], s.output_p90 = op[1], s.output_p99 = op[2];
  std::unordered_set<std::uint64_t> seen;
  long long blocks = 0, hits = 0;
  for (const TraceRow& r : rows) {
    for (std::uint64_t h : r.prefix_blocks) hits += seen.count(h) > 0;
    blocks += static_cast<long long>(r.prefix_blocks.size());
    seen.insert(r.prefix_blocks.begin(), r.prefix_blocks.end());
  }
  if (blocks > 0) s.prefix_share_frac = static_cast<double>(hits) / static_cast<double>(blocks);
  return s;
}

std::string format_trace_stats(const TraceStats& s) {
  std::ostringstream out;
  out << "requests " << s.count << "\n"
      << "duration_s " << num(s.duration_s) << "\n"
      << "rate_req_s " << num(s.rate_req_s) << "\n"
      << "gap_cv " << num(s.gap_cv) << "\n"
      << "prompt_tokens_p50 " << num(s.prompt_p50) << "\nprompt_tokens_p90 " << num(s.prompt_p90)
      << "\nprompt_tokens_p99 " << num(s.prompt_p99) << "\n"
      << "output_tokens_p50 " << num(s.output_p50) << "\noutput_tokens_p90 " << num(s.output_p90)
      << "\noutput_tokens_p99 " << num(s.output_p99) << "\n"
      << "prefix_share_frac " << (s.prefix_share_frac < 0 ? std::string("n/a (no prefix hashes)") : num(s.prefix_share_frac))
      << "\n";
  return out.str();
}

std::string to_canonical_csv(std::vector<TraceRow> rows) {
  sort_by_arrival(rows);
  std::ostringstream out;
  out << "arrival_s,prompt_tokens,output_tokens,priority,slo_class,prefix_blocks\n";
  const double t0 = rows.empty() ? 0.0 : rows.front().arrival_s;
  for (const TraceRow& r : rows) {
    out << num(r.arrival_s - t0) << "," << r.prompt_tokens << "," << r.output_tokens << "," << r.priority << ","
        << (r.slo_class >= 0 ? r.slo_class : r.priority) << ",";
    for (std::size_t i = 0; i < r.prefix_blocks.size(); ++i) out << (i ? " " : "") << r.prefix_blocks[i];
    out << "\n";
  }
  return out.str();
}

}  // namespace inferlab
