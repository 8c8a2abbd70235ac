#include "beam_search.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "inferlab/error.h"
#include "plugins/common/decoding/sampling.h"

namespace inferlab::plugins {

BeamSearchDecoder::BeamSearchDecoder(const BeamParams& params) : params_(params) {
  check(params.width >= 1, "decoding 'beam': width must be >= 1, got " + std::to_string(params.width));
  check(std::isfinite(params.length_penalty),
        "decoding 'beam': length_penalty must be finite, got " + std::to_string(params.length_penalty));
}

double BeamSearchDecoder::normalised(double logprob, int length) const {
  return logprob / std::pow(static_cast<double>(length), params_.length_penalty);
}

void BeamSearchDecoder::accept(std::span<const int>, std::span<const int>, const float*, int, Rng&,
                               std::vector<int>&) {
  throw Error("decoding 'beam' branches: the engine must call branch(), not accept()");
}

void BeamSearchDecoder::add_finished(State& st, Hypothesis h) const {
  h.score = normalised(h.logprob, static_cast<int>(h.tokens.size()));
  auto at = std::find_if(st.finished.begin(), st.finished.end(),
                         [&](const Hypothesis& o) { return h.score > o.score; });
  st.finished.insert(at, std::move(h));
  if (static_cast<int>(st.finished.size()) > params_.width) st.finished.pop_back();
}

// A live beam's logprob can only fall as it grows (each token adds log p <= 0), and it has at
// most max_output tokens. For α > 0 its best normalised score is therefore logprob /
// max_output^α (a longer divisor shrinks a negative score); for α <= 0 it is logprob /
// generated^α (now). The search is done when that bound cannot beat the worst kept hypothesis.
bool BeamSearchDecoder::done(const State& st, double best_live, int generated, int max_output) const {
  if (static_cast<int>(st.finished.size()) < params_.width) return false;
  if (params_.early_stopping) return true;
  const int length = params_.length_penalty > 0 ? max_output : generated;
  return normalised(best_live, length) <= st.finished.back().score;
}

void BeamSearchDecoder::branch(const BranchRequest& req, std::span<const std::span<const int>> live,
                               const float* logits, int vocab, std::span<Rng> rngs, std::vector<BranchStep>& next) {
  (void)rngs;  // deterministic
  next.clear();
  auto found = state_.find(req.seq);
  if (found == state_.end()) {
    check(live.size() == 1, "decoding 'beam': a request's first step must have one branch");
    found = state_.emplace(req.seq, State{{0.0}, {}}).first;
  }
  State& st = found->second;
  check(st.logprob.size() == live.size(), "decoding 'beam': the engine's live branches differ from the beams");
  const int generated = static_cast<int>(live[0].size()) - req.prompt_len;  // before this step
  const int width = params_.width;

  // Candidates: each beam's 2·width best tokens (enough for `width` beams that do not stop,
  // as in HF), scored by the beam's logprob plus log-softmax of its row.
  const int per_row = std::min(vocab, 2 * width);
  candidates_.clear();
  for (std::size_t b = 0; b < live.size(); ++b) {
    const float* row = logits + b * static_cast<std::size_t>(vocab);  // [vocab]
    const double lse = log_sum_exp(row, vocab);
    row_.resize(static_cast<std::size_t>(vocab));
    for (int t = 0; t < vocab; ++t) row_[static_cast<std::size_t>(t)] = {static_cast<double>(row[t]), t};
    // Highest logit first; the lowest token id wins ties (as argmax does).
    auto better = [](const std::pair<double, int>& a, const std::pair<double, int>& c) {
      return a.first > c.first || (a.first == c.first && a.second < c.second);
    };
    std::partial_sort(row_.begin(), row_.begin() + per_row, row_.end(), better);
    for (int k = 0; k < per_row; ++k) {
      const auto& [logit, t] = row_[static_cast<std::size_t>(k)];
      candidates_.push_back({st.logprob[b] + (logit - lse), static_cast<int>(b), t});
    }
  }
  std::stable_sort(candidates_.begin(), candidates_.end(), [](const Candidate& a, const Candidate& c) {
    return a.logprob > c.logprob || (a.logprob == c.logprob && (a.parent < c.parent ||
                                                                (a.parent == c.parent && a.token < c.token)));
  });

  auto generated_tokens = [&](int parent, int token) {
    const std::span<const int> toks = live[static_cast<std::size_t>(parent)];
    std::vector<int> out(toks.begin() + req.prompt_len, toks.end());
    out.push_back(token);
    return out;
  };
  std::vector<double> next_logprob;
  for (std::size_t rank = 0; rank < candidates_.size() && static_cast<int>(next.size()) < width; ++rank) {
    const Candidate& c = candidates_[rank];
    const bool stops = std::find(req.stop_tokens.begin(), req.stop_tokens.end(), c.token) != req.stop_tokens.end();
    if (stops) {
      // Only a stop among the `width` best counts as a hypothesis (HF's rule).
      if (static_cast<int>(rank) < width) add_finished(st, {generated_tokens(c.parent, c.token), c.logprob, 0});
      continue;
    }
    next.push_back({c.parent, c.token});
    next_logprob.push_back(c.logprob);
  }
  const int length = generated + 1;
  if (length >= req.max_output || next.empty() || done(st, next_logprob.front(), length, req.max_output)) {
    // At max_output every live beam is a hypothesis; an early stop drops the live beams.
    if (length >= req.max_output)
      for (std::size_t i = 0; i < next.size(); ++i)
        add_finished(st, {generated_tokens(next[i].parent, next[i].token), next_logprob[i], 0});
    next.clear();
    next_logprob.clear();
  }
  st.logprob = std::move(next_logprob);
}

void BeamSearchDecoder::branch_result(int seq, std::vector<BranchOutput>& out) {
  out.clear();
  auto found = state_.find(seq);
  check(found != state_.end() && !found->second.finished.empty(),
        "decoding 'beam': no finished hypothesis for request " + std::to_string(seq));
  const Hypothesis& best = found->second.finished.front();
  out.push_back({best.tokens, best.logprob});
}

}  // namespace inferlab::plugins
