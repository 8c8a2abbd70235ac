// Ancestral sampling with temperature, top-k and top-p (nucleus, Holtzman et al. 2020)
// truncation, one token per step, seeded per sequence. Temperature 0 is greedy.
// n > 1 (parallel sampling): a request returns n independent samples, run as engine branches
// that share the prompt's KV blocks copy on write; sample j draws from its own RNG stream.
#pragma once
#include <unordered_map>
#include <utility>
#include <vector>

#include "inferlab/plugin/decoder.h"
#include "plugins/common/decoding/sampling.h"

namespace inferlab::plugins {

class SamplingDecoder : public Decoder {
 public:
  // temperature >= 0, top_k >= 0 (0 = off), top_p in (0, 1], n >= 1 samples per request.
  explicit SamplingDecoder(const SamplingParams& params, int n = 1);

  // Samples exactly one token from row 0 with the sequence's rng. Never speculative.
  void accept(std::span<const int> tokens, std::span<const int> drafts, const float* logits,
              int vocab, Rng& rng, std::vector<int>& out) override;

  const SamplingParams& params() const { return params_; }
  // argmax at temperature 0, the tempered draw without top-k / top-p; none with either (the
  // engine only asks when n = 1: a branching decoder always reads host logits).
  TokenChoice device_choice() const override;

  // n > 1: branches, one per sample still running (0 = one sequence per request).
  int branch_width() const override { return n_ > 1 ? n_ : 0; }
  void branch(const BranchRequest& req, std::span<const std::span<const int>> live, const float* logits, int vocab,
              std::span<Rng> rngs, std::vector<BranchStep>& next) override;
  // The n samples in sample order (sample j drew from stream j).
  void branch_result(int seq, std::vector<BranchOutput>& out) override;
  void release(int seq) override { samples_.erase(seq); }

 private:
  struct Samples {
    std::vector<int> of_live;            // [live branches] the sample each one is
    std::vector<double> logprob;         // [n] log p of each sample's tokens so far
    std::vector<BranchOutput> finished;  // [n] filled as samples end
  };
  SamplingParams params_;
  int n_;
  std::vector<std::pair<float, int>> scratch_;
  std::unordered_map<int, Samples> samples_;
};

}  // namespace inferlab::plugins
