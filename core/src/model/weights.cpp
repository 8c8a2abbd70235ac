// ModelWeights checks and seeded random weights of any preset shape.
#include "inferlab/model/weights.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

#include "inferlab/error.h"
#include "inferlab/formats/formats.h"
#include "inferlab/support/rng.h"
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

// Chunk c of a tensor of n values (kChunk values per chunk, each from its own seed, so the split
// and not the thread count fixes the stream): `constant` when stddev is 0, else stddev times
// approximately normal draws.
void fill_chunk(float* data, std::size_t n, std::size_t c, float stddev, float constant, std::uint64_t seed) {
  const std::size_t lo = c * kChunk, hi = std::min(n, lo + kChunk);
  if (stddev == 0.0f) {
    for (std::size_t k = lo; k < hi; ++k) data[k] = constant;
    return;
  }
  Rng rng(mix_seed(seed, c));
  for (std::size_t k = lo; k < hi; ++k) data[k] = stddev * approx_normal(rng);
}

// One linear of the weights: its fp32 field, where its stored blocks live (map and key) and its
// shape. F and M are const for const weights.
template <typename F, typename M, typename S>
struct LinearRef {
  F* field = nullptr;  // null: not a linear of these weights
  M* map = nullptr;
  S* seeded_map = nullptr;
  std::string key;
  std::size_t rows = 0, cols = 0;
  std::shared_ptr<const SourceBlocks> shared() const {
    if (map == nullptr) return nullptr;
    const auto it = map->find(key);
    return it == map->end() ? nullptr : it->second;
  }
  const SourceBlocks* blocks() const { return shared().get(); }
  const SeededMatrix* seeded() const {
    if (seeded_map == nullptr) return nullptr;
    const auto it = seeded_map->find(key);
    return it == seeded_map->end() ? nullptr : &it->second;
  }
  // Held only as blocks or a seed: the field is empty and something else gives the values.
  bool lazy() const { return field->empty() && (blocks() != nullptr || seeded() != nullptr); }
};

// Resolves "layers.L.wq" .. "layers.L.w3", "classifier" and "embedding".
template <typename W, bool kConst = std::is_const_v<W>,
          typename F = std::conditional_t<kConst, const std::vector<float>, std::vector<float>>,
          typename M = std::conditional_t<kConst, const std::map<std::string, std::shared_ptr<const SourceBlocks>>,
                                          std::map<std::string, std::shared_ptr<const SourceBlocks>>>,
          typename S = std::conditional_t<kConst, const std::map<std::string, SeededMatrix>,
                                          std::map<std::string, SeededMatrix>>>
LinearRef<F, M, S> resolve(W& w, const std::string& name) {
  const ModelConfig& c = w.config;
  // Shapes of a config that validate() would refuse (no heads) are not computed.
  const auto d = static_cast<std::size_t>(c.dim), h = static_cast<std::size_t>(c.hidden_dim),
             kv = c.n_heads > 0 ? static_cast<std::size_t>(c.kv_dim()) : 0, v = static_cast<std::size_t>(c.vocab_size);
  LinearRef<F, M, S> r;
  if (name == "classifier" || name == "embedding") {
    r.field = name == "embedding" || c.tied_classifier ? &w.token_embedding : &w.classifier;
    r.map = &w.table_blocks;
    r.seeded_map = &w.table_seeded;
    // A tied table's blocks are the classifier's; an untied table's are the "embedding" linear's.
    r.key = c.tied_classifier ? "classifier" : name;
    r.rows = v;
    r.cols = d;
    return r;
  }
  constexpr std::string_view kPrefix = "layers.";
  if (name.rfind(kPrefix, 0) != 0) return r;
  const std::size_t dot = name.find('.', kPrefix.size());
  if (dot == std::string::npos || dot == kPrefix.size() || dot - kPrefix.size() > 9) return r;
  std::size_t layer = 0;
  for (std::size_t i = kPrefix.size(); i < dot; ++i) {
    if (name[i] < '0' || name[i] > '9') return r;
    layer = layer * 10 + static_cast<std::size_t>(name[i] - '0');
  }
  if (layer >= w.layers.size()) return r;
  auto& L = w.layers[layer];
  const std::string field = name.substr(dot + 1);
  struct Shape {
    const char* name;
    std::size_t rows, cols;
  };
  const Shape shapes[] = {{"wq", d, d}, {"wk", kv, d}, {"wv", kv, d}, {"wo", d, d},
                          {"w1", h, d}, {"w2", d, h},  {"w3", h, d}};
  F* fields[] = {&L.wq, &L.wk, &L.wv, &L.wo, &L.w1, &L.w2, &L.w3};
  for (std::size_t i = 0; i < std::size(shapes); ++i) {
    if (field != shapes[i].name) continue;
    r.field = fields[i];
    r.map = &L.blocks;
    r.seeded_map = &L.seeded;
    r.key = field;
    r.rows = shapes[i].rows;
    r.cols = shapes[i].cols;
  }
  return r;
}

// The names of every linear the weights hold (a tied table once, as "classifier").
std::vector<std::string> linear_names(const ModelWeights& w) {
  std::vector<std::string> names;
  for (std::size_t l = 0; l < w.layers.size(); ++l)
    for (const char* f : {"wq", "wk", "wv", "wo", "w1", "w2", "w3"})
      names.push_back("layers." + std::to_string(l) + "." + f);
  names.emplace_back("classifier");
  if (!w.config.tied_classifier) names.emplace_back("embedding");
  return names;
}

std::vector<float> dequantized(const SourceBlocks& b, std::size_t n, const std::string& name) {
  const auto type = static_cast<GgmlType>(b.ggml_type);
  check(ggml_type_supported(b.ggml_type) && b.bytes.size() == ggml_tensor_bytes(type, n),
        "model weights: the blocks of " + name + " (" + ggml_type_name(b.ggml_type) + ", " +
            std::to_string(b.bytes.size()) + " bytes) do not hold its " + std::to_string(n) + " values");
  std::vector<float> out(n);
  dequantize(type, b.bytes.data(), n, out.data());
  return out;
}

}  // namespace

const SourceBlocks* ModelWeights::source_blocks(const std::string& name) const { return resolve(*this, name).blocks(); }

std::shared_ptr<const SourceBlocks> ModelWeights::shared_source_blocks(const std::string& name) const {
  return resolve(*this, name).shared();
}

void ModelWeights::set_source_blocks(const std::string& name, SourceBlocks blocks) {
  const auto r = resolve(*this, name);
  check(r.field != nullptr, "model weights '" + config.name + "': no linear named '" + name + "' to hold blocks");
  (*r.map)[r.key] = std::make_shared<const SourceBlocks>(std::move(blocks));
}

// The values of a lazy matrix: its blocks dequantised or its seeded values drawn.
template <typename Ref>
std::vector<float> lazy_values(const Ref& r, const std::string& name) {
  if (const SourceBlocks* blocks = r.blocks()) return dequantized(*blocks, r.rows * r.cols, name);
  const SeededMatrix& s = *r.seeded();
  std::vector<float> out(r.rows * r.cols);
  ThreadPool pool;
  pool.parallel_for((out.size() + kChunk - 1) / kChunk, [&](std::size_t begin, std::size_t end) {
    for (std::size_t c = begin; c < end; ++c) fill_chunk(out.data(), out.size(), c, s.stddev, 0.0f, s.seed);
  });
  return out;
}

std::vector<float> ModelWeights::matrix(const std::string& name) const {
  const auto r = resolve(*this, name);
  check(r.field != nullptr, "model weights '" + config.name + "': no linear named '" + name + "'");
  return r.lazy() ? lazy_values(r, name) : *r.field;
}

bool ModelWeights::has_lazy_matrices() const {
  for (const std::string& name : linear_names(*this))
    if (resolve(*this, name).lazy()) return true;
  return false;
}

void ModelWeights::materialize() {
  for (const std::string& name : linear_names(*this)) {
    const auto r = resolve(*this, name);
    if (r.lazy()) *r.field = lazy_values(r, name);
  }
}

void ModelWeights::validate() const {
  const ModelConfig& c = config;
  c.validate();
  const std::size_t d = static_cast<std::size_t>(c.dim), kv = static_cast<std::size_t>(c.kv_dim());
  // A matrix held only as blocks counts by the values its blocks encode.
  auto check_matrix = [&](const std::string& linear, const std::string& label) {
    const auto r = resolve(*this, linear);
    if (!r.lazy()) return check_size(*r.field, r.rows * r.cols, label, c);
    const SourceBlocks* b = r.blocks();
    if (b == nullptr) return;  // seeded: drawn at the shape
    const auto type = static_cast<GgmlType>(b->ggml_type);
    const std::size_t n = r.rows * r.cols;
    check(ggml_type_supported(b->ggml_type) && n % ggml_block_elements(type) == 0 &&
              b->bytes.size() == ggml_tensor_bytes(type, n),
          "model weights '" + c.name + "': " + label + " has " + std::to_string(b->bytes.size()) + " bytes of " +
              ggml_type_name(b->ggml_type) + " blocks, config needs " + std::to_string(n) + " values");
  };
  check_matrix("embedding", "token_embedding");
  check(layers.size() == static_cast<std::size_t>(c.n_layers),
        "model weights '" + c.name + "': " + std::to_string(layers.size()) + " layers, config needs " +
            std::to_string(c.n_layers));
  for (std::size_t i = 0; i < layers.size(); ++i) {
    const LayerWeights& l = layers[i];
    const std::string p = "layers." + std::to_string(i) + ".";
    check_size(l.attn_norm, d, p + "attn_norm", c);
    for (const char* f : {"wq", "wk", "wv", "wo", "w1", "w2", "w3"}) check_matrix(p + f, p + f);
    check_size(l.bq, c.qkv_bias ? d : 0, p + "bq", c);
    check_size(l.bk, c.qkv_bias ? kv : 0, p + "bk", c);
    check_size(l.bv, c.qkv_bias ? kv : 0, p + "bv", c);
    check_size(l.ffn_norm, d, p + "ffn_norm", c);
  }
  check_size(final_norm, d, "final_norm", c);
  if (c.tied_classifier) check_size(classifier, 0, "classifier", c);
  else check_matrix("classifier", "classifier");
}

namespace {

// Seeded random weights; `seeded_matrices`: the matrices as SeededMatrix entries (same ids,
// so the same values when drawn).
ModelWeights draw_weights(const ModelConfig& config, std::uint64_t seed, bool seeded_matrices) {
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
  // A matrix: drawn now, or recorded under `key` of `seeded` to be drawn when asked.
  auto matrix = [&](std::vector<float>& t, std::map<std::string, SeededMatrix>& seeded, const char* key,
                    std::size_t size, float stddev) {
    if (seeded_matrices) seeded[key] = SeededMatrix{mix_seed(seed, tensor_id++), stddev};
    else add(t, size, stddev, 0.0f);
  };
  // Embedding rows small as in GPT-2/Llama initialisation; pre-norm keeps the residual stream
  // bounded, and linears at 1/sqrt(fan_in) preserve the variance of their input.
  matrix(w.token_embedding, w.table_seeded, config.tied_classifier ? "classifier" : "embedding", v * d, 0.02f);
  w.layers.resize(static_cast<std::size_t>(config.n_layers));
  for (LayerWeights& l : w.layers) {
    add(l.attn_norm, d, 0.0f, 1.0f);
    matrix(l.wq, l.seeded, "wq", d * d, linear_d);
    matrix(l.wk, l.seeded, "wk", kv * d, linear_d);
    matrix(l.wv, l.seeded, "wv", kv * d, linear_d);
    matrix(l.wo, l.seeded, "wo", d * d, linear_d);
    if (config.qkv_bias) {
      add(l.bq, d, 0.02f, 0.0f);
      add(l.bk, kv, 0.02f, 0.0f);
      add(l.bv, kv, 0.02f, 0.0f);
    }
    add(l.ffn_norm, d, 0.0f, 1.0f);
    matrix(l.w1, l.seeded, "w1", h * d, linear_d);
    matrix(l.w2, l.seeded, "w2", d * h, linear_h);
    matrix(l.w3, l.seeded, "w3", h * d, linear_d);
  }
  add(w.final_norm, d, 0.0f, 1.0f);
  if (!config.tied_classifier) matrix(w.classifier, w.table_seeded, "classifier", v * d, linear_d);

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
      fill_chunk(job.tensor->data(), job.tensor->size(), chunks[i].second, job.stddev, job.constant, job.seed);
    }
  });
  w.source_bytes = 0;
  return w;
}

}  // namespace

ModelWeights random_weights(const ModelConfig& config, std::uint64_t seed) { return draw_weights(config, seed, false); }

ModelWeights seeded_weights(const ModelConfig& config, std::uint64_t seed) { return draw_weights(config, seed, true); }

}  // namespace inferlab
