// The simulation backend (see inferlab/sim/sim.h and docs/simulation.md): a roofline cost model of
// one engine step, the host-memory SimDevice, and the SimExecutor that returns modelled step
// durations and synthetic greedy logits.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "inferlab/engine/batch.h"
#include "inferlab/error.h"
#include "inferlab/sim/sim.h"

namespace inferlab {

double StepCost::total() const {
  double t = 0;
  for (double s : seconds) t += s;
  return t;
}

namespace {

// Time of one op class on the roofline: bound by compute or by memory, then derated.
double roofline(double flops, double bytes, const HwProfile& p, double efficiency) {
  return std::max(flops / p.peak_flops, bytes / p.mem_bw) / efficiency;
}

double& at(StepCost& c, TimeCategory cat) { return c.seconds[static_cast<std::size_t>(cat)]; }

// Rows of a step one unpacking of a quantized weight serves (a GEMM tile's rows): unpacking
// is repeated for every kDequantRowTile rows.
constexpr double kDequantRowTile = 128;

// A linear (or the sum of a layer's) as its quantization stores and multiplies it: `params`
// weights in `bytes`, `int8_params` of them on int8 tensor cores and the rest at the float
// rate, `dequant_ops` unpacking ops per tile of rows, `act_bytes` of activations in and out.
double linear_time(const HwProfile& p, double rows, double params, double bytes, double int8_params,
                   double dequant_ops, double act_bytes, double tp) {
  double compute = 2 * (params - int8_params) * rows / p.peak_flops;
  if (int8_params > 0) compute += 2 * int8_params * rows / p.int8_ops;
  if (dequant_ops > 0 && rows > 0) compute += dequant_ops * std::ceil(rows / kDequantRowTile) / p.vector_ops;
  return std::max(compute / tp, (bytes + act_bytes) / tp / p.mem_bw) / p.eff_linear;
}

}  // namespace

StepCost step_cost(const ModelConfig& m, const SimOptions& o, const StepBatch& batch) {
  if (o.calibrated) {
    StepCost c;
    c.seconds = o.calibrated->seconds(batch);
    return c;
  }
  const HwProfile& p = o.profile;
  const double d = m.dim, h = m.hidden_dim, kv = m.kv_dim(), vocab = m.vocab_size, layers = m.n_layers;
  const double tp = o.tp, wb = o.weight_bytes, ab = o.act_bytes, kvb = o.kv_bytes;
  const double rows = batch.rows(), logit_rows = static_cast<double>(batch.logit_rows.size());
  StepCost c;
  // Linears of one layer: q, k, v, o, gate, up, down. 2 FLOPs per weight per row; every weight
  // is read once per step; activations in and out: [rows, 6d + 2kv + 3h].
  const double lin_params = 2 * d * d + 2 * kv * d + 3 * h * d;
  const double lin_act = rows * (6 * d + 2 * kv + 3 * h) * ab;
  const double lin = o.linears ? linear_time(p, rows, lin_params, o.linears->layer_bytes / layers,
                                             o.linears->layer_int8_params / layers,
                                             o.linears->layer_dequant_ops / layers, lin_act, tp)
                               : roofline(2 * lin_params * rows / tp, (lin_params * wb + lin_act) / tp, p, p.eff_linear);
  // Attention of one layer: a row at position t attends to t + 1 keys; QK^T and PV cost 2 FLOPs
  // per (head, head_dim, key) each. Each sequence's K/V context is read once; q in, out out.
  double keys = 0, kv_read = 0, split_rows = 0, split_keys = 0;
  for (int s = 0; s < batch.n_seqs(); ++s) {
    const double q = batch.query_start[static_cast<std::size_t>(s) + 1] - batch.query_start[static_cast<std::size_t>(s)];
    const double ctx = batch.context_len[static_cast<std::size_t>(s)];
    const double k = q * ctx - q * (q - 1) / 2;
    keys += k;
    kv_read += ctx * 2 * kv * kvb;
    if (o.attn_partial_max_rows <= 0 || q <= o.attn_partial_max_rows) {
      split_rows += q;
      split_keys += k;
    }
  }
  // A strategy that materialises scores or merges partial results moves them too (declared by
  // the attention plugin: Attention::traffic).
  const double heads = m.n_heads;
  const double extra = keys * heads * o.attn_score_bytes +
                       heads * (split_rows * o.attn_partial_bytes + split_keys * o.attn_partial_bytes_per_key);
  const double att = roofline(4 * d * keys / tp, (kv_read + rows * 2 * d * ab + extra) / tp, p, p.eff_attention);
  // Elementwise of one layer (bandwidth bound): 2 RMSNorms (in + out), RoPE on q and k, the
  // K/V write, 2 residual adds (x, y in, x out), SwiGLU (gate, up in, out).
  const double elt_bytes = rows * ((4 * d + 2 * (d + kv) + 6 * d + 3 * h) * ab + 2 * kv * kvb);
  const double elt = roofline(rows * (10 * d + 5 * h) / tp, elt_bytes / tp, p, p.eff_elementwise);
  // Tensor parallel: a ring all-reduce after attention's o and after the MLP's down linear.
  const double allreduce = tp > 1 ? 2 * (tp - 1) / tp * rows * d * ab / p.link_bw + p.link_latency_s : 0;
  at(c, TimeCategory::kLinear) = layers * lin;
  at(c, TimeCategory::kAttention) = layers * att;
  at(c, TimeCategory::kNormRopeAct) = layers * elt;
  at(c, TimeCategory::kFramework) = layers * (2 * allreduce + o.kernels_per_layer * p.launch_s);
  // Embedding gather, final norm on the logit rows, classifier [vocab, d] read once.
  at(c, TimeCategory::kNormRopeAct) += roofline(0, rows * d * ab + logit_rows * 2 * d * ab, p, p.eff_elementwise);
  at(c, TimeCategory::kLinear) +=
      o.linears ? linear_time(p, logit_rows, vocab * d, o.linears->classifier_bytes, o.linears->classifier_int8_params,
                              o.linears->classifier_dequant_ops, logit_rows * vocab * 4, tp)
                : roofline(2 * vocab * d * logit_rows / tp, (vocab * d * wb + logit_rows * vocab * 4) / tp, p, p.eff_linear);
  at(c, TimeCategory::kFramework) += 3 * p.launch_s;
  // Pipeline parallel, one batch in flight (the engine runs one step at a time): the stages run
  // one after another, so the step's compute is unchanged and (pp - 1) activation sends are
  // added; (pp - 1) / pp of the devices idle at any moment (the bubble), which is where the
  // simulation leaves pipeline parallelism: it buys memory (KV capacity), not step time.
  if (o.pp > 1) at(c, TimeCategory::kFramework) += (o.pp - 1) * (rows * d * ab / p.link_bw + p.link_latency_s);
  return c;
}

StepCost sequence_step_cost(const ModelConfig& m, const SimOptions& o, int new_tokens, int context) {
  thread_local StepBatch b;
  b.tokens.assign(static_cast<std::size_t>(new_tokens), 0);
  b.query_start = {0, new_tokens};
  b.context_len = {context};
  b.logit_rows = {new_tokens - 1};
  return step_cost(m, o, b);
}

double kv_bytes_per_token(const ModelConfig& m, const SimOptions& o) {
  if (o.calibrated) return o.calibrated->kv_bytes_per_token;
  return 2.0 * m.n_layers * m.n_kv_heads * m.head_dim() * o.kv_bytes / (o.tp * o.pp);
}

double sim_weight_bytes(const ModelConfig& m, const SimOptions& o) {
  if (o.calibrated) return o.calibrated->weight_bytes;
  if (!o.linears) return static_cast<double>(m.parameter_count()) * o.weight_bytes / (o.tp * o.pp);
  // Norms (and biases) at weight_bytes, the linears as their strategy stores them.
  const double d = m.dim, vocab = m.vocab_size;
  const double linear_params = m.n_layers * (2 * d * d + 2 * static_cast<double>(m.kv_dim()) * d +
                                             3 * static_cast<double>(m.hidden_dim) * d) +
                               vocab * d * (m.tied_classifier ? 1 : 2);
  const SimLinears& l = *o.linears;
  return ((static_cast<double>(m.parameter_count()) - linear_params) * o.weight_bytes + l.layer_bytes +
          l.classifier_bytes + l.embedding_bytes) /
         (o.tp * o.pp);
}

int sim_kv_blocks(const ModelConfig& m, const SimOptions& o, int block_size, double mem_fraction) {
  const double free = mem_fraction * o.profile.mem_bytes - sim_weight_bytes(m, o);
  const double block = kv_bytes_per_token(m, o) * block_size;
  if (free < block)
    throw Error("simulation: " + m.name + " does not fit on " + o.profile.name + " with tp = " + std::to_string(o.tp) +
                ", pp = " + std::to_string(o.pp) + " (weights " + std::to_string(sim_weight_bytes(m, o) / 1e9) +
                " GB per device of " + std::to_string(mem_fraction * o.profile.mem_bytes / 1e9) +
                " GB usable); raise tp or pp or pick a larger profile");
  return static_cast<int>(std::min(free / block, 2e9));
}

// ---- SimDevice ----------------------------------------------------------------------------

SimDevice::SimDevice(std::string description) : description_(std::move(description)) {}

void* SimDevice::allocate(std::size_t bytes) {
  const std::size_t size = (std::max<std::size_t>(bytes, 1) + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, size);
  if (p == nullptr) throw Error("sim device: cannot allocate " + std::to_string(bytes) + " bytes of host memory");
  std::memset(p, 0, size);
  return p;
}
void SimDevice::deallocate(void* ptr) { std::free(ptr); }
void SimDevice::copy_to_device(void* dst, const void* src, std::size_t bytes) { std::memcpy(dst, src, bytes); }
void SimDevice::copy_to_host(void* dst, const void* src, std::size_t bytes) { std::memcpy(dst, src, bytes); }
void SimDevice::copy_on_device(void* dst, const void* src, std::size_t bytes) { std::memmove(dst, src, bytes); }

void SimDevice::charge(const StepCost& cost) {
  for (std::size_t c = 0; c < cost.seconds.size(); ++c) times_.seconds[c] += cost.seconds[c];
}

void SimDevice::charge_draft(const StepCost& cost) {
  for (std::size_t c = 0; c < cost.seconds.size(); ++c) pending_draft_.seconds[c] += cost.seconds[c];
  draft_seconds_ += cost.total();
}

StepCost SimDevice::take_draft_cost() { return std::exchange(pending_draft_, StepCost{}); }

// ---- SimExecutor --------------------------------------------------------------------------

SimExecutor::SimExecutor(ModelConfig model, SimOptions options, SimDevice& device)
    : model_(std::move(model)), logits_config_(model_), options_(std::move(options)), device_(device) {
  logits_config_.vocab_size = std::min(model_.vocab_size, kSimVocab);
  check(options_.tp >= 1 && options_.pp >= 1, "simulation: tp and pp must be >= 1");
  check(model_.vocab_size > 3, "simulation: vocab_size must be > 3");
}

std::uint64_t SimExecutor::weight_bytes() const {
  if (options_.calibrated) return static_cast<std::uint64_t>(options_.calibrated->weight_bytes);
  SimOptions whole = options_;  // every device's share
  whole.tp = whole.pp = 1;
  return static_cast<std::uint64_t>(sim_weight_bytes(model_, whole));
}

std::uint64_t SimExecutor::kv_bytes_per_block(int block_size) const {
  return static_cast<std::uint64_t>(kv_bytes_per_token(model_, options_) * block_size);
}

double SimExecutor::execute(const StepBatch& batch, std::span<const BlockCopy> copies, std::vector<float>& logits) {
  StepCost cost = step_cost(model_, options_, batch);
  // Copy-on-write block copies: each block's K/V of every layer read and written once.
  if (!copies.empty()) {
    const double bytes = 2.0 * static_cast<double>(copies.size()) * block_size_ * kv_bytes_per_token(model_, options_);
    cost.seconds[static_cast<std::size_t>(TimeCategory::kNormRopeAct)] +=
        options_.calibrated ? static_cast<double>(copies.size()) * options_.calibrated->block_copy_s
                            : bytes / options_.profile.mem_bw / options_.profile.eff_elementwise;
  }
  // A speculative draft's passes for this step ran before it, one after another.
  const StepCost draft = device_.take_draft_cost();
  for (std::size_t c = 0; c < cost.seconds.size(); ++c) cost.seconds[c] += draft.seconds[c];
  device_.charge(cost);
  // Synthetic logits: all mass on next_token(row's token, row's position).
  const std::size_t vocab = static_cast<std::size_t>(logits_config_.vocab_size);
  logits.assign(batch.logit_rows.size() * vocab, -10.0f);
  for (std::size_t i = 0; i < batch.logit_rows.size(); ++i) {
    const auto r = static_cast<std::size_t>(batch.logit_rows[i]);
    logits[i * vocab + static_cast<std::size_t>(next_token(batch.tokens[r], batch.positions[r]))] = 10.0f;
  }
  return cost.total();
}

}  // namespace inferlab
