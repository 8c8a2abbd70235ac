// The Llama-family decoder: RMSNorm, RoPE, grouped-query attention, SwiGLU, tied or separate
// classifier. Linears come from the Quantization strategy, attention from the Attention
// strategy; the model owns the embedding, norms, biases and scratch, all in memory of its
// Device, and runs every elementwise op through that device (timed by category).
#pragma once
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "inferlab/plugin/attention.h"
#include "inferlab/engine/batch.h"
#include "inferlab/model/calibration.h"
#include "inferlab/device/device.h"
#include "inferlab/device/step_graph.h"
#include "inferlab/kv/kv_cache.h"
#include "inferlab/plugin/layer_plan.h"
#include "inferlab/plugin/quantization.h"
#include "inferlab/model/weights.h"

namespace inferlab {

class Model {
 public:
  // Builds every linear through `quant` (created for the same device) from a copy of the float
  // weights, and uploads the rest to `device` (a ComputeDevice: it runs the ops; a simulated
  // device is refused with an Error). `calibration` (optional) carries each linear's
  // input statistics, handed to quant.make_linear by the linear's name.
  Model(const ModelWeights& weights, Quantization& quant, Device& device,
        const CalibrationSet* calibration = nullptr);
  ~Model();

  const ModelConfig& config() const { return config_; }
  ComputeDevice& device() const { return device_; }
  // Bytes of all weights as stored for inference (linears as quantized, plus embedding/norms).
  std::uint64_t weight_bytes() const;
  // Bytes of the token-embedding table within weight_bytes(); a step reads only its tokens'
  // rows of it, so a decode step reads weight_bytes() - embedding_bytes() (+ those rows).
  std::uint64_t embedding_bytes() const;
  // Every layer's linears (wq, wk, wv, wo, w1, w2, w3, layer by layer), then the classifier.
  std::vector<const Linear*> linears() const;

  // Runs batch.rows() tokens: writes their K/V into `kv` (storage on this model's device) at
  // batch.slots, and fills logits [batch.logit_rows.size(), vocab] on the host. Under a layer
  // plan (set_layer_plan) skipped layers are not run and their K/V never written, and logit rows
  // may exit early (inferlab/plugin/layer_plan.h); the plan's counters record where they did.
  void forward(const StepBatch& batch, KvStorage& kv, Attention& attention, std::vector<float>& logits);
  // Whether forward_choosing runs: the device chooses tokens (ComputeDevice::chooses_tokens)
  // and no layer plan exits early (an exit's logits are read on the host).
  bool chooses_tokens() const;
  // forward(), with the token of each logit row chosen on the device by `choice` (not kNone)
  // instead of its logits downloaded: tokens [batch.logit_rows.size()], token i chosen from row
  // i's logits with the uniform draws[i] (kSample; draws has one entry per logit row). Under
  // [device] cuda_graphs the choice is part of the captured decode step (the draws are one of its
  // staged inputs), so only the token ids cross to the host. Throws Error where
  // chooses_tokens() is false.
  void forward_choosing(const StepBatch& batch, KvStorage& kv, Attention& attention, const TokenChoice& choice,
                        std::span<const double> draws, std::vector<int>& tokens);

  // Runs every later forward under `plan` (null = every layer; not owned, outlives its use).
  // Throws Error when the plan's skip mask or exit layers do not fit this model.
  void set_layer_plan(LayerPlan* plan);
  LayerPlan* layer_plan() const { return plan_; }

  // What the forward passes so far cost the host and how many replayed a captured graph.
  struct ForwardStats {
    long long forwards = 0;       // forward() calls with at least one row
    double host_s = 0;            // host seconds of them up to their logits download: issuing the
                                  // step (uploads, launches or a replay); all of it on the CPU
    long long graph_captures = 0;  // decode-step graphs captured ([device] cuda_graphs = true)
    long long graph_replays = 0;   // decode steps that replayed one
  };
  ForwardStats forward_stats() const;

 private:
  struct Layer;
  struct Pass;  // one forward's scratch pointers and fused / early-exit state (model.cpp)
  // A forward_choosing call's choice, its draws and where its tokens go.
  struct Choosing {
    TokenChoice choice;
    std::span<const double> draws;
    std::vector<int>* tokens = nullptr;
  };
  void run_forward(const StepBatch& batch, KvStorage& kv, Attention& attention, std::vector<float>& logits,
                   const Choosing* choosing);
  // The stages of forward(), in order.
  void check_step_batch(const StepBatch& batch, const KvStorage& kv) const;
  Pass begin_pass(const StepBatch& batch);
  bool attention_block(Pass& p, int l, KvStorage& kv, Attention& attention);
  void feed_forward_block(Pass& p, int l);
  void add_residual_and_exit(Pass& p, int l, const StepBatch& batch, std::vector<float>& logits);
  void run_layers(Pass& p, const StepBatch& batch, KvStorage& kv, Attention& attention, std::vector<float>& logits);
  void remaining_logits(const StepBatch& batch, const float* x, std::vector<float>& logits);
  // [device] cuda_graphs: a decode step padded to its bucket, captured once per GraphKey and
  // replayed (model_graph.cpp). false when the step runs eagerly instead (not a decode step, a
  // layer plan, an attention that cannot be captured, a batch beyond kMaxGraphBatch).
  bool graph_step(const StepBatch& batch, KvStorage& kv, Attention& attention, std::vector<float>& logits,
                  const Choosing* choosing);
  void graph_body(Pass& p, const StepBatch& padded, KvStorage& kv, Attention& attention, const Choosing* choosing);
  // The draws of a choosing pass, padded to `rows` (0.5 beyond the given ones), as device memory
  // (the host vector itself on the CPU); the token ids' device buffer of `rows` ints.
  const double* stage_draws(std::span<const double> draws, std::size_t rows);
  int* token_scratch(std::size_t rows);
  // final norm + classifier of the rows `rows` of x, then choose_tokens on them into
  // token_scratch: the device tokens (not downloaded).
  int* choose_rows_on_device(const float* x, const std::vector<int>& rows, const TokenChoice& choice,
                             const double* draws);
  // A host int array as device memory: the array itself on the CPU, an upload elsewhere.
  const int* upload(const std::vector<int>& host, Buffer& staging);
  float* scratch(Buffer& buffer, std::size_t floats);
  // Early exit after layer `l`: the logit rows still running whose confidence passes the plan's
  // threshold take their logits from here, and their hidden state is frozen in `frozen`.
  void try_exit(int l, const StepBatch& batch, const float* x, float* frozen, std::vector<float>& logits);
  // out [tokens, dim] (device memory) = the embedding rows of the tokens, dequantised from the
  // table's linear (the classifier's when tied), staged on the host for a non-CPU device.
  void embed(const std::vector<int>& host_tokens, float* out);
  // final norm + classifier of the rows `rows` of x [*, dim]: host logits [rows.size(), vocab].
  void classify_rows(const float* x, const std::vector<int>& rows, float* host_out);
  // The same into device memory (a non-CPU device): the logits [rows.size(), vocab] it returns
  // stay valid until the next forward.
  float* classify_rows_on_device(const float* x, const std::vector<int>& rows);
  // The gathered rows of x under the final norm: xn [rows.size(), dim] (device scratch).
  float* final_norm_rows(const float* x, const std::vector<int>& rows);
  static double steady_s();

  ModelConfig config_;
  ComputeDevice& device_;
  // [vocab, dim] in the quantization's format when the classifier is separate (the lookup reads
  // its rows, Linear::dequantize_row); null when tied (the classifier's rows are the table).
  std::unique_ptr<Linear> embedding_;
  std::vector<float> embed_host_;  // [rows, dim] host staging of a tied lookup on a non-CPU device
  Buffer final_norm_;  // [dim]
  std::vector<std::unique_ptr<Layer>> layers_;
  std::unique_ptr<Linear> classifier_;
  Buffer inv_freq_;    // [head_dim / 2] RoPE frequencies
  LayerPlan* plan_ = nullptr;
  // Early exit, per forward: exited_[r] for each batch row, depth_[i] for each logit row.
  std::vector<char> exited_;
  std::vector<int> depth_, gather_;
  std::vector<float> exit_logits_;  // [candidates, vocab] host
  int n_exited_ = 0;
  // Scratch, grown to the largest step: [rows, width]
  Buffer x_, xn_, q_, k_, v_, att_, h1_, h3_, tmp_, logits_, frozen_;
  Buffer act_q_, act_s_;  // fused: int8 activation blocks [rows, max(dim, hidden)] and their scales
  // The batch's int arrays on the device (unused on the CPU).
  Buffer d_positions_, d_slots_, d_query_start_, d_context_len_, d_block_table_, d_logit_rows_, d_gather_;
  // Token choice: the draws (device copy of draws_host_) and the chosen ids, [rows] each.
  Buffer d_draws_, d_tokens_;
  std::vector<double> draws_host_;
  const double* d_draws_ptr_ = nullptr;  // a graph step's staged draws (graph_body reads them)
  // Decode-step graphs; their static inputs are the buffers above (GraphCache drops a graph when
  // one of them is reallocated: the device's memory epoch moves).
  GraphCache graphs_;
  std::vector<int> graph_rows_;  // 0 .. bucket-1: the padded step's logit rows
  std::string graph_failure_;    // the last capture failure, logged once
  ForwardStats stats_;
  double host_mark_s_ = -1;  // steady seconds just before the last logits download (-1: none)
};

}  // namespace inferlab
