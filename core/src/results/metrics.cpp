// Metrics from a RunTimeline. Pure functions: no clock, no I/O.
//
// Definitions (all latencies in ms, over requests with finish_s >= 0 only):
//   ttft  = first_token_s - arrival_s                       (requests with a first token)
//   tpot  = (finish_s - first_token_s) / (output_tokens - 1)  (requests with >= 2 output tokens)
//   itl   = every gap between consecutive token_times of a request, pooled over requests; tokens
//           emitted together by a speculative step give gaps of 0
//   e2e   = finish_s - arrival_s
//   norm_latency = e2e / output_tokens (Orca's and vLLM's normalised latency; finished requests
//           with at least one output token)
// Each gives _mean, _p50, _p90, _p99; NaN when no request qualifies.
// makespan = last finish_s - first arrival_s (over all requests); the throughputs divide the
// finished requests' output tokens, prompt + output tokens and count by it (0 if it is not > 0).
// goodput_req_s counts finished requests meeting every non-zero SLO bound of their slo_class
// (a request without a TPOT, i.e. one output token, meets any TPOT bound; a truncated request
// counts when it meets them; aborted and rejected requests never do).
// spec_tokens_per_step = output tokens emitted by decode steps / (sequence, decode step) pairs,
// where decode-step tokens are every output token but each request's first (the prefill's), and
// the pairs are run.decode_seq_steps, or when that is 0, each request's distinct token_times
// minus one (one decode step emits all its tokens at one time). 1.0 without speculation;
// 0 when there was no decode step.
#include "inferlab/results/metrics.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "inferlab/error.h"

namespace inferlab {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double mean_of(const std::vector<double>& v) {
  if (v.empty()) return kNaN;
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

void add_latency(MetricRow& row, const std::string& name, std::vector<double> ms) {
  row.emplace_back(name + "_mean", mean_of(ms));
  static constexpr double kQs[] = {50, 90, 99};
  const std::vector<double> p = percentiles(std::move(ms), kQs);
  row.emplace_back(name + "_p50", p[0]);
  row.emplace_back(name + "_p90", p[1]);
  row.emplace_back(name + "_p99", p[2]);
}

// Two-sided 95% critical values of Student's t, df = 1..30.
constexpr double kT95[30] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                             2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
                             2.080,  2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};

// Beyond the table, interpolate linearly in 1/df between df = 30, 40, 60, 120 and infinity
// (t is nearly linear in 1/df there; error < 0.001).
double t95(long long df) {
  if (df <= 30) return kT95[df - 1];
  static constexpr double kDf[] = {30, 40, 60, 120};
  static constexpr double kT[] = {2.042, 2.021, 2.000, 1.980};
  const double x = 1.0 / static_cast<double>(df);
  for (int i = 0; i < 3; ++i) {
    if (df <= kDf[i + 1]) {
      const double x0 = 1.0 / kDf[i], x1 = 1.0 / kDf[i + 1];
      return kT[i] + (x - x0) / (x1 - x0) * (kT[i + 1] - kT[i]);
    }
  }
  const double x0 = 1.0 / 120.0;
  return 1.980 + (x - x0) / (0.0 - x0) * (1.960 - 1.980);
}

// The bound for a class: its override when > 0, else the base.
double bound(double base, const std::vector<double>& per_class, int cls) {
  if (cls >= 0 && static_cast<std::size_t>(cls) < per_class.size() && per_class[static_cast<std::size_t>(cls)] > 0)
    return per_class[static_cast<std::size_t>(cls)];
  return base;
}

// Whether a finished request meets its class's SLO (a request without a TPOT, i.e. one output
// token, meets any TPOT bound).
bool meets_slo(const RequestTimeline& r, const SloSpec& slo) {
  if (r.finish_s < 0 || r.status == RequestStatus::kAborted || r.status == RequestStatus::kRejected) return false;
  const double ttft_b = bound(slo.ttft_ms, slo.class_ttft_ms, r.slo_class);
  const double tpot_b = bound(slo.tpot_ms, slo.class_tpot_ms, r.slo_class);
  const double e2e_b = bound(slo.e2e_ms, slo.class_e2e_ms, r.slo_class);
  const bool has_first = r.first_token_s >= 0;
  const bool has_tpot = has_first && r.output_tokens >= 2;
  const double ttft_ms = (r.first_token_s - r.arrival_s) * 1e3;
  const double tpot_ms = has_tpot ? (r.finish_s - r.first_token_s) * 1e3 / (r.output_tokens - 1) : 0.0;
  const double e2e_ms = (r.finish_s - r.arrival_s) * 1e3;
  return (ttft_b <= 0 || (has_first && ttft_ms <= ttft_b)) && (tpot_b <= 0 || !has_tpot || tpot_ms <= tpot_b) &&
         (e2e_b <= 0 || e2e_ms <= e2e_b);
}

// Queueing, admission outcomes, SLO attainment, fairness and per-class latencies.
void add_request_metrics(MetricRow& row, const RunTimeline& run, const SloSpec& slo) {
  std::vector<double> queue, slowdown, norm_latency;
  long long aborted = 0, rejected = 0, truncated = 0, attained = 0;
  std::map<int, std::vector<const RequestTimeline*>> classes;
  for (const RequestTimeline& r : run.requests) {
    classes[r.slo_class].push_back(&r);
    aborted += r.status == RequestStatus::kAborted;
    rejected += r.status == RequestStatus::kRejected;
    truncated += r.status == RequestStatus::kTruncated;
    attained += meets_slo(r, slo);
    if (r.first_scheduled_s >= 0) queue.push_back((r.first_scheduled_s - r.arrival_s) * 1e3);
    if (r.finish_s >= 0 && r.first_scheduled_s >= 0 && r.finish_s > r.first_scheduled_s)
      slowdown.push_back((r.finish_s - r.arrival_s) / (r.finish_s - r.first_scheduled_s));
    if (r.finish_s >= 0 && r.output_tokens > 0) norm_latency.push_back((r.finish_s - r.arrival_s) * 1e3 / r.output_tokens);
  }
  add_latency(row, "queue_ms", queue);
  row.emplace_back("requests_aborted", static_cast<double>(aborted));
  row.emplace_back("requests_rejected", static_cast<double>(rejected));
  row.emplace_back("requests_truncated", static_cast<double>(truncated));
  const double n = static_cast<double>(run.requests.size());
  row.emplace_back("slo_attain_frac", n > 0 ? static_cast<double>(attained) / n : kNaN);
  double sum = 0, sq = 0;
  for (double x : slowdown) sum += x, sq += x * x;
  row.emplace_back("fairness_jain", sq > 0 ? sum * sum / (static_cast<double>(slowdown.size()) * sq) : kNaN);
  add_latency(row, "norm_latency_ms", norm_latency);
  if (classes.size() < 2) return;
  for (const auto& [cls, reqs] : classes) {
    std::vector<double> ttft, tpot;
    long long ok = 0;
    for (const RequestTimeline* r : reqs) {
      ok += meets_slo(*r, slo);
      if (r->finish_s < 0 || r->first_token_s < 0) continue;
      ttft.push_back((r->first_token_s - r->arrival_s) * 1e3);
      if (r->output_tokens >= 2) tpot.push_back((r->finish_s - r->first_token_s) * 1e3 / (r->output_tokens - 1));
    }
    const std::string p = "class" + std::to_string(cls) + "_";
    row.emplace_back(p + "ttft_ms_p50", percentile(ttft, 50));
    row.emplace_back(p + "ttft_ms_p99", percentile(ttft, 99));
    row.emplace_back(p + "tpot_ms_p50", percentile(tpot, 50));
    row.emplace_back(p + "tpot_ms_p99", percentile(tpot, 99));
    row.emplace_back(p + "slo_attain_frac", static_cast<double>(ok) / static_cast<double>(reqs.size()));
    row.emplace_back(p + "requests", static_cast<double>(reqs.size()));
  }
}

}  // namespace

const char* request_status_name(RequestStatus status) {
  switch (status) {
    case RequestStatus::kOk: return "ok";
    case RequestStatus::kTruncated: return "truncated";
    case RequestStatus::kAborted: return "aborted";
    case RequestStatus::kRejected: return "rejected";
  }
  return "ok";
}

double percentile(std::vector<double> values, double q) {
  const double qs[] = {q};
  return percentiles(std::move(values), qs)[0];
}

std::vector<double> percentiles(std::vector<double> values, std::span<const double> qs) {
  for (double q : qs)
    check(q >= 0 && q <= 100, [&] { return "percentile q = " + std::to_string(q) + "; expected 0 <= q <= 100"; });
  std::vector<double> out(qs.size(), kNaN);
  if (values.empty()) return out;
  // Selection, not a sort: O(n) per q (a 100k-request simulation has ~10M ITL values). Taken in
  // ascending rank, each selection searches only right of the previous one: everything left of
  // a selected rank is <= it, so it stays where it is.
  std::vector<std::size_t> order(qs.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return qs[a] < qs[b]; });
  std::size_t from = 0;
  for (std::size_t i : order) {
    const double h = (static_cast<double>(values.size()) - 1.0) * qs[i] / 100.0;
    const std::size_t lo = std::min(static_cast<std::size_t>(std::floor(h)), values.size() - 1);
    const auto at = values.begin() + static_cast<std::ptrdiff_t>(lo);
    std::nth_element(values.begin() + static_cast<std::ptrdiff_t>(from), at, values.end());
    from = lo;
    const double at_lo = values[lo];
    if (lo + 1 >= values.size()) {
      out[i] = at_lo;
      continue;
    }
    const double at_hi = *std::min_element(at + 1, values.end());
    out[i] = at_lo + (h - static_cast<double>(lo)) * (at_hi - at_lo);
  }
  return out;
}

std::vector<std::string> metric_names() {
  std::vector<std::string> names;
  for (const char* m : {"ttft_ms", "tpot_ms", "itl_ms", "e2e_ms"})
    for (const char* s : {"_mean", "_p50", "_p90", "_p99"}) names.push_back(std::string(m) + s);
  for (const char* n :
       {"throughput_out_tok_s", "throughput_total_tok_s", "throughput_req_s", "goodput_req_s", "requests",
        "requests_unfinished", "steps", "batch_mean", "tokens_per_step_mean", "kv_blocks_total", "kv_blocks_peak",
        "kv_waste_frac", "kv_token_share", "kv_reserved_share", "kv_internal_frag_share", "kv_external_frag_share",
        "preemptions", "prefix_hit_frac", "spec_proposed", "spec_accepted", "spec_accept_frac",
        "spec_tokens_per_step", "weights_bytes", "kv_bytes_per_token"})
    names.emplace_back(n);
  for (int c = 0; c < kTimeCategories; ++c)
    names.push_back(std::string("time_") + time_category_name(static_cast<TimeCategory>(c)) + "_frac");
  names.emplace_back("step_overhead_frac");
  names.emplace_back("timer_overhead_frac");
  names.emplace_back("draft_time_frac");
  for (const char* n : {"spec_gamma_mean", "spec_draft_ms", "spec_verify_ms", "spec_cost_ratio", "spec_predicted_speedup"})
    names.emplace_back(n);
  names.emplace_back("beam_blocks_saved_frac");
  names.emplace_back("beam_logprob_mean");
  for (const char* n : {"step_host_ms_mean", "graph_captures", "graph_replays", "device_choice_steps"})
    names.emplace_back(n);
  for (const char* s : {"_mean", "_p50", "_p90", "_p99"}) names.push_back(std::string("queue_ms") + s);
  for (const char* n : {"requests_aborted", "requests_rejected", "requests_truncated", "slo_attain_frac", "fairness_jain"})
    names.emplace_back(n);
  for (const char* s : {"_mean", "_p50", "_p90", "_p99"}) names.push_back(std::string("norm_latency_ms") + s);
  return names;
}

MetricRow compute_metrics(const RunTimeline& run, const SloSpec& slo) {
  std::vector<double> ttft, tpot, itl, e2e;
  double first_arrival = std::numeric_limits<double>::infinity();
  double last_finish = -std::numeric_limits<double>::infinity();
  double out_tokens = 0, total_tokens = 0, good = 0;
  long long finished = 0, unfinished = 0, decode_tokens = 0, distinct_decode_steps = 0;
  long long prompt_sum = 0, cached_sum = 0, request_preemptions = 0;

  for (const RequestTimeline& r : run.requests) {
    first_arrival = std::min(first_arrival, r.arrival_s);
    prompt_sum += r.prompt_tokens;
    cached_sum += r.cached_prompt_tokens;
    request_preemptions += r.preemptions;
    if (r.token_times.size() > 1) {
      decode_tokens += static_cast<long long>(r.token_times.size()) - 1;
      for (std::size_t i = 1; i < r.token_times.size(); ++i)
        if (r.token_times[i] != r.token_times[i - 1]) ++distinct_decode_steps;
    }
    if (r.finish_s < 0) {  // aborted and rejected requests are counted apart
      unfinished += r.status != RequestStatus::kAborted && r.status != RequestStatus::kRejected;
      continue;
    }
    ++finished;
    last_finish = std::max(last_finish, r.finish_s);
    out_tokens += r.output_tokens;
    total_tokens += r.prompt_tokens + r.output_tokens;
    const bool has_first = r.first_token_s >= 0;
    const double ttft_ms = (r.first_token_s - r.arrival_s) * 1e3;
    if (has_first) ttft.push_back(ttft_ms);
    const bool has_tpot = has_first && r.output_tokens >= 2;
    const double tpot_ms = has_tpot ? (r.finish_s - r.first_token_s) * 1e3 / (r.output_tokens - 1) : 0.0;
    if (has_tpot) tpot.push_back(tpot_ms);
    for (std::size_t i = 1; i < r.token_times.size(); ++i)
      itl.push_back((r.token_times[i] - r.token_times[i - 1]) * 1e3);
    const double e2e_ms = (r.finish_s - r.arrival_s) * 1e3;
    e2e.push_back(e2e_ms);
    if (meets_slo(r, slo)) good += 1;
  }

  MetricRow row;
  add_latency(row, "ttft_ms", ttft);
  add_latency(row, "tpot_ms", tpot);
  add_latency(row, "itl_ms", std::move(itl));
  add_latency(row, "e2e_ms", e2e);

  const double makespan = finished > 0 ? last_finish - first_arrival : 0.0;
  auto per_s = [&](double x) { return makespan > 0 ? x / makespan : 0.0; };
  row.emplace_back("throughput_out_tok_s", per_s(out_tokens));
  row.emplace_back("throughput_total_tok_s", per_s(total_tokens));
  row.emplace_back("throughput_req_s", per_s(static_cast<double>(finished)));
  row.emplace_back("goodput_req_s", per_s(good));
  row.emplace_back("requests", static_cast<double>(finished));
  row.emplace_back("requests_unfinished", static_cast<double>(unfinished));

  double seqs = 0, rows_sum = 0, waste = 0;
  int waste_steps = 0, peak_reserved = 0;
  // Duration-weighted slot sums of the memory breakdown: token states, reserved (all), never
  // written (internal), unusable holes (external).
  double w_tokens = 0, w_reserved = 0, w_internal = 0, w_external = 0;
  for (const StepTimeline& s : run.steps) {
    seqs += s.seqs;
    rows_sum += s.rows;
    const double reserved_slots = static_cast<double>(s.kv_blocks_reserved) * run.block_size;
    w_tokens += s.duration_s * static_cast<double>(s.kv_tokens);
    w_reserved += s.duration_s * reserved_slots;
    w_internal += s.duration_s * static_cast<double>(s.kv_slots_internal);
    w_external += s.duration_s * static_cast<double>(s.kv_slots_external);
    peak_reserved = std::max(peak_reserved, s.kv_blocks_reserved);
    if (s.kv_blocks_reserved > 0) {
      const double capacity = static_cast<double>(s.kv_blocks_reserved) * run.block_size;
      waste += 1.0 - static_cast<double>(s.kv_tokens) / capacity;
      ++waste_steps;
    }
  }
  const double n_steps = static_cast<double>(run.steps.size());
  row.emplace_back("steps", n_steps);
  row.emplace_back("batch_mean", n_steps > 0 ? seqs / n_steps : 0.0);
  row.emplace_back("tokens_per_step_mean", n_steps > 0 ? rows_sum / n_steps : 0.0);
  row.emplace_back("kv_blocks_total", static_cast<double>(run.kv_blocks_total));
  // The engine's own peak; the steps' reservations stand in when it was not recorded.
  row.emplace_back("kv_blocks_peak", static_cast<double>(run.kv_blocks_peak > 0 ? run.kv_blocks_peak : peak_reserved));
  row.emplace_back("kv_waste_frac", waste_steps > 0 ? waste / waste_steps : 0.0);
  const double occupied = w_reserved + w_external;
  auto share = [&](double x) { return occupied > 0 ? x / occupied : 0.0; };
  row.emplace_back("kv_token_share", share(w_tokens));
  row.emplace_back("kv_reserved_share", share(w_reserved - w_tokens - w_internal));
  row.emplace_back("kv_internal_frag_share", share(w_internal));
  row.emplace_back("kv_external_frag_share", share(w_external));
  // Run total and per-request counts should agree; take the larger if only one was filled in.
  row.emplace_back("preemptions", static_cast<double>(std::max<long long>(run.preemptions, request_preemptions)));
  row.emplace_back("prefix_hit_frac",
                   prompt_sum > 0 ? static_cast<double>(cached_sum) / static_cast<double>(prompt_sum) : 0.0);
  row.emplace_back("spec_proposed", static_cast<double>(run.spec_proposed));
  row.emplace_back("spec_accepted", static_cast<double>(run.spec_accepted));
  row.emplace_back("spec_accept_frac", run.spec_proposed > 0 ? static_cast<double>(run.spec_accepted) /
                                                                   static_cast<double>(run.spec_proposed)
                                                             : 0.0);
  const long long seq_steps = run.decode_seq_steps > 0 ? run.decode_seq_steps : distinct_decode_steps;
  row.emplace_back("spec_tokens_per_step",
                   seq_steps > 0 ? static_cast<double>(decode_tokens) / static_cast<double>(seq_steps) : 0.0);
  row.emplace_back("weights_bytes", static_cast<double>(run.weights_bytes));
  row.emplace_back("kv_bytes_per_token", static_cast<double>(run.kv_bytes_per_token));
  // Where the steps' time went (fractions of the real time inside steps; all 0 when the run
  // recorded none). step_overhead_frac is what is not the model's device ops.
  const double wall = run.step_wall_s;
  auto frac = [&](double s) { return wall > 0 ? s / wall : 0.0; };
  double model_ops = 0;
  for (int c = 0; c < kTimeCategories; ++c) {
    const auto cat = static_cast<TimeCategory>(c);
    const double t = run.time_s[static_cast<std::size_t>(c)];
    row.emplace_back(std::string("time_") + time_category_name(cat) + "_frac", frac(t));
    if (cat == TimeCategory::kLinear || cat == TimeCategory::kAttention || cat == TimeCategory::kNormRopeAct)
      model_ops += t;
  }
  row.emplace_back("step_overhead_frac", wall > 0 ? 1.0 - frac(model_ops) : 0.0);
  row.emplace_back("timer_overhead_frac", frac(run.timer_overhead_s));
  row.emplace_back("draft_time_frac", frac(run.draft_s));
  // Leviathan et al.'s Theorem 3.8 from what the run measured: γ̄ drafts per drafting
  // (sequence, step), α the accept fraction, c = one draft pass over one verify step (the
  // drafting steps' draft seconds / γ̄ over their other seconds). E(α, γ̄) / (γ̄ c + 1) is the
  // speedup over a baseline whose step costs what a verify step costs; against a one-row
  // baseline the measured speedup is that times (one-row step / verify step).
  const double gamma = run.spec_seq_steps > 0 ? static_cast<double>(run.spec_proposed) /
                                                    static_cast<double>(run.spec_seq_steps)
                                              : 0.0;
  const double verify_s = run.spec_steps > 0 ? run.spec_verify_s / static_cast<double>(run.spec_steps) : 0.0;
  const double draft_pass_s =
      run.spec_steps > 0 && gamma > 0 ? run.draft_s / static_cast<double>(run.spec_steps) / gamma : 0.0;
  const double c = verify_s > 0 ? draft_pass_s / verify_s : 0.0;
  const double alpha = run.spec_proposed > 0 ? static_cast<double>(run.spec_accepted) /
                                                   static_cast<double>(run.spec_proposed)
                                             : 0.0;
  const double expected = alpha < 1.0 ? (1.0 - std::pow(alpha, gamma + 1.0)) / (1.0 - alpha) : gamma + 1.0;
  row.emplace_back("spec_gamma_mean", gamma);
  row.emplace_back("spec_draft_ms", draft_pass_s * 1e3);
  row.emplace_back("spec_verify_ms", verify_s * 1e3);
  row.emplace_back("spec_cost_ratio", c);
  row.emplace_back("spec_predicted_speedup", gamma > 0 ? expected / (gamma * c + 1.0) : 0.0);
  row.emplace_back("beam_blocks_saved_frac",
                   run.branch_blocks_unshared > 0 ? 1.0 - static_cast<double>(run.branch_blocks_held) /
                                                              static_cast<double>(run.branch_blocks_unshared)
                                                  : 0.0);
  row.emplace_back("beam_logprob_mean", run.branch_sequences > 0 ? run.branch_logprob_sum /
                                                                       static_cast<double>(run.branch_sequences)
                                                                 : 0.0);
  row.emplace_back("step_host_ms_mean",
                   run.forwards > 0 ? run.forward_host_s / static_cast<double>(run.forwards) * 1e3 : 0.0);
  row.emplace_back("graph_captures", static_cast<double>(run.graph_captures));
  row.emplace_back("graph_replays", static_cast<double>(run.graph_replays));
  row.emplace_back("device_choice_steps", static_cast<double>(run.device_choice_steps));
  add_request_metrics(row, run, slo);
  return row;
}

std::pair<double, double> mean_ci95(const std::vector<double>& values) {
  const double m = mean_of(values);
  if (values.size() < 2) return {m, 0.0};
  double ss = 0;
  for (double v : values) ss += (v - m) * (v - m);
  const double n = static_cast<double>(values.size());
  const double sd = std::sqrt(ss / (n - 1.0));
  return {m, t95(static_cast<long long>(values.size()) - 1) * sd / std::sqrt(n)};
}

}  // namespace inferlab
