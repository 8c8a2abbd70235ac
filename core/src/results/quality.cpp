#include "inferlab/results/quality.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "inferlab/error.h"

namespace inferlab {

namespace {

void log_softmax(const float* logits, int vocab, std::vector<float>& out) {
  out.resize(static_cast<std::size_t>(vocab));
  float mx = -std::numeric_limits<float>::infinity();
  for (int i = 0; i < vocab; ++i) mx = std::max(mx, logits[i]);
  double sum = 0;
  for (int i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(logits[i] - mx));
  const float lse = mx + static_cast<float>(std::log(sum));
  for (int i = 0; i < vocab; ++i) out[static_cast<std::size_t>(i)] = logits[i] - lse;
}

}  // namespace

PerplexityResult evaluate_perplexity(Model& model, Attention& attention, const std::vector<int>& tokens, int context, int stride,
                                     std::vector<std::vector<float>>* logprobs, const KvFormat& kv_format) {
  const ModelConfig& cfg = model.config();
  if (context <= 0) context = cfg.max_seq_len;
  if (stride <= 0 || stride > context) stride = context;
  check(context >= 2, "perplexity needs a context of at least 2 tokens, got " + std::to_string(context));
  check(tokens.size() >= 2, "perplexity needs at least 2 tokens, got " + std::to_string(tokens.size()));
  const int vocab = cfg.vocab_size;
  for (int t : tokens) check(t >= 0 && t < vocab, "token id " + std::to_string(t) + " outside the vocabulary");

  KvCacheConfig kvc;
  kvc.block_size = 16;
  kvc.num_blocks = (context + kvc.block_size - 1) / kvc.block_size;
  BlockManager kv(kvc);
  KvStorage storage(model.device(), cfg, kvc.num_blocks, kvc.block_size, kv_format);
  std::vector<BlockCopy> copies;  // a single private sequence: never any
  const int seq = 0;
  const int chunk = 256;
  const int n = static_cast<int>(tokens.size());
  StepBatch batch;
  std::vector<float> logits, row;
  double nll = 0;
  long long count = 0;

  // A window covers tokens [begin, begin + len); its row j predicts token begin + j + 1. Each
  // target is scored once, by the first window that reaches it (the one with the most context
  // before it when windows overlap).
  int next_target = 1;
  for (int begin = 0;; begin += stride) {
    const int len = std::min(context, n - begin);
    if (len < 2) break;
    const int first_scored = std::max(0, next_target - begin - 1);
    next_target = begin + len;
    if (kv.has(seq)) kv.free(seq);
    check(kv.reserve(seq, len, copies), "quality KV cache too small");
    for (int start = 0; start < len; start += chunk) {
      const int m = std::min(chunk, len - start);
      batch.clear();
      // Rows at positions [first_scored, len - 1) predict a token of the window.
      const int lo = std::clamp(first_scored - start, 0, m), hi = std::clamp(len - 1 - start, lo, m);
      batch.add_sequence(std::span<const int>(tokens).subspan(static_cast<std::size_t>(begin + start),
                                                               static_cast<std::size_t>(m)),
                         start, kv.block_table(seq), kvc.block_size, lo, hi);
      model.forward(batch, storage, attention, logits);
      kv.set_length(seq, start + m);
      for (std::size_t r = 0; r < batch.logit_rows.size(); ++r) {
        const int pos = start + batch.logit_rows[r];
        log_softmax(logits.data() + r * static_cast<std::size_t>(vocab), vocab, row);
        nll -= row[static_cast<std::size_t>(tokens[static_cast<std::size_t>(begin + pos + 1)])];
        ++count;
        if (logprobs) logprobs->push_back(row);
      }
    }
    if (begin + len >= n) break;
  }
  if (kv.has(seq)) kv.free(seq);
  PerplexityResult r;
  r.tokens = count;
  r.mean_nll = count ? nll / static_cast<double>(count) : 0;
  r.perplexity = std::exp(r.mean_nll);
  return r;
}

std::vector<int> quality_tokens(const std::string& text, const Tokenizer* tokenizer, int vocab_size, int max_tokens,
                                std::optional<bool> add_bos) {
  std::vector<int> ids;
  if (tokenizer) {
    ids = tokenizer->encode_document(text, add_bos);
  } else {
    if (add_bos.value_or(true)) ids.push_back(1);
    for (unsigned char c : text) ids.push_back((3 + c) % vocab_size);
  }
  if (max_tokens > 0 && static_cast<int>(ids.size()) > max_tokens) ids.resize(static_cast<std::size_t>(max_tokens));
  return ids;
}

QualityEvaluator::QualityEvaluator(const QualitySpec& spec, std::vector<int> tokens)
    : spec_(spec), tokens_(std::move(tokens)) {}

void QualityEvaluator::remember(const std::string& variant, const MetricRow& row) {
  MetricRow q;
  for (const auto& [k, v] : row)
    if (k == "perplexity" || k == "mean_nll" || k == "kl_vs_baseline" || k == "top1_agree_frac") q.emplace_back(k, v);
  if (q.size() == 4) cache_.emplace(variant, std::move(q));
}

MetricRow QualityEvaluator::evaluate(const std::string& variant, Model& model, Attention& attention, bool is_baseline,
                                     const KvFormat& kv_format) {
  if (auto it = cache_.find(variant); it != cache_.end()) return it->second;
  std::vector<std::vector<float>> lp;
  PerplexityResult p = evaluate_perplexity(model, attention, tokens_, spec_.context, spec_.context, &lp, kv_format);
  MetricRow row = {{"perplexity", p.perplexity}, {"mean_nll", p.mean_nll}};
  if (is_baseline) {
    baseline_ = std::move(lp);
    have_baseline_ = true;
    row.emplace_back("kl_vs_baseline", 0.0);
    row.emplace_back("top1_agree_frac", 1.0);
  } else if (!have_baseline_ || baseline_.size() != lp.size()) {
    row.emplace_back("kl_vs_baseline", std::nan(""));
    row.emplace_back("top1_agree_frac", std::nan(""));
  } else {
    double kl = 0;
    long long agree = 0;
    for (std::size_t t = 0; t < lp.size(); ++t) {
      const auto& b = baseline_[t];
      const auto& v = lp[t];
      double k = 0;
      for (std::size_t i = 0; i < b.size(); ++i) k += std::exp(static_cast<double>(b[i])) * (b[i] - v[i]);
      kl += std::max(0.0, k);
      auto ab = std::max_element(b.begin(), b.end()) - b.begin();
      auto av = std::max_element(v.begin(), v.end()) - v.begin();
      agree += ab == av;
    }
    row.emplace_back("kl_vs_baseline", kl / static_cast<double>(lp.size()));
    row.emplace_back("top1_agree_frac", static_cast<double>(agree) / static_cast<double>(lp.size()));
  }
  cache_[variant] = row;
  return row;
}

}  // namespace inferlab
