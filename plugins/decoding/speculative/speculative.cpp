// Speculative decoding with a draft model (see speculative.h).
#include "speculative.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "inferlab/error.h"
#include "inferlab/run/runner.h"

namespace inferlab::plugins {

namespace {

constexpr int kDraftBlock = 16;

KvCacheConfig draft_kv(const SpeculativeParams& p) {
  KvCacheConfig c;
  c.block_size = kDraftBlock;
  c.num_blocks = std::max(1, (p.draft_kv_tokens + kDraftBlock - 1) / kDraftBlock);
  return c;
}

}  // namespace

ModelWeights draft_weights(const SpeculativeParams& params, const ModelWeights& target) {
  const int depth = target.config.n_layers;
  if (params.draft_model.empty()) {
    check(params.draft_layers >= 0 && params.draft_layers <= depth,
          "decoding 'speculative': draft_layers = " + std::to_string(params.draft_layers) + ", but the model has " +
              std::to_string(depth) + " layers; allowed: 0 (all) .. " + std::to_string(depth));
    ModelWeights w = target;  // first k layers + the final norm and classifier
    if (params.draft_layers > 0) {
      w.layers.resize(static_cast<std::size_t>(params.draft_layers));
      w.config.n_layers = params.draft_layers;
    }
    w.config.name = target.config.name + " (first " + std::to_string(w.config.n_layers) + " layers)";
    return w;
  }
  ModelSpec spec;
  const auto presets = preset_names();
  if (std::find(presets.begin(), presets.end(), params.draft_model) != presets.end()) spec.preset = params.draft_model;
  else spec.path = params.draft_model;
  ModelWeights w = load_experiment_model(spec).weights;
  check(w.config.vocab_size == target.config.vocab_size,
        "decoding 'speculative': draft_model '" + params.draft_model + "' has a vocabulary of " +
            std::to_string(w.config.vocab_size) + " tokens, the target " + std::to_string(target.config.vocab_size) +
            "; allowed: a draft with the target's tokenizer");
  return w;
}

void verify_drafts(std::span<const std::vector<float>> target, std::span<const int> drafts,
                   std::span<const std::vector<float>> draft_probs, bool greedy, Rng& rng, std::vector<int>& out) {
  check(target.size() == drafts.size() + 1, "verify_drafts: one target row per draft, plus one");
  check(greedy || draft_probs.size() == drafts.size(), "verify_drafts: one draft distribution per draft");
  for (std::size_t i = 0; i < drafts.size(); ++i) {
    const std::vector<float>& p = target[i];
    const int x = drafts[i];
    if (greedy) {  // p is one-hot on the target's argmax
      if (p[static_cast<std::size_t>(x)] > 0.0f) {
        out.push_back(x);
        continue;
      }
      out.push_back(static_cast<int>(std::max_element(p.begin(), p.end()) - p.begin()));
      return;
    }
    const std::vector<float>& q = draft_probs[i];
    const double px = p[static_cast<std::size_t>(x)], qx = q[static_cast<std::size_t>(x)];
    // Accept x with probability min(1, p(x) / q(x)).
    if (qx > 0.0 && rng.uniform() * qx < px) {
      out.push_back(x);
      continue;
    }
    // Rejected: draw from the residual norm(max(0, p - q)); when it has no mass (p == q
    // almost everywhere), p itself.
    std::vector<float> residual(p.size());
    double mass = 0.0;
    for (std::size_t v = 0; v < p.size(); ++v) {
      residual[v] = std::max(0.0f, p[v] - q[v]);
      mass += residual[v];
    }
    out.push_back(mass > 0.0 ? sample_from(residual, rng) : sample_from(p, rng));
    return;
  }
  const std::vector<float>& last = target.back();  // every draft accepted: one more from the target
  out.push_back(greedy ? static_cast<int>(std::max_element(last.begin(), last.end()) - last.begin())
                       : sample_from(last, rng));
}

int AdaptiveGamma::gamma() const {
  const double a = alpha();
  if (a >= 1.0) return max_gamma_;
  return std::clamp(static_cast<int>(std::lround(std::min(a / (1.0 - a), 1e6))), 1, max_gamma_);
}

void AdaptiveGamma::observe(int accepted, int proposed) {
  if (proposed <= 0) return;
  constexpr double kDecay = 0.8;
  accepted_ = kDecay * accepted_ + accepted;
  rejected_ = kDecay * rejected_ + (accepted < proposed ? 1.0 : 0.0);
}

int SpeculativeDecoder::gamma_for(int seq) const {
  if (!params_.adaptive) return params_.num_draft;
  const auto it = gamma_.find(seq);
  return it == gamma_.end() ? AdaptiveGamma(params_.num_draft).gamma() : it->second.gamma();
}

SpeculativeDecoder::SpeculativeDecoder(const SpeculativeParams& params, const ModelWeights& target,
                                       Attention& attention, Device& device, std::shared_ptr<Quantization> draft_quant)
    : params_(params),
      attention_(attention),
      quant_(draft_quant ? std::move(draft_quant) : std::make_shared<NoQuantization>()),
      draft_(std::make_unique<Model>(draft_weights(params, target), *quant_, device)),
      blocks_(draft_kv(params)),
      storage_(device, draft_->config(), draft_kv(params).num_blocks, kDraftBlock) {
  check(params.num_draft >= 1, "decoding 'speculative': num_draft must be >= 1");
}

SpeculativeDecoder::~SpeculativeDecoder() = default;

void SpeculativeDecoder::propose_for(int seq, std::span<const int> tokens, int max_draft, Rng& rng,
                                     std::vector<int>& drafts) {
  const DraftRequest one{seq, tokens, max_draft, &rng, &drafts};
  propose_batch(std::span(&one, 1));
}

void SpeculativeDecoder::propose_batch(std::span<const DraftRequest> requests) {
  // Pass 0 runs each sequence's tokens the draft has not cached yet (at least the last known
  // one) and pass i > 0 the draft chosen in pass i - 1, every sequence still drafting in one
  // batch: γ draft passes per step whatever the batch, each reading the draft's weights once.
  batch_.clear();
  lanes_.clear();
  for (std::size_t r = 0; r < requests.size(); ++r) {
    const DraftRequest& req = requests[r];
    req.drafts->clear();
    proposed_q_[req.seq].clear();
    const int max_draft = params_.adaptive ? std::min(req.max_draft, gamma_for(req.seq)) : req.max_draft;
    if (max_draft <= 0) continue;
    gamma_sum_ += max_draft;
    ++proposals_;
    const int n = static_cast<int>(req.tokens.size());
    std::vector<int>& cached = cached_[req.seq];
    // Keep the longest cached prefix that still matches (rejected drafts roll back here), but
    // always re-run the last known token so that its logits are at hand.
    int keep = 0;
    while (keep < static_cast<int>(cached.size()) && keep < n - 1 &&
           cached[static_cast<std::size_t>(keep)] == req.tokens[static_cast<std::size_t>(keep)])
      ++keep;
    if (blocks_.has(req.seq)) blocks_.truncate(req.seq, std::min(keep, blocks_.length(req.seq)), false);
    cached.assign(req.tokens.begin(), req.tokens.begin() + keep);
    copies_.clear();
    if (!blocks_.reserve(req.seq, n, copies_)) continue;  // the draft cache is full: no drafts
    batch_.add_sequence(req.tokens.subspan(static_cast<std::size_t>(keep)), keep, blocks_.block_table(req.seq),
                        kDraftBlock, n - keep - 1, n - keep);
    cached.assign(req.tokens.begin(), req.tokens.end());
    lanes_.push_back({r, max_draft, n});
  }
  const int vocab = draft_->config().vocab_size;
  const bool greedy = params_.sampling.temperature == 0.0;
  while (!lanes_.empty()) {
    draft_->forward(batch_, storage_, attention_, logits_);
    ++draft_forwards_;
    batch_.clear();
    std::size_t next = 0;
    for (std::size_t l = 0; l < lanes_.size(); ++l) {
      Lane lane = lanes_[l];
      const DraftRequest& req = requests[lane.request];
      blocks_.set_length(req.seq, lane.position);
      const float* row = logits_.data() + l * static_cast<std::size_t>(vocab);
      // Greedy verification needs only the draft's argmax, not its distribution.
      int x;
      if (greedy) {
        x = argmax(row, vocab);
      } else {
        std::vector<float> probs;
        token_probs(row, vocab, params_.sampling, probs, scratch_);
        x = sample_from(probs, *req.rng);
        proposed_q_[req.seq].push_back(std::move(probs));
      }
      req.drafts->push_back(x);
      if (static_cast<int>(req.drafts->size()) == lane.max_draft) continue;
      copies_.clear();
      if (!blocks_.reserve(req.seq, lane.position + 1, copies_)) continue;
      const int token[1] = {x};
      batch_.add_sequence(token, lane.position, blocks_.block_table(req.seq), kDraftBlock, 0, 1);
      cached_[req.seq].push_back(x);
      ++lane.position;
      lanes_[next++] = lane;
    }
    lanes_.resize(next);
  }
}

void SpeculativeDecoder::accept_for(int seq, std::span<const int> tokens, std::span<const int> drafts,
                                    const float* logits, int vocab, Rng& rng, std::vector<int>& out) {
  (void)tokens;
  const bool greedy = params_.sampling.temperature == 0.0;
  const std::size_t before = out.size();
  if (greedy) {  // keep drafts while they are the target's argmax, then the argmax after them
    for (std::size_t r = 0; r <= drafts.size(); ++r) {
      const int best = argmax(logits + r * static_cast<std::size_t>(vocab), vocab);
      out.push_back(best);
      if (r == drafts.size() || drafts[r] != best) break;
    }
  } else {
    verify_sampled(seq, drafts, logits, vocab, rng, out);
  }
  if (params_.adaptive && !drafts.empty()) {  // the kept drafts plus one token were appended
    const int kept = static_cast<int>(out.size() - before) - 1;
    gamma_.try_emplace(seq, params_.num_draft).first->second.observe(kept, static_cast<int>(drafts.size()));
  }
}

void SpeculativeDecoder::verify_sampled(int seq, std::span<const int> drafts, const float* logits, int vocab, Rng& rng,
                                        std::vector<int>& out) {
  target_rows_.resize(drafts.size() + 1);
  for (std::size_t r = 0; r <= drafts.size(); ++r)
    token_probs(logits + r * static_cast<std::size_t>(vocab), vocab, params_.sampling, target_rows_[r], scratch_);
  static const std::vector<std::vector<float>> kNone;
  const auto found = proposed_q_.find(seq);
  const auto& q = drafts.empty() || found == proposed_q_.end() ? kNone : found->second;
  check(drafts.empty() || q.size() >= drafts.size(), "decoding 'speculative': asked to verify drafts it did not propose");
  verify_drafts(target_rows_, drafts, std::span(q).first(drafts.size()), false, rng, out);
}

void SpeculativeDecoder::accept(std::span<const int> tokens, std::span<const int> drafts, const float* logits,
                                int vocab, Rng& rng, std::vector<int>& out) {
  accept_for(-1, tokens, drafts, logits, vocab, rng, out);
}

void SpeculativeDecoder::release(int seq) {
  if (blocks_.has(seq)) blocks_.free(seq);
  gamma_.erase(seq);
  cached_.erase(seq);
  proposed_q_.erase(seq);
}

}  // namespace inferlab::plugins
