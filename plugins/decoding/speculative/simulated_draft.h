// Speculative decoding in simulation (`[device] kind = "sim"`, sim_accept_prob = α): no draft
// model runs. Each proposed token is the simulated target's own next token (sim_next_token)
// with probability α and a different token otherwise, independently (Leviathan et al.'s i.i.d.
// acceptance assumption, §3.1), and the target's one-hot synthetic logits are verified by the
// plugin's greedy verify_drafts — so the accepted prefix is Bernoulli(α) up to the first miss,
// and a step yields E = (1 − α^(γ+1)) / (1 − α) tokens in expectation.
#pragma once
#include <span>
#include <utility>
#include <vector>

#include "inferlab/decoder.h"
#include "inferlab/sampling.h"

namespace inferlab::plugins {

class SimulatedDraftDecoder : public Decoder {
 public:
  // num_draft: γ; accept_prob: α in [0, 1]; vocab: the simulated logits' width (> 3).
  SimulatedDraftDecoder(int num_draft, double accept_prob, int vocab);
  int max_draft_tokens() const override { return num_draft_; }
  void propose_for(int seq, std::span<const int> tokens, int max_draft, Rng& rng, std::vector<int>& drafts) override;
  void accept(std::span<const int> tokens, std::span<const int> drafts, const float* logits, int vocab, Rng& rng,
              std::vector<int>& out) override;

 private:
  int num_draft_;
  double accept_prob_;
  int vocab_;
  SamplingParams greedy_;  // temperature 0
  std::vector<std::vector<float>> rows_;
  std::vector<std::pair<float, int>> scratch_;
};

}  // namespace inferlab::plugins
