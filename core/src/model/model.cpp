// The Llama-family forward pass over one flattened step batch (see inferlab/model/model.h). Every
// op runs on the model's device and is timed there by category.
#include "inferlab/model/model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <span>
#include <string>

#include "inferlab/error.h"
#include "kernels/ref/matmul_int8.h"
#include "model/model_pass.h"

namespace inferlab {

struct Model::Layer {
  Buffer attn_norm, ffn_norm;  // [dim]
  Buffer bq, bk, bv;           // [out] or empty
  std::unique_ptr<Linear> wq, wk, wv, wo, w1, w2, w3;
};

namespace {

// Builds linear `name` from its fp32 values, made only now for a lazy matrix (a GGUF's blocks
// dequantised, a preset's seeded values drawn: one matrix at a time) and not at all when the
// strategy runs the stored blocks themselves.
std::unique_ptr<Linear> build(Quantization& quant, const CalibrationSet* calibration, const ModelWeights& weights,
                              const std::string& name, int out, int in) {
  std::vector<float> w = quant.needs_values(name) ? weights.matrix(name) : std::vector<float>{};
  const LinearCalibration* calib = calibration ? calibration->find(name) : nullptr;
  check(calib == nullptr || calib->in == in, "calibration of " + name + " has " +
                                                 std::to_string(calib ? calib->in : 0) + " input channels, expected " +
                                                 std::to_string(in));
  std::unique_ptr<Linear> linear = quant.make_linear(name, std::move(w), out, in, calib);
  check(linear != nullptr, "quantization returned no linear for " + name);
  check(linear->out_features() == out && linear->in_features() == in,
        "quantization built " + name + " as [" + std::to_string(linear->out_features()) + ", " +
            std::to_string(linear->in_features()) + "], expected [" + std::to_string(out) + ", " +
            std::to_string(in) + "]");
  return linear;
}

Buffer to_device(Device& device, const std::vector<float>& host) {
  Buffer b(device, host.size() * sizeof(float));
  device.copy_to_device(b.data(), host.data(), host.size() * sizeof(float));
  return b;
}

}  // namespace

Model::Model(const ModelWeights& weights, Quantization& quant, Device& device, const CalibrationSet* calibration)
    : config_(weights.config), device_(compute_device(device, "model")) {
  weights.validate();
  const int d = config_.dim, h = config_.hidden_dim, kv = config_.kv_dim(), v = config_.vocab_size;
  final_norm_ = to_device(device_, weights.final_norm);
  for (int l = 0; l < config_.n_layers; ++l) {
    const LayerWeights& src = weights.layers[static_cast<std::size_t>(l)];
    const std::string p = "layers." + std::to_string(l) + ".";
    auto layer = std::make_unique<Layer>();
    layer->attn_norm = to_device(device_, src.attn_norm);
    layer->ffn_norm = to_device(device_, src.ffn_norm);
    layer->bq = to_device(device_, src.bq);
    layer->bk = to_device(device_, src.bk);
    layer->bv = to_device(device_, src.bv);
    layer->wq = build(quant, calibration, weights, p + "wq", d, d);
    layer->wk = build(quant, calibration, weights, p + "wk", kv, d);
    layer->wv = build(quant, calibration, weights, p + "wv", kv, d);
    layer->wo = build(quant, calibration, weights, p + "wo", d, d);
    layer->w1 = build(quant, calibration, weights, p + "w1", h, d);
    layer->w2 = build(quant, calibration, weights, p + "w2", d, h);
    layer->w3 = build(quant, calibration, weights, p + "w3", h, d);
    layers_.push_back(std::move(layer));
  }
  classifier_ = build(quant, calibration, weights, "classifier", v, d);
  // The embedding table is stored once, in the quantization's format: a tied classifier is the
  // table (the lookup reads its rows, Linear::dequantize_row); a separate one leaves the table a
  // linear of its own that only ever serves rows (quantization rules may name it "embedding").
  if (!config_.tied_classifier) embedding_ = build(quant, calibration, weights, "embedding", v, d);
  const int hd = config_.head_dim();
  std::vector<float> inv_freq(static_cast<std::size_t>(hd / 2));
  for (int j = 0; j < hd / 2; ++j)  // the float expression of llama2.c run.c
    inv_freq[static_cast<std::size_t>(j)] =
        1.0f / std::pow(config_.rope_theta, static_cast<float>(2 * j) / static_cast<float>(hd));
  inv_freq_ = to_device(device_, inv_freq);
}

Model::~Model() = default;

double Model::steady_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

std::uint64_t Model::weight_bytes() const {
  std::uint64_t bytes = embedding_bytes() + final_norm_.bytes() + classifier_->weight_bytes();
  for (const auto& l : layers_) {
    bytes += l->attn_norm.bytes() + l->ffn_norm.bytes() + l->bq.bytes() + l->bk.bytes() + l->bv.bytes();
    for (const Linear* lin : {l->wq.get(), l->wk.get(), l->wv.get(), l->wo.get(), l->w1.get(), l->w2.get(),
                              l->w3.get()})
      bytes += lin->weight_bytes();
  }
  return bytes;
}

std::vector<const Linear*> Model::linears() const {
  std::vector<const Linear*> out;
  for (const auto& l : layers_)
    for (const Linear* lin : {l->wq.get(), l->wk.get(), l->wv.get(), l->wo.get(), l->w1.get(), l->w2.get(), l->w3.get()})
      out.push_back(lin);
  out.push_back(classifier_.get());
  return out;
}

std::uint64_t Model::embedding_bytes() const { return embedding_ ? embedding_->weight_bytes() : 0; }

const int* Model::upload(const std::vector<int>& host, Buffer& staging) {
  if (device_.kind() == DeviceKind::kCpu) return host.data();
  const std::size_t bytes = host.size() * sizeof(int);
  if (staging.bytes() < bytes) staging = Buffer(device_, bytes);
  device_.copy_to_device(staging.data(), host.data(), bytes);
  return staging.as<int>();
}

float* Model::scratch(Buffer& buffer, std::size_t floats) {
  if (buffer.bytes() < floats * sizeof(float)) buffer = Buffer(device_, floats * sizeof(float));
  return buffer.as<float>();
}

void Model::forward(const StepBatch& batch, KvStorage& kv, Attention& attention, std::vector<float>& logits) {
  run_forward(batch, kv, attention, logits, nullptr);
}

bool Model::chooses_tokens() const { return device_.chooses_tokens() && !(plan_ != nullptr && plan_->has_exits()); }

void Model::forward_choosing(const StepBatch& batch, KvStorage& kv, Attention& attention, const TokenChoice& choice,
                             std::span<const double> draws, std::vector<int>& tokens) {
  check(chooses_tokens(), [&] {
    return std::string("model forward_choosing: device '") + device_kind_name(device_.kind()) +
           (device_.chooses_tokens() ? "' chooses tokens, but the layer plan exits early" : "' does not choose tokens");
  });
  check(choice.kind != TokenChoice::Kind::kNone, "model forward_choosing: no choice to make (kind none)");
  check(draws.size() == batch.logit_rows.size(), [&] {
    return "model forward_choosing: " + std::to_string(draws.size()) + " draws for " +
           std::to_string(batch.logit_rows.size()) + " logit rows; allowed: one per logit row";
  });
  const Choosing choosing{choice, draws, &tokens};
  std::vector<float> no_logits;  // no early exit: nothing writes host logits
  run_forward(batch, kv, attention, no_logits, &choosing);
}

void Model::run_forward(const StepBatch& batch, KvStorage& kv, Attention& attention, std::vector<float>& logits,
                        const Choosing* choosing) {
  const double t0 = steady_s();
  check_step_batch(batch, kv);
  const std::size_t n_logits = batch.logit_rows.size();
  if (choosing != nullptr)
    choosing->tokens->assign(n_logits, -1);
  else
    logits.resize(n_logits * static_cast<std::size_t>(config_.vocab_size));
  if (batch.rows() == 0) return;
  host_mark_s_ = -1;
  if (!(device_.cuda_graphs() && graph_step(batch, kv, attention, logits, choosing))) {
    Pass p = begin_pass(batch);
    run_layers(p, batch, kv, attention, logits);
    if (plan_ != nullptr && p.exits) {
      for (std::size_t i = 0; i < n_logits; ++i) plan_->layers_run_sum += depth_[i];
      plan_->logit_rows += static_cast<long long>(n_logits);
    }
    if (choosing == nullptr) {
      remaining_logits(batch, p.x, logits);
    } else if (n_logits > 0) {
      const int* tokens =
          choose_rows_on_device(p.x, batch.logit_rows, choosing->choice, stage_draws(choosing->draws, n_logits));
      host_mark_s_ = steady_s();
      device_.copy_to_host(choosing->tokens->data(), tokens, n_logits * sizeof(int));
    }
  }
  stats_.forwards++;
  stats_.host_s += (host_mark_s_ >= 0 ? host_mark_s_ : steady_s()) - t0;
}

Model::ForwardStats Model::forward_stats() const {
  ForwardStats s = stats_;
  s.graph_captures = graphs_.captures();
  s.graph_replays = graphs_.replays();
  return s;
}

// Every layer (but those the plan skips) over the pass's rows, then the pending residual add.
void Model::run_layers(Pass& p, const StepBatch& batch, KvStorage& kv, Attention& attention,
                       std::vector<float>& logits) {
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    if (plan_ != nullptr && plan_->skips(static_cast<int>(l))) continue;  // no compute, no K/V
    if (!attention_block(p, static_cast<int>(l), kv, attention)) continue;
    feed_forward_block(p, static_cast<int>(l));
    add_residual_and_exit(p, static_cast<int>(l), batch, logits);
  }
  if (p.pending != nullptr) {
    OpScope t(device_, TimeCategory::kNormRopeAct);
    device_.add(p.x, p.pending, p.srows * static_cast<std::size_t>(config_.dim));
  }
}

// Throws Error unless the batch is well formed for this model and `kv` (one position and slot
// per row, offsets and block table of n_seqs, tokens in the vocabulary, slots in the cache,
// logit rows ascending).
void Model::check_step_batch(const StepBatch& batch, const KvStorage& kv) const {
  const int rows = batch.rows(), n_seqs = batch.n_seqs();
  const std::size_t srows = static_cast<std::size_t>(rows);
  check(&kv.device() == &device_, "model forward: the KV storage lives on another device");
  check(batch.positions.size() == srows && batch.slots.size() == srows,
        "step batch: tokens, positions and slots must have one entry per row");
  check(batch.query_start.size() == static_cast<std::size_t>(n_seqs) + 1 && batch.query_start.back() == rows &&
            batch.block_table.size() == static_cast<std::size_t>(n_seqs) * static_cast<std::size_t>(batch.max_blocks),
        "step batch: query_start must hold n_seqs + 1 offsets ending at rows, and the block table n_seqs rows");
  const long long kv_slots = kv.slots();
  for (int r = 0; r < rows; ++r) {
    const int t = batch.tokens[static_cast<std::size_t>(r)], s = batch.slots[static_cast<std::size_t>(r)];
    check(t >= 0 && t < config_.vocab_size, [&] {  // per row and step: the message only on failure
      return "step batch: token " + std::to_string(t) + " outside the vocabulary of " + std::to_string(config_.vocab_size);
    });
    check(s >= 0 && s < kv_slots, [&] { return "step batch: KV slot " + std::to_string(s) + " outside the cache"; });
    check(batch.positions[static_cast<std::size_t>(r)] >= 0, "step batch: negative position");
  }
  int last = -1;
  for (int r : batch.logit_rows) {
    check(r > last && r < rows, "step batch: logit_rows must be ascending rows of the batch");
    last = r;
  }
}

// The pass over a non-empty batch: scratch bound (it only grows; after warm-up at the largest
// batch no step allocates), the batch's arrays on the device, the tokens embedded into x, and
// the fused and early-exit state reset.
Model::Pass Model::begin_pass(const StepBatch& batch) {
  Pass p(device_);
  p.rows = batch.rows();
  p.srows = static_cast<std::size_t>(p.rows);
  const std::size_t sd = static_cast<std::size_t>(config_.dim), skv = static_cast<std::size_t>(config_.kv_dim()),
                    sh = static_cast<std::size_t>(config_.hidden_dim), srows = p.srows;
  p.x = scratch(x_, srows * sd);
  p.xn = scratch(xn_, srows * sd);
  p.q = scratch(q_, srows * sd);
  p.k = scratch(k_, srows * skv);
  p.v = scratch(v_, srows * skv);
  p.att = scratch(att_, srows * sd);
  p.h1 = scratch(h1_, srows * sh);
  p.h3 = scratch(h3_, srows * sh);
  p.tmp = scratch(tmp_, srows * sd);
  p.positions = upload(batch.positions, d_positions_);
  p.slots = upload(batch.slots, d_slots_);
  p.ab = batch.attention(config_.n_heads, config_.n_kv_heads, config_.head_dim());
  if (device_.kind() != DeviceKind::kCpu) {
    p.ab.query_start = {upload(batch.query_start, d_query_start_), batch.query_start.size()};
    p.ab.context_len = {upload(batch.context_len, d_context_len_), batch.context_len.size()};
    p.ab.block_table = {upload(batch.block_table, d_block_table_), batch.block_table.size()};
    p.ab.host_query_start = batch.query_start;
    p.ab.host_context_len = batch.context_len;
    p.ab.host_block_table = batch.block_table;
  }
  {
    OpScope t(device_, TimeCategory::kNormRopeAct);
    embed(batch.tokens, p.x);
  }
  p.fuse = device_.fuse();
  const std::size_t width = std::max(sd, sh);
  if (p.fuse) {
    if (act_q_.bytes() < srows * width) act_q_ = Buffer(device_, srows * width);
    p.act_q = act_q_.as<std::int8_t>();
    p.act_s = scratch(act_s_, srows * static_cast<std::size_t>(ref::act_blocks(static_cast<int>(width))));
  }
  const std::size_t n_logits = batch.logit_rows.size();
  p.exits = plan_ != nullptr && plan_->has_exits() && n_logits > 0;
  p.frozen = p.exits ? scratch(frozen_, srows * sd) : nullptr;
  exited_.assign(srows, 0);
  depth_.assign(n_logits, static_cast<int>(layers_.size()));
  n_exited_ = 0;
  return p;
}

// Layer l's attention half: RMSNorm (adding the pending residual when fused), q/k/v, biases,
// RoPE and the K/V write; then attention and wo into p.tmp. Returns false when every row has
// exited, after the K/V write: the layer only fills K/V from the frozen states (CALM).
bool Model::attention_block(Pass& p, int l, KvStorage& kv, Attention& attention) {
  ComputeDevice& dev = device_;
  Layer& layer = *layers_[static_cast<std::size_t>(l)];
  const int rows = p.rows, d = config_.dim, kvd = config_.kv_dim(), hd = config_.head_dim();
  const bool kv_only = p.exits && n_exited_ == rows;
  const bool qkv_blocks = p.fuse && (kv_only || layer.wq->reads_act_blocks()) && layer.wk->reads_act_blocks() &&
                          layer.wv->reads_act_blocks();
  {
    OpScope t(dev, TimeCategory::kNormRopeAct);
    if (p.fuse)
      dev.residual_rmsnorm(p.x, p.pending, layer.attn_norm.as<float>(), qkv_blocks ? nullptr : p.xn,
                           qkv_blocks ? p.act_q : nullptr, p.act_s, rows, d, config_.norm_eps);
    else
      dev.rmsnorm(p.x, layer.attn_norm.as<float>(), p.xn, rows, d, config_.norm_eps);
    p.pending = nullptr;
  }
  const GroupMember qkv[] = {{layer.wq.get(), p.q}, {layer.wk.get(), p.k}, {layer.wv.get(), p.v}};
  p.group_linear(std::span<const GroupMember>(qkv).subspan(kv_only ? 1 : 0), qkv_blocks);  // [rows, dim|kv_dim] each
  {
    OpScope t(dev, TimeCategory::kNormRopeAct);
    if (layer.bq.bytes() > 0 && !kv_only) dev.add_bias(p.q, layer.bq.as<float>(), rows, d);
    if (layer.bk.bytes() > 0) dev.add_bias(p.k, layer.bk.as<float>(), rows, kvd);
    if (layer.bv.bytes() > 0) dev.add_bias(p.v, layer.bv.as<float>(), rows, kvd);
    float *k_cache = nullptr, *v_cache = nullptr;
    void *k_half = nullptr, *v_half = nullptr;
    KvDtype half = KvDtype::kF16;
    if (p.fuse && kv.f32_layer(l, k_cache, v_cache)) {
      dev.rope_kv_write_f32(p.q, p.k, p.v, p.positions, p.slots, rows, config_.n_heads, config_.n_kv_heads, hd,
                            inv_freq_.as<float>(), config_.rope_style, k_cache, v_cache);
    } else if (p.fuse && kv.half_layer(l, half, k_half, v_half)) {
      dev.rope_kv_write_half(half, p.q, p.k, p.v, p.positions, p.slots, rows, config_.n_heads, config_.n_kv_heads,
                             hd, inv_freq_.as<float>(), config_.rope_style, k_half, v_half);
    } else {
      dev.rope(p.q, p.k, p.positions, rows, config_.n_heads, config_.n_kv_heads, hd, inv_freq_.as<float>(),
               config_.rope_style);
      kv.write(l, p.k, p.v, p.slots, rows);
    }
  }
  if (kv_only) return false;
  {
    OpScope t(dev, TimeCategory::kAttention);
    attention.forward(p.ab, kv.layer(l), p.q, p.att, dev);
  }
  p.linear(*layer.wo, p.att, p.tmp);
  return true;
}

// Layer l's feed-forward half on x + p.tmp: RMSNorm (taking the attention's residual add), the
// gate and up projections, SwiGLU and w2, whose output is left in p.tmp.
void Model::feed_forward_block(Pass& p, int l) {
  ComputeDevice& dev = device_;
  Layer& layer = *layers_[static_cast<std::size_t>(l)];
  const int rows = p.rows, d = config_.dim, h = config_.hidden_dim;
  const bool gate_up_blocks = p.fuse && layer.w1->reads_act_blocks() && layer.w3->reads_act_blocks();
  {
    OpScope t(dev, TimeCategory::kNormRopeAct);
    if (p.fuse) {
      dev.residual_rmsnorm(p.x, p.tmp, layer.ffn_norm.as<float>(), gate_up_blocks ? nullptr : p.xn,
                           gate_up_blocks ? p.act_q : nullptr, p.act_s, rows, d, config_.norm_eps);
    } else {
      dev.add(p.x, p.tmp, p.srows * static_cast<std::size_t>(d));
      dev.rmsnorm(p.x, layer.ffn_norm.as<float>(), p.xn, rows, d, config_.norm_eps);
    }
  }
  const GroupMember gate_up[] = {{layer.w1.get(), p.h1}, {layer.w3.get(), p.h3}};  // [rows, hidden] each
  p.group_linear(gate_up, gate_up_blocks);
  const bool down_blocks = p.fuse && layer.w2->reads_act_blocks();
  {
    OpScope t(dev, TimeCategory::kNormRopeAct);
    if (down_blocks)
      dev.swiglu_quantize(p.h1, p.h3, p.act_q, p.act_s, rows, h);
    else
      dev.swiglu(p.h1, p.h3, p.srows * static_cast<std::size_t>(h));
  }
  if (down_blocks)
    p.blocks_linear(*layer.w2, p.tmp);
  else
    p.linear(*layer.w2, p.h1, p.tmp);
}

// The FFN output p.tmp into the residual stream: left pending when fused without exits (the
// next layer's RMSNorm, or the flush after the last, adds it); else added here, exited rows'
// states restored, and the logit rows tried for an early exit after layer l.
void Model::add_residual_and_exit(Pass& p, int l, const StepBatch& batch, std::vector<float>& logits) {
  if (p.fuse && !p.exits) {
    p.pending = p.tmp;
    return;
  }
  const std::size_t sd = static_cast<std::size_t>(config_.dim);
  {
    OpScope t(device_, TimeCategory::kNormRopeAct);
    device_.add(p.x, p.tmp, p.srows * sd);
    // Rows that exited ran this layer with the others (a mixed batch); their state stays put.
    for (int r = 0; n_exited_ > 0 && r < p.rows; ++r)
      if (exited_[static_cast<std::size_t>(r)])
        device_.copy_on_device(p.x + static_cast<std::size_t>(r) * sd, p.frozen + static_cast<std::size_t>(r) * sd,
                               sd * sizeof(float));
  }
  if (!p.exits) return;
  const auto& after = plan_->exit_after;
  while (p.next_exit < after.size() && after[p.next_exit] < l) ++p.next_exit;
  if (p.next_exit < after.size() && after[p.next_exit] == l && static_cast<std::size_t>(l) + 1 < layers_.size())
    try_exit(l, batch, p.x, p.frozen, logits);
}

// The logit rows still running (all of them without early exit) take their logits from the
// last layer's x.
void Model::remaining_logits(const StepBatch& batch, const float* x, std::vector<float>& logits) {
  const std::size_t n_logits = batch.logit_rows.size();
  if (n_logits == 0) return;
  gather_.clear();
  std::vector<int> remaining;
  for (std::size_t i = 0; i < n_logits; ++i) {
    const int r = batch.logit_rows[i];
    if (!exited_[static_cast<std::size_t>(r)]) {
      gather_.push_back(r);
      remaining.push_back(static_cast<int>(i));
    }
  }
  if (gather_.empty()) return;
  const std::size_t vs = static_cast<std::size_t>(config_.vocab_size);
  if (remaining.size() == n_logits) {
    classify_rows(x, gather_, logits.data());
    return;
  }
  exit_logits_.resize(remaining.size() * vs);
  classify_rows(x, gather_, exit_logits_.data());
  for (std::size_t j = 0; j < remaining.size(); ++j)
    std::copy_n(exit_logits_.data() + j * vs, vs, logits.data() + static_cast<std::size_t>(remaining[j]) * vs);
}

void Model::embed(const std::vector<int>& host_tokens, float* out) {
  const int d = config_.dim;
  const Linear& table = embedding_ ? *embedding_ : *classifier_;
  const std::size_t sd = static_cast<std::size_t>(d);
  const bool host = device_.kind() == DeviceKind::kCpu;
  if (!host) embed_host_.resize(host_tokens.size() * sd);  // [rows, dim] staged, then one upload
  float* dst = host ? out : embed_host_.data();
  for (std::size_t r = 0; r < host_tokens.size(); ++r) table.dequantize_row(host_tokens[r], dst + r * sd);
  if (!host) device_.copy_to_device(out, embed_host_.data(), embed_host_.size() * sizeof(float));
}

void Model::classify_rows(const float* x, const std::vector<int>& rows, float* host_out) {
  ComputeDevice& dev = device_;
  if (dev.kind() != DeviceKind::kCpu) {
    const float* out = classify_rows_on_device(x, rows);
    OpScope t(dev, TimeCategory::kLinear);
    host_mark_s_ = steady_s();
    dev.copy_to_host(host_out, out, rows.size() * static_cast<std::size_t>(config_.vocab_size) * sizeof(float));
    return;
  }
  const float* xn = final_norm_rows(x, rows);
  OpScope t(dev, TimeCategory::kLinear);
  classifier_->forward(xn, host_out, static_cast<int>(rows.size()), dev);
}

float* Model::classify_rows_on_device(const float* x, const std::vector<int>& rows) {
  const float* xn = final_norm_rows(x, rows);
  OpScope t(device_, TimeCategory::kLinear);
  float* out = scratch(logits_, rows.size() * static_cast<std::size_t>(config_.vocab_size));
  classifier_->forward(xn, out, static_cast<int>(rows.size()), device_);
  return out;
}

const double* Model::stage_draws(std::span<const double> draws, std::size_t rows) {
  draws_host_.assign(rows, 0.5);  // padded rows of a graph step: any draw in [0, 1)
  std::copy(draws.begin(), draws.end(), draws_host_.begin());
  if (device_.kind() == DeviceKind::kCpu) return draws_host_.data();
  const std::size_t bytes = rows * sizeof(double);
  if (d_draws_.bytes() < bytes) d_draws_ = Buffer(device_, bytes);
  device_.copy_to_device(d_draws_.data(), draws_host_.data(), bytes);
  return d_draws_.as<double>();
}

int* Model::token_scratch(std::size_t rows) {
  if (d_tokens_.bytes() < rows * sizeof(int)) d_tokens_ = Buffer(device_, rows * sizeof(int));
  return d_tokens_.as<int>();
}

int* Model::choose_rows_on_device(const float* x, const std::vector<int>& rows, const TokenChoice& choice,
                                  const double* draws) {
  const float* logits = classify_rows_on_device(x, rows);  // [rows.size(), vocab]
  int* tokens = token_scratch(rows.size());
  OpScope t(device_, TimeCategory::kSampling);
  device_.choose_tokens(logits, static_cast<int>(rows.size()), config_.vocab_size, choice, draws, tokens);
  return tokens;
}

float* Model::final_norm_rows(const float* x, const std::vector<int>& rows) {
  ComputeDevice& dev = device_;
  const int n = static_cast<int>(rows.size()), d = config_.dim;
  const std::size_t sd = static_cast<std::size_t>(d);
  float* tmp = scratch(tmp_, rows.size() * sd);  // [n, dim]
  float* xn = scratch(xn_, rows.size() * sd);    // [n, dim]
  OpScope t(dev, TimeCategory::kNormRopeAct);
  dev.embedding(x, upload(rows, d_gather_), n, d, tmp);  // gather the rows asked for
  dev.rmsnorm(tmp, final_norm_.as<float>(), xn, n, d, config_.norm_eps);
  return xn;
}

void Model::try_exit(int l, const StepBatch& batch, const float* x, float* frozen, std::vector<float>& logits) {
  // Candidates: logit rows still running. Their logits here are final norm + classifier of the
  // hidden state after layer l (the same head as the last layer's, shared, as in CALM).
  gather_.clear();
  std::vector<int> index;  // logit-row index of each candidate
  for (std::size_t i = 0; i < batch.logit_rows.size(); ++i) {
    const int r = batch.logit_rows[i];
    if (!exited_[static_cast<std::size_t>(r)]) {
      gather_.push_back(r);
      index.push_back(static_cast<int>(i));
    }
  }
  if (gather_.empty()) return;
  const int vocab = config_.vocab_size;
  const std::size_t vs = static_cast<std::size_t>(vocab), sd = static_cast<std::size_t>(config_.dim);
  exit_logits_.resize(gather_.size() * vs);
  classify_rows(x, gather_, exit_logits_.data());
  OpScope t(device_, TimeCategory::kNormRopeAct);
  for (std::size_t j = 0; j < gather_.size(); ++j) {
    const float* row = exit_logits_.data() + j * vs;
    if (exit_confidence(row, vocab, plan_->criterion) < plan_->threshold) continue;
    const std::size_t r = static_cast<std::size_t>(gather_[j]);
    std::copy_n(row, vs, logits.data() + static_cast<std::size_t>(index[j]) * vs);
    device_.copy_on_device(frozen + r * sd, x + r * sd, sd * sizeof(float));
    exited_[r] = 1;
    ++n_exited_;
    depth_[static_cast<std::size_t>(index[j])] = l + 1;
    ++plan_->exited_rows;
  }
}

void Model::set_layer_plan(LayerPlan* plan) {
  if (plan != nullptr) {
    const int n = config_.n_layers;
    check(plan->skip.empty() || static_cast<int>(plan->skip.size()) == n,
          "layer plan: skip mask of " + std::to_string(plan->skip.size()) + " layers for a model of " + std::to_string(n));
    check(plan->active_layers(n) > 0, "layer plan: skips every layer of the model");
    check(std::is_sorted(plan->exit_after.begin(), plan->exit_after.end()), "layer plan: exit layers must ascend");
    for (int l : plan->exit_after)
      check(l >= 0 && l < n, "layer plan: exit after layer " + std::to_string(l) + ", but the model has " +
                                 std::to_string(n) + " layers");
    check(!plan->has_exits() || (plan->threshold > 0.0 && plan->threshold <= 1.0),
          "layer plan: exit threshold " + std::to_string(plan->threshold) + " outside (0, 1]");
  }
  plan_ = plan;
}

}  // namespace inferlab
