// Ancestral sampling with temperature, top-k and top-p (nucleus, Holtzman et al. 2020)
// truncation, one token per step, seeded per sequence. Temperature 0 is greedy.
#pragma once
#include <utility>
#include <vector>

#include "inferlab/decoder.h"
#include "inferlab/sampling.h"

namespace inferlab::plugins {

class SamplingDecoder : public Decoder {
 public:
  // temperature >= 0, top_k >= 0 (0 = off), top_p in (0, 1].
  explicit SamplingDecoder(const SamplingParams& params);

  // Samples exactly one token from row 0 with the sequence's rng. Never speculative.
  void accept(std::span<const int> tokens, std::span<const int> drafts, const float* logits,
              int vocab, Rng& rng, std::vector<int>& out) override;

  const SamplingParams& params() const { return params_; }

 private:
  SamplingParams params_;
  std::vector<std::pair<float, int>> scratch_;
};

}  // namespace inferlab::plugins
