// What happened during one run (a timeline of requests and steps) and the metrics computed
// from it. Computation is pure: tests build a timeline by hand and check every number.
#pragma once
#include <array>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "inferlab/device/device.h"

namespace inferlab {

// How a request ended, beyond finish_s (>= 0 when it produced all its tokens): kTruncated
// finished at the engine's max_new_tokens cap, below the output it asked for; kAborted hit a
// queue or total timeout; kRejected was refused by the scheduler's admission control.
enum class RequestStatus { kOk, kTruncated, kAborted, kRejected };
// "ok", "truncated", "aborted", "rejected".
const char* request_status_name(RequestStatus status);

struct RequestTimeline {
  int id = 0;
  double arrival_s = 0;
  double first_token_s = -1;  // -1 if none produced
  double finish_s = -1;
  int prompt_tokens = 0;
  int output_tokens = 0;
  std::vector<double> token_times;  // emission time of every output token (spec steps emit several at once)
  int preemptions = 0;
  int cached_prompt_tokens = 0;     // prompt tokens served from a prefix cache
  std::uint64_t output_hash = 0;    // tokens_hash of the generated token ids (set by the runner)
  int priority = 0;
  int slo_class = 0;
  RequestStatus status = RequestStatus::kOk;
  double first_scheduled_s = -1;    // start of the first step that ran any of it (-1: never)
};

struct StepTimeline {
  double start_s = 0;
  double duration_s = 0;
  int seqs = 0;            // sequences in the batch
  int rows = 0;            // tokens run through the model
  int prefill_tokens = 0;
  int decode_tokens = 0;
  int kv_blocks_reserved = 0;
  int kv_blocks_used = 0;
  long long kv_tokens = 0;  // valid tokens in the cache after the step
  // Reserved slots no token will ever be written to: past each sequence's final length
  // (prompt + max_output - 1), including its last block's tail (internal fragmentation).
  long long kv_slots_internal = 0;
  // Contiguous reservations: free slots in holes too small for the region of the request at
  // the head of the queue (external fragmentation); 0 when nothing waits or the cache is paged.
  long long kv_slots_external = 0;
  int kv_blocks_free = 0;    // allocatable after the step (cached blocks held by no sequence included)
  int kv_blocks_cached = 0;  // prefix-cached blocks held by no sequence (counted in kv_blocks_free)
  int preemptions = 0;       // requests preempted by this step's schedule
  // Seconds of this step per TimeCategory as the device timed them; framework is the rest of
  // duration_s (0 when the timed ops exceed it).
  std::array<double, kTimeCategories> time_s{};
};

struct RunTimeline {
  std::vector<RequestTimeline> requests;
  std::vector<StepTimeline> steps;
  int block_size = 16;
  int kv_blocks_total = 0;
  int kv_blocks_peak = 0;
  int kv_blocks_free_end = 0;  // blocks a reservation could take after the run (= total: none leaked)
  long long spec_proposed = 0;
  long long spec_accepted = 0;
  int preemptions = 0;
  std::uint64_t weights_bytes = 0;
  std::uint64_t kv_bytes_per_token = 0;  // K and V of one token over all layers, scales included
  // (sequence, decode step) pairs: each step adds the number of sequences it decoded, i.e.
  // that emitted tokens after their first (a preempted request's recompute included; a
  // prompt's last chunk is not). 0 = unknown: compute_metrics then counts distinct token
  // emission times.
  long long decode_seq_steps = 0;
  // Real seconds inside steps, and how they split by TimeCategory (framework is the rest, so
  // the categories sum to step_wall_s); timer_overhead_s is the op timer's own measured cost.
  double step_wall_s = 0;
  std::array<double, kTimeCategories> time_s{};
  double timer_overhead_s = 0;
  double draft_s = 0;  // real seconds inside Decoder::propose_batch (a draft model's forward passes)
  // Steps that drafted, and their seconds outside drafting: the target's verify pass over
  // 1 + γ rows per sequence plus the step's bookkeeping (modelled seconds on a simulated device).
  long long spec_steps = 0;
  long long spec_seq_steps = 0;  // (sequence, step) pairs that drafted
  double spec_verify_s = 0;
  // Branching decoders (beam search, n > 1 samples). Per step that runs a branched request:
  // branch_blocks_unshared adds the blocks its live branches would hold each owning a full
  // copy (the sum of their block tables), branch_blocks_held the distinct blocks they hold.
  long long branch_blocks_unshared = 0;
  long long branch_blocks_held = 0;
  long long branch_rows = 0;  // rows run for branches beyond the first, per request and step
  double branch_logprob_sum = 0;  // log-probability of each returned sequence, summed
  long long branch_sequences = 0;  // sequences returned by branching requests
  // The model's forward passes during the run: how many, their host seconds up to the logits
  // download (Model::ForwardStats), and the decode-step graphs captured and replayed
  // ([device] cuda_graphs = true; 0 otherwise).
  long long forwards = 0;
  double forward_host_s = 0;
  long long graph_captures = 0;
  long long graph_replays = 0;
  // Steps whose tokens the device chose from the logits it kept (Decoder::device_choice; only
  // token ids were downloaded), the rest read host logits.
  long long device_choice_steps = 0;
};

struct SloSpec {
  double ttft_ms = 0;  // 0 = no bound
  double tpot_ms = 0;
  double e2e_ms = 0;
  // Per slo_class overrides, indexed by class: an entry > 0 replaces the bound above for that
  // class; classes past the end (and 0 entries) keep it.
  std::vector<double> class_ttft_ms, class_tpot_ms, class_e2e_ms;
};

// Ordered (name, value) pairs with stable names that carry units, e.g. "ttft_ms_p50".
using MetricRow = std::vector<std::pair<std::string, double>>;

// Percentile with linear interpolation between closest ranks (numpy's default); NaN if empty.
double percentile(std::vector<double> values, double q);
// The same for several q at once (ascending or not), in their order: one copy of `values` and
// selections that narrow as q grows, instead of one full copy and selection per q.
std::vector<double> percentiles(std::vector<double> values, std::span<const double> qs);

// TTFT, TPOT, ITL, e2e (mean/p50/p90/p99, ms); throughput (output and total tok/s, req/s) over
// the span from the first arrival to the last finish; goodput (req/s meeting every SLO bound);
// steps; batch_mean; kv_blocks_total; kv_blocks_peak; kv_waste_frac (mean over steps of 1 -
// tokens/(reserved * block_size)); kv_token_share, kv_reserved_share, kv_internal_frag_share,
// kv_external_frag_share (vLLM Fig. 2's breakdown of the KV memory a run occupies — reserved
// slots plus externally fragmented free ones — into slots holding token states, slots reserved
// for tokens still to come, slots never to be written, and unusable holes; each a ratio of
// duration-weighted sums over steps, the four summing to 1, all 0 when nothing was reserved); preemptions; prefix_hit_frac; spec_proposed; spec_accepted;
// spec_accept_frac; spec_tokens_per_step; weights_bytes; kv_bytes_per_token; time_<category>_frac for every
// TimeCategory (summing to 1); step_overhead_frac (1 - linear - attention - norm_rope_act);
// timer_overhead_frac; draft_time_frac (share of step time inside Decoder::propose_batch);
// spec_gamma_mean (drafts per drafting sequence and step), spec_draft_ms (one draft pass: a
// drafting step's draft seconds / spec_gamma_mean), spec_verify_ms (a drafting step's other
// seconds), spec_cost_ratio c (their ratio) and spec_predicted_speedup (Leviathan et al.'s
// Theorem 3.8, E(α, γ) / (γc + 1), with α = spec_accept_frac; all 0 without drafting);
// beam_blocks_saved_frac (1 - branch_blocks_held / branch_blocks_unshared: the KV blocks that
// sharing saves over every beam or sample owning a full copy, 0 without branching);
// beam_logprob_mean (mean log-probability of the returned sequences, 0 without branching);
// step_host_ms_mean (host milliseconds of one forward pass up to its logits download: issuing
// the step; the whole pass on the CPU; 0 without a model), graph_captures and graph_replays
// (decode-step CUDA graphs captured and replayed, 0 without [device] cuda_graphs);
// device_choice_steps (steps whose tokens the device chose, RunTimeline); queue_ms
// (mean/p50/p90/p99: arrival to the first step that ran it);
// requests_aborted; requests_rejected; requests_truncated; slo_attain_frac (requests meeting
// their class's SLO over all requests, aborted and rejected ones failing); fairness_jain
// (Jain's index over finished requests' slowdown = e2e / (finish - first scheduled)).
// When the requests span more than one slo_class, per class k: class<k>_ttft_ms_p50/_p99,
// class<k>_tpot_ms_p50/_p99, class<k>_slo_attain_frac, class<k>_requests (after the fixed names).
MetricRow compute_metrics(const RunTimeline& run, const SloSpec& slo);

// Names compute_metrics emits, in order (for CSV headers even when a variant failed).
std::vector<std::string> metric_names();

// Mean and half-width of the two-sided 95% Student-t confidence interval (0 for n < 2).
std::pair<double, double> mean_ci95(const std::vector<double>& values);

}  // namespace inferlab
