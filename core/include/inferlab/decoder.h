// Decoding strategy interface: turns logits into tokens, and may propose draft tokens that
// the engine verifies in the same forward pass (speculative decoding).
#pragma once
#include <span>
#include <vector>

#include "inferlab/rng.h"

namespace inferlab {

struct LayerPlan;  // inferlab/layer_plan.h

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
  virtual void accept_for(int seq, std::span<const int> tokens, std::span<const int> drafts,
                          const float* logits, int vocab, Rng& rng, std::vector<int>& out) {
    (void)seq;
    accept(tokens, drafts, logits, vocab, rng, out);
  }
  // The sequence finished, was preempted or dropped its K/V: forget what is kept for it.
  virtual void release(int seq) { (void)seq; }
  // Layers the run's model must skip or may exit after (layer skipping, early exit), or null
  // for the full model. The runner and Engine install it on the model (Model::set_layer_plan)
  // before any forward pass, quality evaluation included; it lives as long as the decoder.
  virtual LayerPlan* layer_plan() { return nullptr; }
};

}  // namespace inferlab
