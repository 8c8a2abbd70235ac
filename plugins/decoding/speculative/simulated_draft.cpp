// SimulatedDraftDecoder (see simulated_draft.h).
#include "simulated_draft.h"

#include <algorithm>

#include "inferlab/error.h"
#include "inferlab/sim/sim.h"
#include "speculative.h"

namespace inferlab::plugins {

SimulatedDraftDecoder::SimulatedDraftDecoder(int num_draft, double accept_prob, int vocab, SimDevice& device,
                                             ModelConfig draft, SimOptions draft_options)
    : num_draft_(num_draft),
      accept_prob_(accept_prob),
      vocab_(vocab),
      device_(device),
      draft_(std::move(draft)),
      draft_options_(std::move(draft_options)) {
  check(num_draft >= 1, "decoding 'speculative': num_draft must be >= 1");
  check(accept_prob >= 0.0 && accept_prob <= 1.0, "decoding 'speculative': sim_accept_prob must be in [0, 1]");
  check(vocab > 4, "decoding 'speculative': the simulated vocabulary must have more than 4 tokens");
  greedy_.temperature = 0.0;
}

void SimulatedDraftDecoder::propose_for(int seq, std::span<const int> tokens, int max_draft, Rng& rng,
                                        std::vector<int>& drafts) {
  drafts.clear();
  if (tokens.empty()) return;
  const int n = static_cast<int>(tokens.size()), k = std::min(max_draft, num_draft_);
  if (k < 1) return;
  // The draft's passes, as SpeculativeDecoder::propose_for runs them: the tokens past the
  // longest prefix its cache still holds (at most n - 1: the last known token is always re-run
  // for its logits), then k - 1 one-token passes.
  Cached& c = cached_[seq];
  int keep = std::min(c.known, n);
  for (std::size_t i = 0; i < c.drafts.size() && keep < n && c.drafts[i] == tokens[static_cast<std::size_t>(keep)]; ++i)
    ++keep;
  keep = std::min(keep, n - 1);
  device_.charge_draft(sequence_step_cost(draft_, draft_options_, n - keep, n));
  for (int i = 1; i < k; ++i) device_.charge_draft(sequence_step_cost(draft_, draft_options_, 1, n + i));
  int prev = tokens.back();
  int pos = static_cast<int>(tokens.size()) - 1;  // the position of `prev`
  for (int i = 0; i < std::min(max_draft, num_draft_); ++i, ++pos) {
    const int right = sim_next_token(prev, pos, vocab_);
    // A miss is any other non-special token: the next one, cyclically over [3, vocab).
    const int token = rng.uniform() < accept_prob_ ? right : 3 + (right - 3 + 1) % (vocab_ - 3);
    drafts.push_back(token);
    prev = token;
  }
  c.known = n;
  c.drafts.assign(drafts.begin(), drafts.end() - 1);  // the last draft is never run through the draft
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
