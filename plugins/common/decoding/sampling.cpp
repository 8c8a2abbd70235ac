// Token selection from one row of logits: greedy, temperature, top-k, top-p.
#include "plugins/common/decoding/sampling.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "inferlab/error.h"
#include "kernels/ref/ops_fused.h"

namespace inferlab {

void add_sampling_param_specs(std::vector<ParamSpec>& specs) {
  specs.push_back({"temperature", ParamType::kFloat, 0.0, 0.0, 100.0, {}, "Sampling temperature (0 = greedy)"});
  specs.push_back({"top_k", ParamType::kInt, std::int64_t{0}, 0.0, 1e9, {}, "Sample among the k most likely (0 = off)"});
  specs.push_back({"top_p", ParamType::kFloat, 1.0, 1e-9, 1.0, {}, "Nucleus mass"});
}

SamplingParams sampling_params_from(const Params& params) {
  SamplingParams sp;
  sp.temperature = params.get_float("temperature");
  sp.top_k = static_cast<int>(params.get_int("top_k"));
  sp.top_p = params.get_float("top_p");
  return sp;
}

int argmax(const float* logits, int vocab) {
  check(vocab > 0, "argmax: empty logits");
  // The lowest index of the largest value; NaNs never win (nor does anything after a NaN at
  // index 0, as a strict `>` scan from index 0 would give). Two passes: the maximum, over 16
  // independent lanes the compiler vectorises, then the first index holding it.
  float best = logits[0];
  if (best != best) return 0;
  constexpr int kLanes = 16;
  int i = 1;
  if (vocab >= kLanes) {
    float lanes[kLanes];
    for (float& l : lanes) l = best;
    for (; i + kLanes <= vocab; i += kLanes)
      for (int j = 0; j < kLanes; ++j) lanes[j] = logits[i + j] > lanes[j] ? logits[i + j] : lanes[j];
    for (float l : lanes) best = l > best ? l : best;
  }
  for (; i < vocab; ++i) best = logits[i] > best ? logits[i] : best;
  int at = 0;
  while (!(logits[at] == best)) ++at;
  return at;
}

namespace {

// The truncated, tempered candidates sample_token draws from: scratch[0, n) holds (weight, id)
// — weight = exp((logit - max) / T), unnormalised — ordered by logit descending then id
// ascending where an order is needed (top-p), so the result does not depend on how the sort
// treats ties. Returns n; `mass` is the weights' sum.
std::size_t candidates(const float* logits, int vocab, const SamplingParams& params,
                       std::vector<std::pair<float, int>>& scratch, double& mass) {
  auto before = [](const std::pair<float, int>& a, const std::pair<float, int>& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  };
  scratch.resize(static_cast<std::size_t>(vocab));
  for (int i = 0; i < vocab; ++i) scratch[static_cast<std::size_t>(i)] = {logits[i], i};
  std::size_t n = scratch.size();
  if (params.top_k > 0 && static_cast<std::size_t>(params.top_k) < n) {
    n = static_cast<std::size_t>(params.top_k);
    std::nth_element(scratch.begin(), scratch.begin() + static_cast<std::ptrdiff_t>(n - 1), scratch.end(), before);
  }
  const auto end = scratch.begin() + static_cast<std::ptrdiff_t>(n);
  const bool nucleus = params.top_p < 1.0;
  if (nucleus) std::sort(scratch.begin(), end, before);
  // Softmax of logit / T over the candidates (weights overwrite the logits).
  float max_logit = scratch[0].first;
  for (std::size_t i = 1; i < n; ++i) max_logit = std::max(max_logit, scratch[i].first);
  double total = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const double p = std::exp((static_cast<double>(scratch[i].first) - max_logit) / params.temperature);
    scratch[i].first = static_cast<float>(p);
    total += p;
  }
  mass = total;
  if (nucleus) {  // the smallest prefix (by probability) whose mass reaches top_p
    double cum = 0.0;
    for (std::size_t i = 0; i < n; ++i) {
      cum += scratch[i].first;
      if (cum >= params.top_p * total) {
        n = i + 1;
        break;
      }
    }
    mass = cum;
  }
  return n;
}

void check_params(const SamplingParams& params) {
  check(params.temperature >= 0.0, "sampling: temperature must be >= 0");
  check(params.top_k >= 0, "sampling: top_k must be >= 0");
  check(params.top_p > 0.0 && params.top_p <= 1.0, "sampling: top_p must be in (0, 1]");
}

}  // namespace

int sample_token(const float* logits, int vocab, const SamplingParams& params, Rng& rng,
                 std::vector<std::pair<float, int>>& scratch) {
  check_params(params);
  if (params.temperature == 0.0) return argmax(logits, vocab);
  // Untruncated: the chunked draw the GPU makes too (kernels/ref/token_choice.h), so a token
  // chosen on the device (Decoder::device_choice) is this one for the same draw.
  if ((params.top_k == 0 || params.top_k >= vocab) && params.top_p >= 1.0)
    return ref::sample_row(logits, vocab, params.temperature, rng.uniform());
  double mass = 0.0;
  const std::size_t n = candidates(logits, vocab, params, scratch, mass);
  const double r = rng.uniform() * mass;
  double cum = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    cum += scratch[i].first;
    if (r < cum) return scratch[i].second;
  }
  return scratch[n - 1].second;  // rounding left r at the very top
}

void token_probs(const float* logits, int vocab, const SamplingParams& params, std::vector<float>& probs,
                 std::vector<std::pair<float, int>>& scratch) {
  check_params(params);
  probs.assign(static_cast<std::size_t>(vocab), 0.0f);
  if (params.temperature == 0.0) {
    probs[static_cast<std::size_t>(argmax(logits, vocab))] = 1.0f;
    return;
  }
  double mass = 0.0;
  const std::size_t n = candidates(logits, vocab, params, scratch, mass);
  for (std::size_t i = 0; i < n; ++i)
    probs[static_cast<std::size_t>(scratch[i].second)] = static_cast<float>(scratch[i].first / mass);
}

int sample_from(const std::vector<float>& probs, Rng& rng) {
  double total = 0.0;
  for (float p : probs) total += p;
  check(total > 0.0, "sample_from: the distribution has no mass");
  const double r = rng.uniform() * total;
  double cum = 0.0;
  int last = 0;
  for (std::size_t i = 0; i < probs.size(); ++i) {
    if (probs[i] <= 0.0f) continue;
    cum += probs[i];
    last = static_cast<int>(i);
    if (r < cum) return last;
  }
  return last;  // rounding left r at the very top
}

double log_sum_exp(const float* logits, int vocab) {
  check(vocab > 0, "log_sum_exp: empty row");
  const float m = *std::max_element(logits, logits + vocab);
  double sum = 0;
  for (int t = 0; t < vocab; ++t) sum += std::exp(static_cast<double>(logits[t]) - m);
  return static_cast<double>(m) + std::log(sum);
}

}  // namespace inferlab
