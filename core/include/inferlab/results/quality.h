// Teacher-forced quality: perplexity of a model stack on a token sequence, and agreement of a
// variant's next-token distributions with the baseline stack's on the same tokens.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "inferlab/plugin/attention.h"
#include "inferlab/experiment/experiment.h"
#include "inferlab/results/metrics.h"
#include "inferlab/model/model.h"
#include "inferlab/tokenizer/tokenizer.h"

namespace inferlab {

struct PerplexityResult {
  double mean_nll = 0;  // nats per predicted token
  double perplexity = 0;
  long long tokens = 0;  // predicted tokens
};

// Runs `tokens` through the model in windows of `context` tokens advancing by `stride`
// (stride <= context; the first window predicts all its tokens, later ones only the last
// `stride`), chunked `chunk` rows at a time. When `logprobs` is given, stores the
// log-softmax row [vocab] used for each predicted token, in order. context 0 = model's.
PerplexityResult evaluate_perplexity(Model& model, Attention& attention,
                                     const std::vector<int>& tokens, int context, int stride,
                                     std::vector<std::vector<float>>* logprobs = nullptr,
                                     const KvFormat& kv_format = {});

// Tokens for quality text: the tokenizer's when there is one (BOS/EOS as the model file says,
// add_bos overriding its BOS when set), else BOS (id 1) and the UTF-8 bytes mapped to ids
// 3 + byte (mod vocab) — meaningful for comparing variants of a random-weight model.
std::vector<int> quality_tokens(const std::string& text, const Tokenizer* tokenizer, int vocab_size, int max_tokens,
                                std::optional<bool> add_bos = std::nullopt);

// Evaluates each variant once; the first call (the baseline) becomes the reference for KL and
// top-1 agreement. Results are cached by variant name.
class QualityEvaluator {
 public:
  QualityEvaluator(const QualitySpec& spec, std::vector<int> tokens);
  // perplexity, mean_nll, kl_vs_baseline (mean KL(baseline || variant), nats), top1_agree_frac.
  // kv_format: the variant's [kv] format.
  MetricRow evaluate(const std::string& variant, Model& model, Attention& attention, bool is_baseline,
                     const KvFormat& kv_format = {});
  // Caches the quality metrics found in `row` (a cell measured in a child process) for `variant`.
  void remember(const std::string& variant, const MetricRow& row);

 private:
  QualitySpec spec_;
  std::vector<int> tokens_;
  std::vector<std::vector<float>> baseline_;  // [predicted tokens][vocab] log-probs
  bool have_baseline_ = false;
  std::map<std::string, MetricRow> cache_;
};

}  // namespace inferlab
