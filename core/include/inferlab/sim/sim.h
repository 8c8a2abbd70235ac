// Simulation ([device] kind = "sim"): the real Engine, schedulers, decoders and KV bookkeeping
// run unchanged; only the execute stage is replaced by a cost model, so a 7B model on an H100
// can be studied on a laptop. Weights are never materialised: the ModelConfig is enough.
// See docs/simulation.md for the model and what it leaves out.
#pragma once
#include <array>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "inferlab/plugin/attention.h"
#include "inferlab/engine/engine.h"
#include "inferlab/sim/sim_cost_model.h"

namespace inferlab {

// Public spec numbers of one accelerator (see sim_profiles.cpp for the sources).
struct HwProfile {
  std::string name;            // "h100"
  std::string description;     // "NVIDIA H100 SXM5 80GB"
  double peak_flops = 0;       // dense bf16/fp16 tensor FLOP/s (no sparsity)
  double int8_ops = 0;         // dense int8 tensor ops/s (W8A8 multiplies)
  double vector_ops = 0;       // fp32/int32 ops/s off the tensor cores (unpacking quantized weights)
  double mem_bw = 0;           // HBM bytes/s
  double mem_bytes = 0;        // HBM capacity
  double link_bw = 0;          // GPU-to-GPU link (NVLink, or a NIC) bytes/s per direction per GPU
  double link_latency_s = 0;   // one all-reduce's fixed cost
  double launch_s = 0;         // per-kernel launch/dispatch overhead
  // Achieved fraction of the roofline per op class: linear, attention, elementwise.
  double eff_linear = 0, eff_attention = 0, eff_elementwise = 0;
};

// The profiles built in: a100-40gb, a100-80gb, h100, h200, and a100-80gb-100gbe (A100-80GB with
// its tensor-parallel all-reduces over 100 Gb Ethernet). Throws Error listing them.
const HwProfile& hw_profile(const std::string& name);
std::vector<std::string> hw_profile_names();

class Quantization;

// The model's linears as a variant's quantization stores and multiplies them, summed over the
// whole model (one device holds 1 / (tp · pp) of it): Quantization::planned_bytes and
// Quantization::arithmetic of every linear (sim_linears).
struct SimLinears {
  double layer_bytes = 0;             // every layer's q, k, v, o, gate, up, down
  double layer_int8_params = 0;       // of their parameters, those multiplied on int8 tensor cores
  double layer_dequant_ops = 0;       // Σ parameters × unpacking ops per weight
  double classifier_bytes = 0, classifier_int8_params = 0, classifier_dequant_ops = 0;
  double embedding_bytes = 0;         // an untied table: rows gathered, never multiplied
};

// The linears of `model` under `quant` (a RuledQuantization answers per linear): bytes from
// planned_bytes, except an unquantised ("native") linear, which a simulated GPU holds in
// `native_bytes` per weight (bf16: 2). Throws Error naming the first linear whose strategy does
// not declare its arithmetic.
SimLinears sim_linears(Quantization& quant, const ModelConfig& model, double native_bytes = 2);
// attention.traffic(head_dim), or Error naming `name` when it declares none.
AttentionTraffic sim_attention_traffic(const Attention& attention, const ModelConfig& model, const std::string& name);

struct SimOptions {
  HwProfile profile;
  int tp = 1;              // tensor parallel: per-layer work / tp, two ring all-reduces per layer
  int pp = 1;              // pipeline parallel: stages run one after another (no micro-batching)
  double weight_bytes = 2; // bytes per weight (bf16; a quantized format's bytes with its scales)
  int act_bytes = 2;       // bytes per activation value
  int kv_bytes = 2;        // bytes per K/V value
  // The variant's linears (sim_linears); unset: every weight weight_bytes, multiplied at the
  // float rate, nothing to unpack.
  std::optional<SimLinears> linears;
  // The attention strategy's traffic beyond Q, K/V and the output (Attention::traffic, whose
  // fields these are). All 0: a tiled online softmax.
  double attn_score_bytes = 0;
  double attn_partial_bytes = 0, attn_partial_bytes_per_key = 0;
  int attn_partial_max_rows = 0;
  int kernels_per_layer = 12;  // launches per layer: 2 norms, q/k/v, rope, kv write, attention,
                               // o, 2 adds, gate/up, act, down (fused counts as 12 here)
  // A calibrated cost model of one plugin stack (`profile = "calibrated:PATH"`): when set, a
  // step costs what the fit says instead of the roofline, K/V and weights take the bytes the
  // measured executor stored, and `profile` only names it (tp = pp = 1).
  std::shared_ptr<const CalibratedStack> calibrated;
};

// One step's modelled seconds by TimeCategory (linear, attention, norm_rope_act; launch
// overhead, all-reduces and pipeline sends under framework) and in total.
struct StepCost {
  std::array<double, kTimeCategories> seconds{};
  double total() const;
};

// The cost of one batch: the calibrated fit when options.calibrated is set, else the roofline:
// for every op class time = max(flops / peak, bytes / bw) / efficiency. Pure: tests check it
// against hand arithmetic.
StepCost step_cost(const ModelConfig& model, const SimOptions& options, const StepBatch& batch);
// The cost of a step of one sequence: `new_tokens` rows ending at context `context`, logits for
// the last (a speculative draft's pass).
StepCost sequence_step_cost(const ModelConfig& model, const SimOptions& options, int new_tokens, int context);

// KV bytes per token on one device for this model: 2 (K and V) × layers × kv_heads × head_dim
// × kv_bytes / (tp × pp) (heads split over tp, layers over pp stages); calibrated: what the
// measured executor stored.
double kv_bytes_per_token(const ModelConfig& model, const SimOptions& options);
// Bytes of weights on one device: parameters × weight_bytes / (tp × pp); calibrated: measured.
double sim_weight_bytes(const ModelConfig& model, const SimOptions& options);
// KV blocks that fit beside the weights in `mem_fraction` of one device's memory (pp stages
// each hold their layers' share, so per-token KV per device shrinks by pp as well).
int sim_kv_blocks(const ModelConfig& model, const SimOptions& options, int block_size, double mem_fraction = 0.9);

// A Device of memory and time only: its memory is host memory and it runs no model op (it is no
// ComputeDevice). Plugins that only need the host (schedulers, decoders on logits) run on it;
// attention and quantization objects are created by their CPU implementation and asked only
// what they declare. Time is not measured: the executor charges modelled seconds.
class SimDevice final : public Device {
 public:
  explicit SimDevice(std::string description = "sim");
  // The run's cost model, for strategies that charge work of their own (a speculative draft's
  // passes); null until set_options.
  void set_options(std::shared_ptr<const SimOptions> options) { options_ = std::move(options); }
  const SimOptions* options() const { return options_.get(); }
  DeviceKind kind() const override { return DeviceKind::kSim; }
  std::string describe() const override { return description_; }
  void* allocate(std::size_t bytes) override;
  void deallocate(void* ptr) override;
  void copy_to_device(void* dst, const void* host_src, std::size_t bytes) override;
  void copy_to_host(void* host_dst, const void* src, std::size_t bytes) override;
  void copy_on_device(void* dst, const void* src, std::size_t bytes) override;
  void op_begin(TimeCategory) override {}
  void op_end(TimeCategory) override {}
  double timer_overhead_s() const override { return 0; }
  // Adds modelled seconds to the categories (the executor calls it once per step).
  void charge(const StepCost& cost);
  // A draft model's modelled seconds, run before the step's target pass: the executor adds them
  // to the step it executes next (take_draft_cost), and they count as drafting time.
  void charge_draft(const StepCost& cost);
  StepCost take_draft_cost();
  double draft_seconds() const { return draft_seconds_; }  // over the run so far

 private:
  std::string description_;
  std::shared_ptr<const SimOptions> options_;
  StepCost pending_draft_;
  double draft_seconds_ = 0;
};

// The logits width of a simulated run: synthetic tokens are drawn from [3, kSimVocab) (or the
// model's vocabulary when smaller), because a decoder reads every logit of every row and a
// 32k-128k vocabulary would otherwise be most of the simulator's time. The cost model still
// charges the model's real classifier.
inline constexpr int kSimVocab = 64;

// The synthetic greedy token after `token` at `position` in a vocabulary of `vocab` (> 3) ids:
// a hash, never a special id below 3. What a simulated model "predicts"; a simulated draft
// (decoding/speculative's sim_accept_prob) proposes it too.
inline int sim_next_token(int token, int position, int vocab) {
  const unsigned h = static_cast<unsigned>(token) * 2654435761u + static_cast<unsigned>(position) * 40503u;
  return 3 + static_cast<int>((h >> 7) % static_cast<unsigned>(vocab - 3));
}

// The StepExecutor of a simulated run: execute() returns the cost model's duration and fills
// each logits row with all mass on a synthetic greedy token, a function of (token, position)
// only, so outputs do not depend on batching (stop tokens never come: requests run to
// max_output). No weights, no K/V storage.
class SimExecutor final : public StepExecutor {
 public:
  SimExecutor(ModelConfig model, SimOptions options, SimDevice& device);
  // The model with vocab_size = min(vocab, kSimVocab): what the engine and decoders see.
  const ModelConfig& config() const override { return logits_config_; }
  // The real shape, which the cost model charges.
  const ModelConfig& model() const { return model_; }
  std::uint64_t weight_bytes() const override;
  Device& device() override { return device_; }
  std::uint64_t kv_bytes_per_block(int block_size) const override;
  void prepare(const KvCacheConfig& kv) override { block_size_ = kv.block_size; }
  double execute(const StepBatch& batch, std::span<const BlockCopy> copies, std::vector<float>& logits) override;
  // The synthetic token after `token` at `position` (never a special id below 3).
  int next_token(int token, int position) const { return sim_next_token(token, position, logits_config_.vocab_size); }

 private:
  ModelConfig model_, logits_config_;
  SimOptions options_;
  SimDevice& device_;
  int block_size_ = 16;
};

}  // namespace inferlab
