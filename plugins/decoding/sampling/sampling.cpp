#include "sampling.h"

#include <string>

#include "inferlab/error.h"

namespace inferlab::plugins {

SamplingDecoder::SamplingDecoder(const SamplingParams& params) : params_(params) {
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

}  // namespace inferlab::plugins
