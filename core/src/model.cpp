// The Llama-family forward pass over one flattened step batch (see inferlab/model.h).
#include "inferlab/model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "inferlab/error.h"
#include "kernels/ref/ops.h"

namespace inferlab {

struct Model::Layer {
  std::vector<float> attn_norm, ffn_norm;  // [dim]
  std::vector<float> bq, bk, bv;           // [out] or empty
  std::unique_ptr<Linear> wq, wk, wv, wo, w1, w2, w3;
};

namespace {

std::unique_ptr<Linear> build(Quantization& quant, const std::string& name, const std::vector<float>& w,
                              int out, int in) {
  std::unique_ptr<Linear> linear = quant.make_linear(name, w, out, in);
  check(linear != nullptr, "quantization returned no linear for " + name);
  check(linear->out_features() == out && linear->in_features() == in,
        "quantization built " + name + " as [" + std::to_string(linear->out_features()) + ", " +
            std::to_string(linear->in_features()) + "], expected [" + std::to_string(out) + ", " +
            std::to_string(in) + "]");
  return linear;
}

// y[r, :] += b for each of `rows` rows of width b.size().
void add_bias(float* y, const std::vector<float>& b, int rows) {
  if (b.empty()) return;
  const std::size_t w = b.size();
  for (int r = 0; r < rows; ++r)
    for (std::size_t i = 0; i < w; ++i) y[static_cast<std::size_t>(r) * w + i] += b[i];
}

// Rotates n_heads heads of `vec` with the per-pair cos/sin of one position ([head_dim/2] each).
void apply_rope(float* vec, int n_heads, int head_dim, const float* cos, const float* sin, RopeStyle style) {
  const int half = head_dim / 2;
  const int stride = style == RopeStyle::kInterleaved ? 2 : 1;  // distance between pair starts
  const int offset = style == RopeStyle::kInterleaved ? 1 : half;  // partner of element a
  for (int h = 0; h < n_heads; ++h) {
    float* v = vec + static_cast<std::size_t>(h) * head_dim;
    for (int j = 0; j < half; ++j) {
      const int a = j * stride;
      const float v0 = v[a], v1 = v[a + offset];
      v[a] = v0 * cos[j] - v1 * sin[j];
      v[a + offset] = v0 * sin[j] + v1 * cos[j];
    }
  }
}

}  // namespace

Model::Model(const ModelWeights& weights, Quantization& quant) : config_(weights.config) {
  weights.validate();
  const int d = config_.dim, h = config_.hidden_dim, kv = config_.kv_dim(), v = config_.vocab_size;
  embedding_ = weights.token_embedding;
  final_norm_ = weights.final_norm;
  for (int l = 0; l < config_.n_layers; ++l) {
    const LayerWeights& src = weights.layers[static_cast<std::size_t>(l)];
    const std::string p = "layers." + std::to_string(l) + ".";
    auto layer = std::make_unique<Layer>();
    layer->attn_norm = src.attn_norm;
    layer->ffn_norm = src.ffn_norm;
    layer->bq = src.bq;
    layer->bk = src.bk;
    layer->bv = src.bv;
    layer->wq = build(quant, p + "wq", src.wq, d, d);
    layer->wk = build(quant, p + "wk", src.wk, kv, d);
    layer->wv = build(quant, p + "wv", src.wv, kv, d);
    layer->wo = build(quant, p + "wo", src.wo, d, d);
    layer->w1 = build(quant, p + "w1", src.w1, h, d);
    layer->w2 = build(quant, p + "w2", src.w2, d, h);
    layer->w3 = build(quant, p + "w3", src.w3, h, d);
    layers_.push_back(std::move(layer));
  }
  classifier_ = build(quant, "classifier", config_.tied_classifier ? weights.token_embedding : weights.classifier,
                      v, d);
  const int hd = config_.head_dim();
  inv_freq_.resize(static_cast<std::size_t>(hd / 2));
  for (int j = 0; j < hd / 2; ++j)  // the float expression of llama2.c run.c
    inv_freq_[static_cast<std::size_t>(j)] =
        1.0f / std::pow(config_.rope_theta, static_cast<float>(2 * j) / static_cast<float>(hd));
}

Model::~Model() = default;

std::uint64_t Model::weight_bytes() const {
  std::uint64_t floats = embedding_.size() + final_norm_.size();
  std::uint64_t bytes = classifier_->weight_bytes();
  for (const auto& l : layers_) {
    floats += l->attn_norm.size() + l->ffn_norm.size() + l->bq.size() + l->bk.size() + l->bv.size();
    for (const Linear* lin : {l->wq.get(), l->wk.get(), l->wv.get(), l->wo.get(), l->w1.get(), l->w2.get(),
                              l->w3.get()})
      bytes += lin->weight_bytes();
  }
  return bytes + floats * sizeof(float);
}

void Model::forward(const StepBatch& batch, KvCache& kv, Attention& attention, ThreadPool& pool,
                    std::vector<float>& logits) {
  const int rows = batch.rows(), n_seqs = batch.n_seqs();
  const int d = config_.dim, h = config_.hidden_dim, kvd = config_.kv_dim(), hd = config_.head_dim();
  const std::size_t sd = static_cast<std::size_t>(d), skv = static_cast<std::size_t>(kvd),
                    sh = static_cast<std::size_t>(h), srows = static_cast<std::size_t>(rows);
  check(batch.positions.size() == srows && batch.slots.size() == srows,
        "step batch: tokens, positions and slots must have one entry per row");
  check(batch.query_start.size() == static_cast<std::size_t>(n_seqs) + 1 && batch.query_start.back() == rows &&
            batch.block_tables.size() == static_cast<std::size_t>(n_seqs),
        "step batch: query_start must hold n_seqs + 1 offsets ending at rows, and one block table per sequence");
  const long long kv_slots = static_cast<long long>(kv.config().num_blocks) * kv.block_size();
  for (int r = 0; r < rows; ++r) {
    const int t = batch.tokens[static_cast<std::size_t>(r)], s = batch.slots[static_cast<std::size_t>(r)];
    check(t >= 0 && t < config_.vocab_size,
          "step batch: token " + std::to_string(t) + " outside the vocabulary of " + std::to_string(config_.vocab_size));
    check(s >= 0 && s < kv_slots, "step batch: KV slot " + std::to_string(s) + " outside the cache");
    check(batch.positions[static_cast<std::size_t>(r)] >= 0, "step batch: negative position");
  }
  int last = -1;
  for (int r : batch.logit_rows) {
    check(r > last && r < rows, "step batch: logit_rows must be ascending rows of the batch");
    last = r;
  }
  const std::size_t n_logits = batch.logit_rows.size();
  logits.resize(n_logits * static_cast<std::size_t>(config_.vocab_size));
  if (rows == 0) return;

  // Scratch only grows; after warm-up at the largest batch no step allocates.
  x_.resize(srows * sd);    // [rows, dim] residual stream
  xn_.resize(srows * sd);   // [rows, dim] normed input of a block
  q_.resize(srows * sd);    // [rows, n_heads, head_dim]
  k_.resize(srows * skv);   // [rows, n_kv_heads, head_dim]
  v_.resize(srows * skv);   // [rows, n_kv_heads, head_dim]
  att_.resize(srows * sd);  // [rows, n_heads, head_dim]
  h1_.resize(srows * sh);   // [rows, hidden]
  h3_.resize(srows * sh);   // [rows, hidden]
  tmp_.resize(srows * std::max<std::size_t>(sd, static_cast<std::size_t>(hd)));  // [rows, dim]

  for (int r = 0; r < rows; ++r)
    std::memcpy(&x_[static_cast<std::size_t>(r) * sd],
                &embedding_[static_cast<std::size_t>(batch.tokens[static_cast<std::size_t>(r)]) * sd],
                sd * sizeof(float));

  AttentionBatch ab;
  ab.query_start = batch.query_start;
  ab.context_len = batch.context_len;
  ab.block_tables = batch.block_tables;
  ab.n_heads = config_.n_heads;
  ab.n_kv_heads = config_.n_kv_heads;
  ab.head_dim = hd;
  ab.scale = 1.0f / std::sqrt(static_cast<float>(hd));

  const int half = hd / 2;
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    Layer& layer = *layers_[l];
    for (int r = 0; r < rows; ++r)
      ref::rmsnorm(&xn_[static_cast<std::size_t>(r) * sd], &x_[static_cast<std::size_t>(r) * sd],
                   layer.attn_norm.data(), d, config_.norm_eps);
    layer.wq->forward(xn_.data(), q_.data(), rows, pool);
    layer.wk->forward(xn_.data(), k_.data(), rows, pool);
    layer.wv->forward(xn_.data(), v_.data(), rows, pool);
    add_bias(q_.data(), layer.bq, rows);
    add_bias(k_.data(), layer.bk, rows);
    add_bias(v_.data(), layer.bv, rows);

    // RoPE: per row, cos/sin of each pair at the row's position (tmp_ is free until wo).
    for (int r = 0; r < rows; ++r) {
      float* cos = &tmp_[static_cast<std::size_t>(r) * static_cast<std::size_t>(hd)];
      float* sin = cos + half;
      const float pos = static_cast<float>(batch.positions[static_cast<std::size_t>(r)]);
      for (int j = 0; j < half; ++j) {
        const float angle = pos * inv_freq_[static_cast<std::size_t>(j)];
        cos[j] = std::cos(angle);
        sin[j] = std::sin(angle);
      }
      apply_rope(&q_[static_cast<std::size_t>(r) * sd], config_.n_heads, hd, cos, sin, config_.rope_style);
      apply_rope(&k_[static_cast<std::size_t>(r) * skv], config_.n_kv_heads, hd, cos, sin, config_.rope_style);
      const int slot = batch.slots[static_cast<std::size_t>(r)];
      std::memcpy(kv.k_slot(static_cast<int>(l), slot), &k_[static_cast<std::size_t>(r) * skv], skv * sizeof(float));
      std::memcpy(kv.v_slot(static_cast<int>(l), slot), &v_[static_cast<std::size_t>(r) * skv], skv * sizeof(float));
    }

    attention.forward(ab, kv.layer(static_cast<int>(l)), q_.data(), att_.data(), pool);
    layer.wo->forward(att_.data(), tmp_.data(), rows, pool);
    for (std::size_t i = 0; i < srows * sd; ++i) x_[i] += tmp_[i];

    for (int r = 0; r < rows; ++r)
      ref::rmsnorm(&xn_[static_cast<std::size_t>(r) * sd], &x_[static_cast<std::size_t>(r) * sd],
                   layer.ffn_norm.data(), d, config_.norm_eps);
    layer.w1->forward(xn_.data(), h1_.data(), rows, pool);
    layer.w3->forward(xn_.data(), h3_.data(), rows, pool);
    ref::swiglu(h1_.data(), h3_.data(), rows * h);
    layer.w2->forward(h1_.data(), tmp_.data(), rows, pool);
    for (std::size_t i = 0; i < srows * sd; ++i) x_[i] += tmp_[i];
  }

  if (n_logits == 0) return;
  for (std::size_t i = 0; i < n_logits; ++i)
    ref::rmsnorm(&xn_[i * sd], &x_[static_cast<std::size_t>(batch.logit_rows[i]) * sd], final_norm_.data(), d,
                 config_.norm_eps);
  classifier_->forward(xn_.data(), logits.data(), static_cast<int>(n_logits), pool);
}

}  // namespace inferlab
