// Token choice on the device (Decoder::device_choice) through the real Engine: the same
// requests run once with the decoder as it is (the device chooses where it can) and once behind
// HostChoiceDecoder (host logits and accept_for, always), so a test compares the two paths'
// tokens on any device (tests/cuda on a GPU, the sampling plugin's test on the CPU).
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "inferlab/engine/engine.h"
#include "inferlab/plugin/decoder.h"

namespace inferlab::testing {

// `inner` in every call but device_choice(), which is none: the engine's host path.
class HostChoiceDecoder final : public Decoder {
 public:
  explicit HostChoiceDecoder(Decoder& inner) : inner_(inner) {}
  int max_draft_tokens() const override { return inner_.max_draft_tokens(); }
  void accept(std::span<const int> tokens, std::span<const int> drafts, const float* logits, int vocab, Rng& rng,
              std::vector<int>& out) override {
    inner_.accept(tokens, drafts, logits, vocab, rng, out);
  }
  void accept_for(int seq, std::span<const int> tokens, std::span<const int> drafts, const float* logits, int vocab,
                  Rng& rng, std::vector<int>& out) override {
    inner_.accept_for(seq, tokens, drafts, logits, vocab, rng, out);
  }
  void release(int seq) override { inner_.release(seq); }
  int branch_width() const override { return inner_.branch_width(); }
  TokenChoice device_choice() const override { return {}; }

 private:
  Decoder& inner_;
};

// `n` requests of distinct fixed prompts (3 to 3 + n - 1 tokens, ids in [1, vocab)), each asking
// for max_output tokens, all arriving at 0.
std::vector<Request> token_choice_requests(int vocab, int n, int max_output);

struct ChoicePaths {
  RunResult device;  // the decoder as it is
  RunResult host;    // behind HostChoiceDecoder
};
// Both runs of `requests` on `model` (block size 16, seed `seed`, a fresh scheduler from
// `make_scheduler` each).
ChoicePaths run_both_choice_paths(Model& model, Attention& attention, Decoder& decoder,
                                  const std::function<std::shared_ptr<Scheduler>()>& make_scheduler,
                                  const std::vector<Request>& requests, std::uint64_t seed);

}  // namespace inferlab::testing
