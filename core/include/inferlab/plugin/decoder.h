// Decoding strategy interface: turns logits into tokens, and may propose draft tokens that
// the engine verifies in the same forward pass (speculative decoding).
#pragma once
#include <span>
#include <vector>

#include "inferlab/device/token_choice.h"
#include "inferlab/support/rng.h"

namespace inferlab {

// Branching strategies (beam search, n > 1 parallel samples): after its prompt, a request runs
// as several sequences ("branches") that share the prompt's K/V blocks copy on write. The
// engine owns the K/V (forks and frees it as the decoder says); the decoder owns the scores.
struct BranchRequest {
  int seq = 0;         // request id
  int prompt_len = 0;
  int max_output = 0;  // generated tokens per branch, at most
  std::span<const int> stop_tokens;  // a branch emitting one ends (its token included)
};

// One branch of the next step: live branch `parent` continued with `token`. Several may share
// a parent (the engine forks its K/V); a live branch no step names is released.
struct BranchStep {
  int parent = 0;
  int token = 0;
};

// A sequence the request returns.
struct BranchOutput {
  std::vector<int> tokens;  // generated tokens (1..max_output)
  double logprob = 0;       // sum of log p(token | prefix) under the model's logits (temperature 1)
};
struct LayerPlan;  // inferlab/plugin/layer_plan.h

class Decoder {
 public:
  virtual ~Decoder() = default;
  // Most draft tokens one step may verify per sequence (0 = not speculative).
  virtual int max_draft_tokens() const { return 0; }
  // Draft tokens to follow `tokens` (prompt + generated), at most max_draft of them.
  virtual void propose(std::span<const int> tokens, int max_draft, std::vector<int>& drafts) {
    (void)tokens;
    (void)max_draft;
    drafts.clear();
  }
  // logits: [1 + drafts.size(), vocab] — row 0 follows the last known token, row i follows
  // draft i-1. Appends the accepted tokens to `out` (at least one). rng is the sequence's own.
  virtual void accept(std::span<const int> tokens, std::span<const int> drafts,
                      const float* logits, int vocab, Rng& rng, std::vector<int>& out) = 0;

  // Per-sequence forms the engine calls: `seq` is the request id, so strategies that keep state
  // per sequence (a draft model's KV cache) know whose tokens these are. The defaults forward
  // to the stateless forms above.
  virtual void propose_for(int seq, std::span<const int> tokens, int max_draft, Rng& rng,
                           std::vector<int>& drafts) {
    (void)seq;
    (void)rng;
    propose(tokens, max_draft, drafts);
  }
  // One sequence's drafting in a step's batch (see propose_batch).
  struct DraftRequest {
    int seq;
    std::span<const int> tokens;
    int max_draft;
    Rng* rng;
    std::vector<int>* drafts;
  };
  // Drafts for every decoding sequence of one step at once, so that a draft model runs each of
  // its passes as one batch over all of them rather than one sequence at a time. The default
  // calls propose_for per request, in order.
  virtual void propose_batch(std::span<const DraftRequest> requests) {
    for (const DraftRequest& r : requests) propose_for(r.seq, r.tokens, r.max_draft, *r.rng, *r.drafts);
  }
  virtual void accept_for(int seq, std::span<const int> tokens, std::span<const int> drafts,
                          const float* logits, int vocab, Rng& rng, std::vector<int>& out) {
    (void)seq;
    accept(tokens, drafts, logits, vocab, rng, out);
  }
  // The sequence finished, was preempted or dropped its K/V: forget what is kept for it.
  virtual void release(int seq) { (void)seq; }

  // Branching: most live branches per request (0 = not branching; the engine then calls
  // accept_for). A branching decoder is never speculative.
  virtual int branch_width() const { return 0; }
  // One step of a branching request. live: the live branches' tokens (prompt + generated, all
  // of one length; a single branch, the prompt, on the first call after prefill, or after a
  // preemption restarted the request); logits: [live.size(), vocab], row i follows live[i];
  // rngs: branch_width() seeded streams, fixed per request (stream j for sample j). Fills
  // `next` (cleared first) with at most branch_width() branches, each one token longer, that
  // never exceed req.max_output generated tokens; an empty `next` ends the request.
  virtual void branch(const BranchRequest& req, std::span<const std::span<const int>> live, const float* logits,
                      int vocab, std::span<Rng> rngs, std::vector<BranchStep>& next) {
    (void)req;
    (void)live;
    (void)logits;
    (void)vocab;
    (void)rngs;
    next.clear();
  }
  // After branch() ended the request: the sequences it returns, best first (at least one).
  virtual void branch_result(int seq, std::vector<BranchOutput>& out) {
    (void)seq;
    out.clear();
  }
  // Layers the run's model must skip or may exit after (layer skipping, early exit), or null
  // for the full model. The runner and Engine install it on the model (Model::set_layer_plan)
  // before any forward pass, quality evaluation included; it lives as long as the decoder.
  virtual LayerPlan* layer_plan() { return nullptr; }

  // Token choice on the device: a decoder whose accept() appends exactly one token chosen from
  // row 0 alone — its argmax (kArgmax), or a draw from softmax(row / temperature) by exactly one
  // rng.uniform() with no top-k / top-p (kSample; sample_token's untruncated draw) — and keeps
  // no state from accept() may say so. In a step with no drafts and no branches, on a device
  // that chooses tokens, the engine then draws u from the sequence's rng itself (kSample),
  // lets the device choose, and appends the token in place of calling accept_for: the tokens
  // are those accept_for would give for the same draws. kNone (the default): host logits and
  // accept_for, always.
  virtual TokenChoice device_choice() const { return {}; }
};

}  // namespace inferlab
