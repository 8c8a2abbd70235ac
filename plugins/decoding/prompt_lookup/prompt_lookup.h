// Prompt lookup decoding (Saxena 2023): speculative decoding (Leviathan et al. 2023) whose
// draft "model" is string matching: the last n tokens are looked up earlier in the
// sequence and the tokens that followed them are proposed. Verification is greedy, so the
// output equals plain greedy decoding token for token; the gain is several tokens per step on
// repetitive text (summaries, code edits, retrieval answers quoting the prompt).
#pragma once
#include <vector>

#include "inferlab/plugin/decoder.h"

namespace inferlab::plugins {

class PromptLookupDecoder : public Decoder {
 public:
  // num_draft >= 1: most drafts per step; 1 <= min_ngram <= max_ngram: n-gram sizes tried.
  PromptLookupDecoder(int num_draft, int max_ngram, int min_ngram);

  int max_draft_tokens() const override { return num_draft_; }

  // For n from max_ngram down to min_ngram: finds the most recent earlier occurrence of the
  // last n tokens and proposes up to min(max_draft, num_draft) tokens that followed it.
  // No match: no drafts.
  void propose(std::span<const int> tokens, int max_draft, std::vector<int>& drafts) override;

  // Greedy verification: appends the drafts that equal the argmax of the row before them,
  // then the argmax of the first mismatching row (or of the last row when all matched).
  void accept(std::span<const int> tokens, std::span<const int> drafts, const float* logits,
              int vocab, Rng& rng, std::vector<int>& out) override;

 private:
  int num_draft_, max_ngram_, min_ngram_;
};

}  // namespace inferlab::plugins
