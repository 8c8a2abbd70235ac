// build_workload: synthetic arrivals and lengths, or a trace, turned into seeded Requests.
//
// Randomness comes from independent streams derived from spec.seed, so changing the length
// distribution leaves the arrival times alone and vice versa:
//   arrivals  Rng(mix_seed(seed, kArrivalStream))
//   lengths   Rng(mix_seed(seed, kLengthStream))
//   prompts   per request Rng(mix_seed(mix_seed(seed, kPromptStream), index in arrival order)),
//             per prefix block Rng(mix_seed(mix_seed(seed, kBlockStream), block hash)), so two
//             requests that share a trace prefix block also share those prompt tokens.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <sstream>
#include <string>
#include <vector>

#include "inferlab/error.h"
#include "inferlab/experiment/input_checks.h"
#include "inferlab/support/log.h"
#include "inferlab/support/rng.h"
#include "inferlab/workload/workload.h"

namespace inferlab {
namespace {

constexpr std::uint64_t kArrivalStream = 1;
constexpr std::uint64_t kLengthStream = 2;
constexpr std::uint64_t kPromptStream = 3;
constexpr std::uint64_t kBlockStream = 4;
constexpr std::uint64_t kClassStream = 6;
constexpr std::uint64_t kSharedPrefixStream = 5;

// Exponential with mean 1: u in (0, 1] keeps the log finite.
std::string number_text(double x) {
  std::ostringstream os;
  os << x;
  return os.str();
}

double exponential(Rng& rng) { return -std::log(1.0 - rng.uniform()); }

// Gamma(shape k, scale 1). Marsaglia & Tsang (2000) for k >= 1; for k < 1 draw Gamma(k + 1) and
// multiply by U^(1/k), which has the Gamma(k) law.
double gamma_unit(Rng& rng, double k) {
  if (k < 1.0) {
    const double u = 1.0 - rng.uniform();  // (0, 1]
    return gamma_unit(rng, k + 1.0) * std::pow(u, 1.0 / k);
  }
  const double d = k - 1.0 / 3.0;
  const double c = 1.0 / std::sqrt(9.0 * d);
  while (true) {
    double x, v;
    do {
      x = rng.normal();
      v = 1.0 + c * x;
    } while (v <= 0.0);
    v = v * v * v;
    const double u = 1.0 - rng.uniform();
    if (u < 1.0 - 0.0331 * x * x * x * x) return d * v;
    if (std::log(u) < 0.5 * x * x + d * (1.0 - v + std::log(v))) return d * v;
  }
}

std::vector<double> synthetic_arrivals(const WorkloadSpec& spec) {
  const int n = spec.num_requests;
  std::vector<double> t(static_cast<std::size_t>(n), 0.0);
  if (spec.arrival == "all_at_once") return t;
  if (spec.arrival != "poisson" && spec.arrival != "gamma")
    throw Error("workload.arrival = '" + spec.arrival + "'; expected all_at_once, poisson or gamma");
  check(spec.rate >= kMinRate && spec.rate <= kMaxRate, [&] {
    return "workload.rate = " + number_text(spec.rate) + "; expected " + number_text(kMinRate) + " .. " +
           number_text(kMaxRate) + " requests per second";
  });
  Rng rng(mix_seed(spec.seed, kArrivalStream));
  double now = 0;
  if (spec.arrival == "poisson") {
    for (double& x : t) x = (now += exponential(rng) / spec.rate);
    return t;
  }
  // Outside this range the gamma shape 1/burstiness^2 degenerates (0 at 1e300: NaN arrivals).
  check(spec.burstiness >= kMinBurstiness && spec.burstiness <= kMaxBurstiness, [&] {
    return "workload.burstiness = " + number_text(spec.burstiness) + "; expected a coefficient of variation " +
           number_text(kMinBurstiness) + " .. " + number_text(kMaxBurstiness) + " (1 = Poisson)";
  });
  const double k = 1.0 / (spec.burstiness * spec.burstiness);
  const double scale = 1.0 / (spec.rate * k);
  for (double& x : t) x = (now += gamma_unit(rng, k) * scale);
  return t;
}

void check_length_spec(const LengthSpec& l, const std::string& name) {
  const std::string where = "workload." + name;
  if (l.dist == "fixed") {
    check(l.value >= 1, where + ".value = " + std::to_string(l.value) + "; expected >= 1");
  } else if (l.dist == "uniform" || l.dist == "lognormal") {
    check(l.min >= 1 && l.min <= l.max, where + " min/max = " + std::to_string(l.min) + "/" +
                                            std::to_string(l.max) + "; expected 1 <= min <= max");
    if (l.dist == "lognormal")
      check(l.mean > 0 && l.sigma >= 0 && std::isfinite(l.mean) && std::isfinite(l.sigma),
            where + " lognormal mean/sigma = " + std::to_string(l.mean) + "/" + std::to_string(l.sigma) +
                "; expected mean > 0 and sigma >= 0");
  } else if (l.dist != "trace") {
    throw Error(where + ".dist = '" + l.dist + "'; expected fixed, uniform, lognormal or trace");
  }
}

// One length from a parametric distribution (not "trace").
int draw_length(const LengthSpec& l, Rng& rng) {
  if (l.dist == "fixed") return l.value;
  if (l.dist == "uniform") return static_cast<int>(rng.uniform_int(l.min, static_cast<std::int64_t>(l.max) + 1));
  // lognormal: E[exp(mu + sigma z)] = exp(mu + sigma^2 / 2) = mean.
  const double mu = std::log(l.mean) - 0.5 * l.sigma * l.sigma;
  const double x = std::exp(mu + l.sigma * rng.normal());
  const double clipped = std::clamp(std::round(x), static_cast<double>(l.min), static_cast<double>(l.max));
  return static_cast<int>(clipped);
}

std::vector<TraceRow> synthetic_rows(const WorkloadSpec& spec) {
  check(spec.num_requests >= 0,
        "workload.num_requests = " + std::to_string(spec.num_requests) + "; expected >= 0");
  check_length_spec(spec.prompt_len, "prompt_len");
  check_length_spec(spec.output_len, "output_len");
  const bool from_file = spec.prompt_len.dist == "trace" || spec.output_len.dist == "trace";
  std::vector<TraceRow> pairs;
  if (from_file) {
    check(!spec.lengths_file.empty(),
          "workload: length dist 'trace' needs workload.lengths_file; expected a CSV path");
    pairs = read_lengths_file(spec.lengths_file);
  }
  const std::vector<double> arrivals = synthetic_arrivals(spec);
  Rng rng(mix_seed(spec.seed, kLengthStream));
  std::vector<TraceRow> rows(arrivals.size());
  for (std::size_t i = 0; i < rows.size(); ++i) {
    TraceRow& r = rows[i];
    r.arrival_s = arrivals[i];
    // One row per request, shared by prompt and output when both are "trace".
    const TraceRow* pair =
        from_file ? &pairs[static_cast<std::size_t>(rng.uniform_int(0, static_cast<std::int64_t>(pairs.size())))]
                  : nullptr;
    r.prompt_tokens = spec.prompt_len.dist == "trace" ? pair->prompt_tokens : draw_length(spec.prompt_len, rng);
    r.output_tokens = spec.output_len.dist == "trace" ? pair->output_tokens : draw_length(spec.output_len, rng);
  }
  return rows;
}

// Prompt ids in [3, vocab): positions covered by a prefix block come from that block's hash,
// the rest from the request's own stream.
std::vector<int> make_prompt(const WorkloadSpec& spec, const TraceRow& row, int length, std::size_t index,
                             int vocab_size) {
  std::vector<int> prompt(static_cast<std::size_t>(length));
  const int block = spec.prefix_block_tokens;
  const std::uint64_t block_seed = mix_seed(spec.seed, kBlockStream);
  std::size_t pos = 0;
  for (std::size_t b = 0; b < row.prefix_blocks.size() && pos < prompt.size(); ++b) {
    Rng rng(mix_seed(block_seed, row.prefix_blocks[b]));
    for (int j = 0; j < block && pos < prompt.size(); ++j, ++pos)
      prompt[pos] = static_cast<int>(rng.uniform_int(3, vocab_size));
  }
  if (spec.trace.empty() && spec.shared_prefix > 0) {
    Rng shared(mix_seed(spec.seed, kSharedPrefixStream));
    for (; pos < prompt.size() && pos < static_cast<std::size_t>(spec.shared_prefix); ++pos)
      prompt[pos] = static_cast<int>(shared.uniform_int(3, vocab_size));
  }
  Rng rng(mix_seed(mix_seed(spec.seed, kPromptStream), index));
  for (; pos < prompt.size(); ++pos) prompt[pos] = static_cast<int>(rng.uniform_int(3, vocab_size));
  return prompt;
}

int clip_length(int n, int max) {
  if (max > 0) n = std::min(n, max);
  return std::max(n, 1);
}

// Rows that are run other than the file says get a warning naming what was changed: such rows
// occur in published traces (BurstGPT's failed requests have 0 response tokens; merged logs are
// not always in time order), so they are not errors.
void warn_adjusted_rows(const std::string& source, const std::vector<TraceRow>& rows, bool check_order) {
  const std::string unit = check_order ? "data row " : "drawn request ";
  std::size_t zero_p = 0, zero_o = 0, unsorted = 0, first_p = 0, first_o = 0, first_u = 0;
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rows[i].prompt_tokens == 0 && zero_p++ == 0) first_p = i + 1;
    if (rows[i].output_tokens == 0 && zero_o++ == 0) first_o = i + 1;
    if (check_order && i > 0 && rows[i].arrival_s < rows[i - 1].arrival_s && unsorted++ == 0) first_u = i + 1;
  }
  if (zero_p)
    log::warn(source + ": " + std::to_string(zero_p) + " row(s) with 0 prompt tokens (first: " + unit +
              std::to_string(first_p) + ") are run with 1 prompt token; a request needs a token to start from");
  if (zero_o)
    log::warn(source + ": " + std::to_string(zero_o) + " row(s) with 0 output tokens (first: " + unit +
              std::to_string(first_o) + ") are run with 1 output token; every request generates at least one");
  if (unsorted)
    log::warn(source + ": arrival times are not sorted (first earlier than its predecessor: data row " +
              std::to_string(first_u) + "); requests are sorted by arrival (ties keep file order) and numbered in "
              "that order");
}

void check_workload_spec(const WorkloadSpec& spec) {
  check(spec.limit >= 0, "workload.limit = " + std::to_string(spec.limit) + "; expected >= 0 (0 = all)");
  check(spec.time_scale >= 0 && std::isfinite(spec.time_scale),
        "workload.time_scale = " + std::to_string(spec.time_scale) + "; expected a number >= 0");
  check(spec.max_prompt >= 0 && spec.max_output >= 0,
        "workload.max_prompt/max_output = " + std::to_string(spec.max_prompt) + "/" +
            std::to_string(spec.max_output) + "; expected >= 0 (0 = no clip)");
  check(spec.prefix_block_tokens >= 1,
        "workload.prefix_block_tokens = " + std::to_string(spec.prefix_block_tokens) + "; expected >= 1");
}

std::vector<TraceRow> workload_rows(const WorkloadSpec& spec) {
  return spec.trace.empty() ? synthetic_rows(spec) : read_trace(spec.trace, spec.format, {spec.trace_model, spec.trace_log_type});
}

// Indices of the rows that become requests, in arrival order (ties keep file order), cut to
// spec.limit.
std::vector<std::size_t> arrival_order(const WorkloadSpec& spec, const std::vector<TraceRow>& rows) {
  std::vector<std::size_t> order(rows.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return rows[a].arrival_s < rows[b].arrival_s; });
  if (spec.limit > 0 && order.size() > static_cast<std::size_t>(spec.limit))
    order.resize(static_cast<std::size_t>(spec.limit));
  return order;
}

}  // namespace

std::vector<RequestLengths> workload_lengths(const WorkloadSpec& spec) {
  check_workload_spec(spec);
  const std::vector<TraceRow> rows = workload_rows(spec);
  std::vector<RequestLengths> out;
  for (std::size_t i : arrival_order(spec, rows))
    out.push_back({clip_length(rows[i].prompt_tokens, spec.max_prompt), clip_length(rows[i].output_tokens, spec.max_output)});
  return out;
}

std::vector<Request> build_workload(const WorkloadSpec& spec, int vocab_size) {
  check(vocab_size > 3, "workload: vocab_size = " + std::to_string(vocab_size) +
                            "; expected > 3 (ids 0..2 are special)");
  check_workload_spec(spec);
  std::vector<TraceRow> rows = workload_rows(spec);
  if (!spec.trace.empty() || !spec.lengths_file.empty())
    warn_adjusted_rows(spec.trace.empty() ? spec.lengths_file : spec.trace, rows, !spec.trace.empty());
  const std::vector<std::size_t> order = arrival_order(spec, rows);

  double mix_total = 0;
  for (double w : spec.class_mix) {
    check(w >= 0 && std::isfinite(w), "workload.class_mix weights must be >= 0");
    mix_total += w;
  }
  check(spec.class_mix.empty() || mix_total > 0, "workload.class_mix needs a weight > 0");
  Rng class_rng(mix_seed(spec.seed, kClassStream));
  std::vector<Request> out;
  out.reserve(order.size());
  const double t0 = order.empty() ? 0.0 : rows[order.front()].arrival_s;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const TraceRow& row = rows[order[i]];
    Request r;
    r.id = static_cast<int>(i);
    r.arrival_s = (row.arrival_s - t0) * spec.time_scale;
    r.max_output = clip_length(row.output_tokens, spec.max_output);
    r.priority = row.priority;
    r.slo_class = row.slo_class >= 0 ? row.slo_class : row.priority;
    if (!spec.class_mix.empty()) {  // class k with probability class_mix[k] / total
      double u = class_rng.uniform() * mix_total;
      int k = 0;
      while (k + 1 < static_cast<int>(spec.class_mix.size()) && u >= spec.class_mix[static_cast<std::size_t>(k)])
        u -= spec.class_mix[static_cast<std::size_t>(k++)];
      r.priority = r.slo_class = k;
    }
    const int prompt_len = clip_length(row.prompt_tokens, spec.max_prompt);
    r.prompt = make_prompt(spec, row, prompt_len, i, vocab_size);
    // Keep only the blocks that still cover prompt tokens after clipping.
    const std::size_t covered = (static_cast<std::size_t>(prompt_len) + spec.prefix_block_tokens - 1) /
                                static_cast<std::size_t>(spec.prefix_block_tokens);
    r.prefix_blocks.assign(row.prefix_blocks.begin(),
                           row.prefix_blocks.begin() +
                               static_cast<std::ptrdiff_t>(std::min(covered, row.prefix_blocks.size())));
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace inferlab
