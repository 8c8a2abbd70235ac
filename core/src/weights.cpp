// ModelWeights checks and seeded random weights of any preset shape.
#include "inferlab/weights.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <utility>

#include "inferlab/error.h"
#include "inferlab/rng.h"
#include "inferlab/thread_pool.h"

namespace inferlab {
namespace {

void check_size(const std::vector<float>& t, std::size_t expected, const std::string& name,
                const ModelConfig& c) {
  check(t.size() == expected, "model weights '" + c.name + "': " + name + " has " +
                                  std::to_string(t.size()) + " values, config needs " +
                                  std::to_string(expected));
}

// One tensor to fill: values ~ approximately N(0, stddev^2) (or `constant` when stddev == 0).
struct FillJob {
  std::vector<float>* tensor;
  float stddev;
  float constant;
  std::uint64_t seed;
};

// Values per independently seeded chunk: the split, not the thread count, fixes the stream.
constexpr std::size_t kChunk = std::size_t{1} << 16;

// Irwin–Hall approximation of a standard normal: the sum of 8 uniform 16-bit draws (two
// 64-bit outputs) centred and scaled to unit variance. Exact mean and variance, tails cut at
// ±4.9 sigma, and several times cheaper than Box–Muller, which matters for billion-parameter
// shapes.
inline float approx_normal(Rng& rng) {
  const std::uint64_t a = rng.next_u64(), b = rng.next_u64();
  std::uint32_t sum = 0;
  for (int s = 0; s < 64; s += 16) sum += static_cast<std::uint32_t>((a >> s) & 0xFFFF) +
                                          static_cast<std::uint32_t>((b >> s) & 0xFFFF);
  // Each draw is uniform on {0..65535}: mean 32767.5, variance (65536^2 - 1) / 12.
  constexpr double kMean = 8 * 32767.5;
  const double kScale = 1.0 / std::sqrt(8.0 * (65536.0 * 65536.0 - 1.0) / 12.0);
  return static_cast<float>((static_cast<double>(sum) - kMean) * kScale);
}

}  // namespace

void ModelWeights::validate() const {
  const ModelConfig& c = config;
  c.validate();
  const std::size_t d = static_cast<std::size_t>(c.dim), h = static_cast<std::size_t>(c.hidden_dim),
                    kv = static_cast<std::size_t>(c.kv_dim()), v = static_cast<std::size_t>(c.vocab_size);
  check_size(token_embedding, v * d, "token_embedding", c);
  check(layers.size() == static_cast<std::size_t>(c.n_layers),
        "model weights '" + c.name + "': " + std::to_string(layers.size()) + " layers, config needs " +
            std::to_string(c.n_layers));
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const LayerWeights& l = layers[i];
    const std::string p = "layers." + std::to_string(i) + ".";
    check_size(l.attn_norm, d, p + "attn_norm", c);
    check_size(l.wq, d * d, p + "wq", c);
    check_size(l.wk, kv * d, p + "wk", c);
    check_size(l.wv, kv * d, p + "wv", c);
    check_size(l.wo, d * d, p + "wo", c);
    check_size(l.bq, c.qkv_bias ? d : 0, p + "bq", c);
    check_size(l.bk, c.qkv_bias ? kv : 0, p + "bk", c);
    check_size(l.bv, c.qkv_bias ? kv : 0, p + "bv", c);
    check_size(l.ffn_norm, d, p + "ffn_norm", c);
    check_size(l.w1, h * d, p + "w1", c);
    check_size(l.w2, d * h, p + "w2", c);
    check_size(l.w3, h * d, p + "w3", c);
  }
  check_size(final_norm, d, "final_norm", c);
  check_size(classifier, c.tied_classifier ? 0 : v * d, "classifier", c);
}

ModelWeights random_weights(const ModelConfig& config, std::uint64_t seed) {
  config.validate();
  ModelWeights w;
  w.config = config;
  const std::size_t d = static_cast<std::size_t>(config.dim),
                    h = static_cast<std::size_t>(config.hidden_dim),
                    kv = static_cast<std::size_t>(config.kv_dim()),
                    v = static_cast<std::size_t>(config.vocab_size);
  const float linear_d = 1.0f / std::sqrt(static_cast<float>(d));
  const float linear_h = 1.0f / std::sqrt(static_cast<float>(h));

  std::vector<FillJob> jobs;
  std::uint64_t tensor_id = 0;
  auto add = [&](std::vector<float>& t, std::size_t size, float stddev, float constant) {
    t.resize(size);
    jobs.push_back({&t, stddev, constant, mix_seed(seed, tensor_id++)});
  };
  // Embedding rows small as in GPT-2/Llama initialisation; pre-norm keeps the residual stream
  // bounded, and linears at 1/sqrt(fan_in) preserve the variance of their input.
  add(w.token_embedding, v * d, 0.02f, 0.0f);
  w.layers.resize(static_cast<std::size_t>(config.n_layers));
  for (LayerWeights& l : w.layers) {
    add(l.attn_norm, d, 0.0f, 1.0f);
    add(l.wq, d * d, linear_d, 0.0f);
    add(l.wk, kv * d, linear_d, 0.0f);
    add(l.wv, kv * d, linear_d, 0.0f);
    add(l.wo, d * d, linear_d, 0.0f);
    if (config.qkv_bias) {
      add(l.bq, d, 0.02f, 0.0f);
      add(l.bk, kv, 0.02f, 0.0f);
      add(l.bv, kv, 0.02f, 0.0f);
    }
    add(l.ffn_norm, d, 0.0f, 1.0f);
    add(l.w1, h * d, linear_d, 0.0f);
    add(l.w2, d * h, linear_h, 0.0f);
    add(l.w3, h * d, linear_d, 0.0f);
  }
  add(w.final_norm, d, 0.0f, 1.0f);
  if (!config.tied_classifier) add(w.classifier, v * d, linear_d, 0.0f);

  // Flatten (tensor, chunk) pairs so threads share the work evenly.
  std::vector<std::pair<std::size_t, std::size_t>> chunks;  // (job, chunk index)
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    const std::size_t n = jobs[j].tensor->size();
    for (std::size_t c = 0; c * kChunk < n; ++c) chunks.emplace_back(j, c);
  }
  ThreadPool pool;
  pool.parallel_for(chunks.size(), [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      const FillJob& job = jobs[chunks[i].first];
      const std::size_t c = chunks[i].second;
      float* data = job.tensor->data();
      const std::size_t lo = c * kChunk, hi = std::min(job.tensor->size(), lo + kChunk);
      if (job.stddev == 0.0f) {
        for (std::size_t k = lo; k < hi; ++k) data[k] = job.constant;
        continue;
      }
      Rng rng(mix_seed(job.seed, c));
      for (std::size_t k = lo; k < hi; ++k) data[k] = job.stddev * approx_normal(rng);
    }
  });
  w.source_bytes = 0;
  return w;
}

}  // namespace inferlab
