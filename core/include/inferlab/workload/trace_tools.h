// What `inferlab trace` reports about a trace, and its conversion to the canonical CSV.
// Pure functions over TraceRows (read with read_trace), so tests check every number.
#pragma once
#include <string>
#include <vector>

#include "inferlab/workload/workload.h"

namespace inferlab {

struct TraceStats {
  int count = 0;
  double duration_s = 0;     // last arrival - first arrival
  double rate_req_s = 0;     // (count - 1) / duration (0 when duration is 0)
  double gap_cv = 0;         // burstiness: coefficient of variation of inter-arrival gaps (1 = Poisson)
  double prompt_p50 = 0, prompt_p90 = 0, prompt_p99 = 0;
  double output_p50 = 0, output_p90 = 0, output_p99 = 0;
  // Prefix-sharing potential: of all prefix blocks in arrival order, the fraction whose hash
  // appeared in an earlier request (what an unbounded prefix cache would hit); -1 when the
  // trace carries no hashes.
  double prefix_share_frac = -1;
};

// Rows in any order (sorted by arrival, stably, first).
TraceStats trace_stats(std::vector<TraceRow> rows);

// "name value" lines, one per field above.
std::string format_trace_stats(const TraceStats& stats);

// The canonical CSV (arrival_s,prompt_tokens,output_tokens,priority,slo_class,prefix_blocks),
// rows sorted by arrival (stably) and shifted so the first arrives at 0; prefix_blocks are
// space-separated hashes. read_trace(..., "canonical") reads it back to the same rows.
std::string to_canonical_csv(std::vector<TraceRow> rows);

}  // namespace inferlab
