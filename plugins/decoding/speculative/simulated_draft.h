// Speculative decoding in simulation (`[device] kind = "sim"`, sim_accept_prob = α): no draft
// model runs. Each proposed token is the simulated target's own next token (sim_next_token)
// with probability α and a different token otherwise, independently (Leviathan et al.'s i.i.d.
// acceptance assumption, §3.1), and the target's one-hot synthetic logits are verified by the
// plugin's greedy verify_drafts — so the accepted prefix is Bernoulli(α) up to the first miss,
// and a step yields E = (1 − α^(γ+1)) / (1 − α) tokens in expectation.
// The draft's time is charged as the real plugin spends it: per proposal one pass over the
// tokens the draft's cache lacks (the whole sequence the first time or after a preemption, then
// the newly accepted tokens) and γ − 1 one-token passes, each costed by the simulator on the
// draft model's own shape and quantization (SimDevice::charge_draft).
#pragma once
#include <span>
#include <unordered_map>
#include <utility>
#include <vector>

#include "inferlab/plugin/decoder.h"
#include "inferlab/model/model_config.h"
#include "inferlab/sim/sim.h"
#include "plugins/common/decoding/sampling.h"

namespace inferlab::plugins {

class SimulatedDraftDecoder : public Decoder {
 public:
  // num_draft: γ; accept_prob: α in [0, 1]; vocab: the simulated logits' width (> 3).
  // device: charged each draft pass of `draft` (the draft model's shape) costed with
  // `draft_options` (the run's profile, the draft's own linears).
  SimulatedDraftDecoder(int num_draft, double accept_prob, int vocab, SimDevice& device, ModelConfig draft,
                        SimOptions draft_options);
  int max_draft_tokens() const override { return num_draft_; }
  void propose_for(int seq, std::span<const int> tokens, int max_draft, Rng& rng, std::vector<int>& drafts) override;
  void accept(std::span<const int> tokens, std::span<const int> drafts, const float* logits, int vocab, Rng& rng,
              std::vector<int>& out) override;
  void release(int seq) override { cached_.erase(seq); }

 private:
  int num_draft_;
  double accept_prob_;
  int vocab_;
  SamplingParams greedy_;  // temperature 0
  std::vector<std::vector<float>> rows_;
  std::vector<std::pair<float, int>> scratch_;
  // What the draft's cache holds of a sequence after its last proposal, as the real plugin's:
  // the `known` tokens it was proposed from and the drafts it ran (all but the last).
  struct Cached {
    int known = 0;
    std::vector<int> drafts;
  };
  SimDevice& device_;
  ModelConfig draft_;
  SimOptions draft_options_;
  std::unordered_map<int, Cached> cached_;
};

}  // namespace inferlab::plugins
