// Speculative decoding with a draft model (Leviathan et al., "Fast Inference from Transformers
// via Speculative Decoding", ICML 2023; Chen et al., "Accelerating Large Language Model Decoding
// with Speculative Sampling", 2023). A cheap draft model proposes γ tokens autoregressively; the
// target scores all of them in one forward pass (the engine's verify step) and modified rejection
// sampling keeps a prefix of them so that every emitted token is distributed exactly as the
// target alone would sample it — at temperature 0 exactly the greedy tokens.
//
// The draft is the target truncated to its first `draft_layers` layers plus the final norm and
// classifier (self-drafting), or another checkpoint/preset with the same vocabulary. It keeps
// its own paged KV cache and block accounting per sequence; rejected drafts roll back there on
// the next proposal, and a finished or preempted sequence releases its blocks.
#pragma once
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "inferlab/plugin/attention.h"
#include "inferlab/engine/batch.h"
#include "inferlab/plugin/decoder.h"
#include "inferlab/device/device.h"
#include "inferlab/kv/kv_cache.h"
#include "inferlab/model/model.h"
#include "inferlab/model/weights.h"
#include "plugins/common/decoding/sampling.h"
#include "plugins/common/quantization/float_linear.h"

namespace inferlab::plugins {

struct SpeculativeParams {
  int num_draft = 4;          // γ: drafts proposed per step (the scheduler may ask fewer)
  int draft_layers = 2;       // self-draft depth (0 = every layer: the target itself)
  std::string draft_model;    // "" = self-draft; else a preset name or a checkpoint path
  std::string draft_quantization = "none";  // how the draft's linears are stored (a quantization plugin)
  SamplingParams sampling;    // the target distribution (temperature 0 = greedy)
  int draft_kv_tokens = 16384;  // the draft cache's capacity in tokens
  bool adaptive = false;      // γ per sequence from its running acceptance rate, at most num_draft
};

// Adaptive γ from the running acceptance rate. Each verification adds its accepted drafts to A
// and its rejection (0 or 1) to R, both first decayed by λ = 0.8 (a window of about 5 steps),
// starting from the prior A = 3, R = 1 (α̂ = 0.75). Under the geometric model of Leviathan et al.
// (each draft accepted with probability α until the first rejection) α̂ = A / (A + R) is the
// maximum-likelihood estimate, and the expected run of accepted drafts is α̂ / (1 − α̂): γ is that,
// rounded to the nearest integer and kept in [1, max_gamma]. High α raises γ (α̂ = 0.9 → 9), low
// α lowers it to 1 (α̂ ≤ 0.6).
class AdaptiveGamma {
 public:
  explicit AdaptiveGamma(int max_gamma) : max_gamma_(max_gamma) {}
  int gamma() const;
  double alpha() const { return accepted_ / (accepted_ + rejected_); }
  // One verification: `accepted` of `proposed` drafts kept (a rejection when accepted < proposed).
  void observe(int accepted, int proposed);

 private:
  int max_gamma_;
  double accepted_ = 3.0, rejected_ = 1.0;
};

// One verification step as a pure function, so its losslessness is testable on its own.
// target: rows [drafts.size() + 1] of the target distribution (row i follows draft i-1);
// draft_probs: the draft distribution each draft was drawn from. Appends the accepted drafts and
// one more token (a residual draw after a rejection, or a draw from the last row) to `out`.
void verify_drafts(std::span<const std::vector<float>> target, std::span<const int> drafts,
                   std::span<const std::vector<float>> draft_probs, bool greedy, Rng& rng, std::vector<int>& out);

class SpeculativeDecoder : public Decoder {
 public:
  // target: the run's float weights (the self-draft's source); attention: the run's strategy,
  // which the draft uses too.
  // draft_quant: builds the draft's linears (null = quantization/none on the CPU; on CUDA pass
  // the registry's "none" for the device, as the descriptor does).
  SpeculativeDecoder(const SpeculativeParams& params, const ModelWeights& target, Attention& attention,
                     Device& device, std::shared_ptr<Quantization> draft_quant = nullptr);
  ~SpeculativeDecoder() override;

  int max_draft_tokens() const override { return params_.num_draft; }
  void propose_for(int seq, std::span<const int> tokens, int max_draft, Rng& rng, std::vector<int>& drafts) override;
  // Every sequence's drafts of a step: each of the γ draft passes is one batch over them all.
  void propose_batch(std::span<const DraftRequest> requests) override;
  void accept_for(int seq, std::span<const int> tokens, std::span<const int> drafts, const float* logits, int vocab,
                  Rng& rng, std::vector<int>& out) override;
  void accept(std::span<const int> tokens, std::span<const int> drafts, const float* logits, int vocab, Rng& rng,
              std::vector<int>& out) override;
  void release(int seq) override;

  const ModelConfig& draft_config() const { return draft_->config(); }
  // Draft KV blocks free now and in all (a finished run must have given every block back).
  int draft_free_blocks() const { return blocks_.free_blocks(); }
  int draft_total_blocks() const { return blocks_.num_blocks(); }
  // Draft forward passes so far (one per drafted position, for the whole batch of sequences).
  long long draft_forwards() const { return draft_forwards_; }
  // Adaptive γ: the γ a sequence would draft next (num_draft when not adaptive), and the mean
  // γ over every proposal so far.
  int gamma_for(int seq) const;
  double mean_gamma() const { return proposals_ ? static_cast<double>(gamma_sum_) / static_cast<double>(proposals_) : 0.0; }

 private:
  // Modified rejection sampling of the drafts against the target rows (temperature > 0).
  void verify_sampled(int seq, std::span<const int> drafts, const float* logits, int vocab, Rng& rng,
                      std::vector<int>& out);

  // A sequence still drafting in propose_batch: its request, its γ, the position of its next row.
  struct Lane {
    std::size_t request;
    int max_draft;
    int position;
  };

  SpeculativeParams params_;
  Attention& attention_;
  std::shared_ptr<Quantization> quant_;
  std::unique_ptr<Model> draft_;
  BlockManager blocks_;
  KvStorage storage_;
  StepBatch batch_;
  std::vector<float> logits_;
  std::vector<Lane> lanes_;
  std::vector<BlockCopy> copies_;
  std::vector<std::pair<float, int>> scratch_;
  std::unordered_map<int, std::vector<int>> cached_;  // per sequence: tokens whose K/V the draft holds
  std::unordered_map<int, std::vector<std::vector<float>>> proposed_q_;  // per sequence: q of its drafts
  std::vector<std::vector<float>> target_rows_;
  long long draft_forwards_ = 0;
  std::unordered_map<int, AdaptiveGamma> gamma_;  // per sequence, adaptive only
  long long gamma_sum_ = 0, proposals_ = 0;
};

// The draft model's weights for `params` against the target (throws Error with the reason when
// the draft cannot serve: vocabulary differs, a depth the target does not have).
ModelWeights draft_weights(const SpeculativeParams& params, const ModelWeights& target);

}  // namespace inferlab::plugins
