#include "sampling.h"

#include <algorithm>
#include <string>

#include "inferlab/error.h"

namespace inferlab::plugins {

SamplingDecoder::SamplingDecoder(const SamplingParams& params, int n) : params_(params), n_(n) {
  check(n >= 1, "decoding 'sampling': n must be >= 1, got " + std::to_string(n));
  check(params.temperature >= 0, "decoding 'sampling': temperature must be >= 0, got " +
                                     std::to_string(params.temperature));
  check(params.top_k >= 0, "decoding 'sampling': top_k must be >= 0 (0 = off), got " +
                               std::to_string(params.top_k));
  check(params.top_p > 0 && params.top_p <= 1,
        "decoding 'sampling': top_p must be in (0, 1], got " + std::to_string(params.top_p));
}

void SamplingDecoder::accept(std::span<const int> tokens, std::span<const int> drafts,
                             const float* logits, int vocab, Rng& rng, std::vector<int>& out) {
  (void)tokens;
  check(drafts.empty(), "decoding 'sampling' proposes no drafts but was given some");
  out.push_back(sample_token(logits, vocab, params_, rng, scratch_));  // logits: [1, vocab]
}

TokenChoice SamplingDecoder::device_choice() const {
  if (params_.temperature == 0.0) return {TokenChoice::Kind::kArgmax, 0.0};
  if (params_.top_k == 0 && params_.top_p >= 1.0) return {TokenChoice::Kind::kSample, params_.temperature};
  return {};
}

void SamplingDecoder::branch(const BranchRequest& req, std::span<const std::span<const int>> live,
                             const float* logits, int vocab, std::span<Rng> rngs, std::vector<BranchStep>& next) {
  next.clear();
  check(static_cast<int>(rngs.size()) == n_, "decoding 'sampling': expected one RNG stream per sample");
  auto found = samples_.find(req.seq);
  if (found == samples_.end()) {  // after the prompt: every sample continues the one branch
    check(live.size() == 1, "decoding 'sampling': a request's first step must have one branch");
    Samples s;
    s.of_live.assign(static_cast<std::size_t>(n_), 0);
    s.logprob.assign(static_cast<std::size_t>(n_), 0.0);
    s.finished.resize(static_cast<std::size_t>(n_));
    found = samples_.emplace(req.seq, std::move(s)).first;
  }
  Samples& st = found->second;
  // On the first step all n samples read row 0; later, live branch i is sample of_live[i].
  const bool first = live.size() == 1 && static_cast<int>(live[0].size()) == req.prompt_len;
  const int draws = first ? n_ : static_cast<int>(live.size());
  check(first || live.size() == st.of_live.size(), "decoding 'sampling': the engine's branches differ from the samples");
  std::vector<int> of_live;
  for (int i = 0; i < draws; ++i) {
    const int parent = first ? 0 : i;
    const int j = first ? i : st.of_live[static_cast<std::size_t>(i)];
    const float* row = logits + static_cast<std::size_t>(parent) * static_cast<std::size_t>(vocab);  // [vocab]
    const int t = sample_token(row, vocab, params_, rngs[static_cast<std::size_t>(j)], scratch_);
    st.logprob[static_cast<std::size_t>(j)] += static_cast<double>(row[t]) - log_sum_exp(row, vocab);
    const std::span<const int> toks = live[static_cast<std::size_t>(parent)];
    const int length = static_cast<int>(toks.size()) - req.prompt_len + 1;
    const bool stops = std::find(req.stop_tokens.begin(), req.stop_tokens.end(), t) != req.stop_tokens.end();
    if (stops || length >= req.max_output) {
      BranchOutput& done = st.finished[static_cast<std::size_t>(j)];
      done.tokens.assign(toks.begin() + req.prompt_len, toks.end());
      done.tokens.push_back(t);
      done.logprob = st.logprob[static_cast<std::size_t>(j)];
      continue;
    }
    next.push_back({parent, t});
    of_live.push_back(j);
  }
  st.of_live = std::move(of_live);
}

void SamplingDecoder::branch_result(int seq, std::vector<BranchOutput>& out) {
  auto found = samples_.find(seq);
  check(found != samples_.end(), [&] { return "decoding 'sampling': no samples for request " + std::to_string(seq); });
  out = found->second.finished;
}

}  // namespace inferlab::plugins
