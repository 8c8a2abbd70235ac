// Requests on a timeline: synthetic arrivals and lengths, or a trace file converted to the
// canonical form (arrival_s, prompt_tokens, output_tokens[, prefix_blocks]).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace inferlab {

struct Request {
  int id = 0;
  double arrival_s = 0;
  std::vector<int> prompt;       // token ids
  int max_output = 0;            // tokens to generate (exactly, unless stop_at_eos)
  int priority = 0;              // lower = more urgent
  int slo_class = 0;             // index into the per-class SLOs ([slo] class_*); = priority unless given
  std::vector<std::uint64_t> prefix_blocks;  // trace prefix-block hashes, when given
};

// A length distribution: "fixed" (value), "uniform" [min, max], "lognormal" (mean, sigma of the
// underlying normal chosen so the distribution's mean is `mean`; clipped to [min, max]),
// or "trace" (resampled from WorkloadSpec::lengths_file, e.g. ShareGPT statistics; when both
// prompt_len and output_len are "trace", the pair comes from one row).
struct LengthSpec {
  std::string dist = "fixed";
  int value = 64;
  int min = 1;
  int max = 1 << 20;
  double mean = 64;
  double sigma = 0.5;
};

struct WorkloadSpec {
  // Trace input (when trace is non-empty).
  std::string trace;            // path, already resolved against the experiment's folder
  // auto (detected from the header) | canonical | azure | mooncake | vidur | burstgpt
  std::string format = "auto";
  // BurstGPT row filters (empty = every row): the Model and Log Type columns must equal these.
  std::string trace_model;
  std::string trace_log_type;
  // Synthetic input.
  int num_requests = 16;
  std::string arrival = "all_at_once";  // all_at_once | poisson | gamma
  double rate = 1.0;            // requests per second (poisson, gamma)
  // Coefficient of variation of the gamma gaps: shape k = 1 / burstiness^2, scale = 1 / (rate k),
  // so the mean gap stays 1 / rate; 1 = Poisson, > 1 burstier, < 1 more regular.
  double burstiness = 1.0;
  LengthSpec prompt_len;
  LengthSpec output_len;
  // CSV with header columns num_prefill_tokens,num_decode_tokens (others ignored), used by
  // LengthSpec dist = "trace"; resolved like `trace`.
  std::string lengths_file;
  // Applied to both.
  int limit = 0;                // keep the first N requests (0 = all)
  double time_scale = 1.0;      // multiply arrival times (0.01 = 100x faster)
  int max_prompt = 0;           // clip prompt lengths (0 = no clip)
  int max_output = 0;           // clip output lengths (0 = no clip)
  std::uint64_t seed = 0;
  // Prompt tokens per trace prefix block: requests whose prefix_blocks share a hash share the
  // same prompt tokens over that block (Mooncake hashes 512-token blocks).
  int prefix_block_tokens = 512;
  // Synthetic only: the first `shared_prefix` prompt tokens are the same for every request
  // (a shared system prompt), for prefix-caching studies. 0 = none.
  int shared_prefix = 0;
  // Priority classes drawn per request (seeded) with these weights: class k has priority k and
  // slo_class k (0 most urgent). Empty = the trace's priority (0 for synthetic requests).
  std::vector<double> class_mix;
  // Engine-level per-request limits (EngineOptions; 0 = none): queue timeout, total timeout,
  // output cap.
  double queue_timeout_s = 0;
  double timeout_s = 0;
  int max_new_tokens = 0;
};

// Builds the requests: lengths and arrivals from the spec, prompt ids drawn uniformly from
// [3, vocab_size) with the spec's seed (ids 0..2 are special in Llama vocabularies).
// Arrivals are shifted so the first request arrives at t = 0. Throws Error naming the file
// and line of a malformed trace row.
std::vector<Request> build_workload(const WorkloadSpec& spec, int vocab_size);

// The prompt and output token counts build_workload gives each request, in arrival order,
// without drawing any prompt token (the memory estimate at validate time uses them).
struct RequestLengths {
  int prompt = 0;
  int output = 0;
};
std::vector<RequestLengths> workload_lengths(const WorkloadSpec& spec);

// One row of a trace after conversion.
struct TraceRow {
  double arrival_s = 0;
  int prompt_tokens = 0;
  int output_tokens = 0;
  std::vector<std::uint64_t> prefix_blocks;
  int priority = 0;  // canonical traces' optional `priority` column
  int slo_class = -1;  // canonical traces' optional `slo_class` column (-1: not given = priority)
};
// Rows of a BurstGPT trace to keep (empty = any).
struct TraceFilter {
  std::string model;     // Model column, e.g. "ChatGPT"
  std::string log_type;  // Log Type column, e.g. "Conversation log"
};

// Reads a trace file in file order (build_workload then sorts by arrival, stably: unsorted
// traces are accepted). Formats: canonical (CSV or JSONL; arrival_s as written), azure (2023
// and 2024: TIMESTAMP with any number of fractional digits and an optional Z/+HH:MM offset,
// relative to the first row), mooncake (ms), vidur (Vidur/Splitwise CSV, arrived_at in
// seconds), burstgpt (Timestamp seconds, filtered by `filter`), auto (detected from the first
// line, see detect_trace_format). Throws Error("<path>:<line>: <problem>; expected ...") for an
// unreadable or empty file, an unknown format and every malformed row.
std::vector<TraceRow> read_trace(const std::string& path, const std::string& format, const TraceFilter& filter = {});

// The format of a trace from its first line: a JSON object with input_length → mooncake, any
// other → canonical; CSV headers TIMESTAMP+ContextTokens → azure, arrived_at → vidur,
// "Request tokens" → burstgpt, arrival_s → canonical. A length-only CSV (num_prefill_tokens or
// prompt_tokens without arrivals) and anything else are errors naming path:line and the
// headers allowed.
std::string detect_trace_format(const std::string& path);

// Length pairs for LengthSpec "trace": a CSV whose header holds num_prefill_tokens and
// num_decode_tokens (ShareGPT statistics) or prompt_tokens and output_tokens; arrival_s = 0.
std::vector<TraceRow> read_lengths_file(const std::string& path);

}  // namespace inferlab
