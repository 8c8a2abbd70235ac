#include "prompt_lookup.h"

#include <algorithm>
#include <cstddef>
#include <string>

#include "inferlab/error.h"
#include "plugins/common/decoding/sampling.h"

namespace inferlab::plugins {

PromptLookupDecoder::PromptLookupDecoder(int num_draft, int max_ngram, int min_ngram)
    : num_draft_(num_draft), max_ngram_(max_ngram), min_ngram_(min_ngram) {
  check(num_draft >= 1, "decoding 'prompt_lookup': num_draft must be >= 1, got " +
                            std::to_string(num_draft));
  check(min_ngram >= 1 && min_ngram <= max_ngram,
        "decoding 'prompt_lookup': need 1 <= min_ngram <= max_ngram, got min_ngram=" +
            std::to_string(min_ngram) + " max_ngram=" + std::to_string(max_ngram));
}

void PromptLookupDecoder::propose(std::span<const int> tokens, int max_draft,
                                  std::vector<int>& drafts) {
  drafts.clear();
  const std::ptrdiff_t len = static_cast<std::ptrdiff_t>(tokens.size());
  const std::ptrdiff_t k = std::min(max_draft, num_draft_);
  if (k <= 0) return;
  for (std::ptrdiff_t n = max_ngram_; n >= min_ngram_; --n) {
    if (len < n + 1) continue;  // need the suffix plus at least one earlier token
    const int* suffix = tokens.data() + (len - n);
    // Latest start j whose n-gram ends before the suffix's last token, so at least one token
    // follows it: j + n <= len - 1.
    for (std::ptrdiff_t j = len - n - 1; j >= 0; --j) {
      if (!std::equal(suffix, suffix + n, tokens.data() + j)) continue;
      std::ptrdiff_t from = j + n, to = std::min(len, from + k);
      drafts.assign(tokens.begin() + from, tokens.begin() + to);
      return;
    }
  }
}

void PromptLookupDecoder::accept(std::span<const int> tokens, std::span<const int> drafts,
                                 const float* logits, int vocab, Rng& rng,
                                 std::vector<int>& out) {
  (void)tokens;
  (void)rng;
  // logits: [1 + drafts.size(), vocab]; row i predicts the token after draft i-1.
  for (std::size_t i = 0; i <= drafts.size(); ++i) {
    int target = argmax(logits + i * static_cast<std::size_t>(vocab), vocab);
    out.push_back(target);
    if (i == drafts.size() || drafts[i] != target) return;
  }
}

}  // namespace inferlab::plugins
