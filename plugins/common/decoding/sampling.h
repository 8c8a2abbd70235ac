// Token selection from one row of logits, shared by decoding strategies.
#pragma once
#include <vector>

#include "inferlab/plugin/params.h"
#include "inferlab/support/rng.h"

namespace inferlab {

struct SamplingParams {
  double temperature = 0.0;  // 0 = greedy
  int top_k = 0;             // 0 = all
  double top_p = 1.0;        // nucleus mass
};

// The sampling parameters a decoding plugin that samples its tokens declares — temperature in
// [0, 100], top_k in [0, 1e9] (0 = off), top_p in (0, 1] — appended to `specs`, and the
// SamplingParams read back from the resolved values.
void add_sampling_param_specs(std::vector<ParamSpec>& specs);
SamplingParams sampling_params_from(const Params& params);

// Index of the largest logit; the lowest index wins ties (as llama2.c's argmax).
int argmax(const float* logits, int vocab);
// Greedy at temperature 0; otherwise softmax(logits / T), top-k, then top-p, sampled with one
// rng.uniform() draw. Without top-k / top-p the draw is ref::sample_row's (kernels/ref/
// token_choice.h), bit-identical to the GPU's sample_rows for the same uniform.
// `scratch` avoids reallocation across calls.
int sample_token(const float* logits, int vocab, const SamplingParams& params, Rng& rng,
                 std::vector<std::pair<float, int>>& scratch);

// The distribution sample_token draws from, as probabilities over the whole vocabulary
// ([vocab], zero outside the top-k / top-p candidates; one-hot on the argmax at temperature 0).
void token_probs(const float* logits, int vocab, const SamplingParams& params, std::vector<float>& probs,
                 std::vector<std::pair<float, int>>& scratch);
// log Σ exp(logits) over the row, computed around its maximum (log p(t) = logits[t] - this).
double log_sum_exp(const float* logits, int vocab);
// A draw from `probs` (non-negative, not necessarily normalised); throws Error when all are 0.
int sample_from(const std::vector<float>& probs, Rng& rng);

}  // namespace inferlab
