// SimulatedDraftDecoder (see simulated_draft.h).
#include "simulated_draft.h"

#include <algorithm>

#include "inferlab/error.h"
#include "inferlab/sim.h"
#include "speculative.h"

namespace inferlab::plugins {

SimulatedDraftDecoder::SimulatedDraftDecoder(int num_draft, double accept_prob, int vocab)
    : num_draft_(num_draft), accept_prob_(accept_prob), vocab_(vocab) {
  check(num_draft >= 1, "decoding 'speculative': num_draft must be >= 1");
  check(accept_prob >= 0.0 && accept_prob <= 1.0, "decoding 'speculative': sim_accept_prob must be in [0, 1]");
  check(vocab > 4, "decoding 'speculative': the simulated vocabulary must have more than 4 tokens");
  greedy_.temperature = 0.0;
}

void SimulatedDraftDecoder::propose_for(int seq, std::span<const int> tokens, int max_draft, Rng& rng,
                                        std::vector<int>& drafts) {
  (void)seq;
  drafts.clear();
  if (tokens.empty()) return;
  int prev = tokens.back();
  int pos = static_cast<int>(tokens.size()) - 1;  // the position of `prev`
  for (int i = 0; i < std::min(max_draft, num_draft_); ++i, ++pos) {
    const int right = sim_next_token(prev, pos, vocab_);
    // A miss is any other non-special token: the next one, cyclically over [3, vocab).
    const int token = rng.uniform() < accept_prob_ ? right : 3 + (right - 3 + 1) % (vocab_ - 3);
    drafts.push_back(token);
    prev = token;
  }
}

void SimulatedDraftDecoder::accept(std::span<const int> tokens, std::span<const int> drafts, const float* logits,
                                   int vocab, Rng& rng, std::vector<int>& out) {
  (void)tokens;
  rows_.resize(drafts.size() + 1);
  for (std::size_t r = 0; r <= drafts.size(); ++r)
    token_probs(logits + r * static_cast<std::size_t>(vocab), vocab, greedy_, rows_[r], scratch_);
  verify_drafts(rows_, drafts, {}, /*greedy=*/true, rng, out);
}

}  // namespace inferlab::plugins
