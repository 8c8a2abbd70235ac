// Beam search (the standard left-to-right form, e.g. Graves 2012; Wu et al. 2016 "GNMT" for
// the length penalty; the hypothesis bookkeeping follows Hugging Face's BeamSearchScorer).
// Each step expands the live beams (width of them) over the vocabulary with log-softmax
// scores, keeps the `width` best (beam, token) pairs, and sets aside a hypothesis when a beam
// emits a stop token or reaches max_output. A request runs its beams as engine branches that
// share K/V blocks copy on write (see Decoder::branch).
#pragma once
#include <span>
#include <unordered_map>
#include <vector>

#include "inferlab/plugin/decoder.h"

namespace inferlab::plugins {

struct BeamParams {
  int width = 4;               // beams kept per step, >= 1
  double length_penalty = 1.0;  // α: a hypothesis of L generated tokens scores logprob / L^α
  // true: stop once `width` hypotheses are finished. false: stop only when no live beam can
  // still beat the worst kept hypothesis (an exact bound, see beam_search.cpp).
  bool early_stopping = false;
};

class BeamSearchDecoder : public Decoder {
 public:
  explicit BeamSearchDecoder(const BeamParams& params);

  int branch_width() const override { return params_.width; }
  void branch(const BranchRequest& req, std::span<const std::span<const int>> live, const float* logits, int vocab,
              std::span<Rng> rngs, std::vector<BranchStep>& next) override;
  // The best finished hypothesis (by length-normalised score).
  void branch_result(int seq, std::vector<BranchOutput>& out) override;
  void release(int seq) override { state_.erase(seq); }
  // Never called: the engine drives a branching decoder through branch().
  void accept(std::span<const int> tokens, std::span<const int> drafts, const float* logits, int vocab, Rng& rng,
              std::vector<int>& out) override;

  // logprob / L^α.
  double normalised(double logprob, int length) const;

 private:
  struct Hypothesis {
    std::vector<int> tokens;  // generated
    double logprob = 0;
    double score = 0;  // normalised
  };
  struct State {
    std::vector<double> logprob;  // [live beams] sum of log p over each beam's generated tokens
    std::vector<Hypothesis> finished;  // at most width, best first
  };
  // Keeps the `width` best finished hypotheses, best first (earlier ones win ties).
  void add_finished(State& st, Hypothesis h) const;
  // Whether no live beam (best running logprob `best_live`, `generated` tokens) can beat the
  // worst kept hypothesis.
  bool done(const State& st, double best_live, int generated, int max_output) const;

  BeamParams params_;
  std::unordered_map<int, State> state_;
  struct Candidate {
    double logprob;
    int parent, token;
  };
  std::vector<Candidate> candidates_;
  std::vector<std::pair<double, int>> row_;
};

}  // namespace inferlab::plugins
