// The Llama-family decoder: RMSNorm, RoPE, grouped-query attention, SwiGLU, tied or separate
// classifier. Linears come from the Quantization strategy, attention from the Attention
// strategy; the model owns the embedding, norms, biases and scratch, all in memory of its
// Device, and runs every elementwise op through that device (timed by category).
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "inferlab/attention.h"
#include "inferlab/batch.h"
#include "inferlab/calibration.h"
#include "inferlab/device.h"
#include "inferlab/kv_cache.h"
#include "inferlab/quantization.h"
#include "inferlab/weights.h"

namespace inferlab {

class Model {
 public:
  // Builds every linear through `quant` (created for the same device) from a copy of the float
  // weights, and uploads the rest to `device`. `calibration` (optional) carries each linear's
  // input statistics, handed to quant.make_linear by the linear's name.
  Model(const ModelWeights& weights, Quantization& quant, Device& device,
        const CalibrationSet* calibration = nullptr);
  ~Model();

  const ModelConfig& config() const { return config_; }
  Device& device() const { return device_; }
  // Bytes of all weights as stored for inference (linears as quantized, plus embedding/norms).
  std::uint64_t weight_bytes() const;

  // Runs batch.rows() tokens: writes their K/V into `kv` (storage on this model's device) at
  // batch.slots, and fills logits [batch.logit_rows.size(), vocab] on the host.
  void forward(const StepBatch& batch, KvStorage& kv, Attention& attention, std::vector<float>& logits);

 private:
  struct Layer;
  // A host int array as device memory: the array itself on the CPU, an upload elsewhere.
  const int* upload(const std::vector<int>& host, Buffer& staging);
  float* scratch(Buffer& buffer, std::size_t floats);

  ModelConfig config_;
  Device& device_;
  Buffer embedding_;   // [vocab, dim]
  Buffer final_norm_;  // [dim]
  std::vector<std::unique_ptr<Layer>> layers_;
  std::unique_ptr<Linear> classifier_;
  Buffer inv_freq_;    // [head_dim / 2] RoPE frequencies
  // Scratch, grown to the largest step: [rows, width]
  Buffer x_, xn_, q_, k_, v_, att_, h1_, h3_, tmp_, logits_;
  // The batch's int arrays on the device (unused on the CPU).
  Buffer d_tokens_, d_positions_, d_slots_, d_query_start_, d_context_len_, d_block_table_, d_logit_rows_;
};

}  // namespace inferlab
