// Test doubles for building and running a Model without the plugin registry: float linears on
// the fast CPU matmul, attention through the reference kernel, and a single-sequence runner
// that drives a real BlockManager and KvStorage.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "inferlab/plugin/attention.h"
#include "inferlab/kv/kv_cache.h"
#include "inferlab/model/model.h"
#include "inferlab/plugin/quantization.h"
#include "inferlab/device/device.h"

namespace inferlab::testing {

// Linears keep fp32 weights and run kernels/cpu/matmul_f32 (what the "none" plugin does).
class FloatQuantization final : public Quantization {
 public:
  using Quantization::make_linear;  // the overload taking calibration stays visible
  std::unique_ptr<Linear> make_linear(const std::string& name, std::vector<float> weight, int out,
                                      int in) override;
  int linears_built() const { return built_; }

 private:
  int built_ = 0;
};

// The logits of every row of `tokens` fed in one step to a model of `weights` on the CPU (fp32
// linears, the reference attention): the function a checkpoint computes, to compare an
// export's round trip with the weights it started from.
std::vector<float> cpu_logits(const ModelWeights& weights, const std::vector<int>& tokens);

// Attention through kernels/ref ref_paged_attention (double accumulation, single thread).
class RefAttention final : public Attention {
 public:
  void forward(const AttentionBatch& batch, const KvLayerView& kv, const float* q, float* out,
               Device& device) override;
};

// One sequence (id 0) fed through a Model step by step (on the model's device), owning its
// KV cache.
class SequenceRunner {
 public:
  SequenceRunner(Model& model, Attention& attention, int block_size = 16,
                 int num_blocks = 0 /* 0: enough for max_seq_len */, const KvFormat& format = {});
  // Appends `tokens` in one step; returns the logits of its last row ([vocab]).
  const std::vector<float>& feed(const std::vector<int>& tokens);
  // As feed, but returns logits of every row ([tokens.size(), vocab]).
  const std::vector<float>& feed_all_logits(const std::vector<int>& tokens);
  int length() const { return kv_.length(0); }
  BlockManager& kv() { return kv_; }
  KvStorage& storage() { return storage_; }

 private:
  const std::vector<float>& step(const std::vector<int>& tokens, bool all_logits);
  Model& model_;
  Attention& attention_;
  BlockManager kv_;
  KvStorage storage_;
  StepBatch batch_;
  std::vector<float> logits_;
};

// Greedy generation as llama2.c run.c: feed `bos` at position 0, take the argmax each step,
// stop when the model emits `bos` or after `max_steps` positions. Returns the generated ids
// (without the leading BOS, without the final BOS).
std::vector<int> generate_greedy(Model& model, Attention& attention, int bos, int max_steps);

// quantization/none's strategy for `device`: FloatCudaQuantization on a CUDA device (a CUDA
// build), NoQuantization (the CPU) otherwise.
std::unique_ptr<Quantization> none_quantization(Device& device);

}  // namespace inferlab::testing
