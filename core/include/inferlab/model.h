// The Llama-family decoder: RMSNorm, RoPE, grouped-query attention, SwiGLU, tied or separate
// classifier. Linears come from the Quantization strategy, attention from the Attention
// strategy; the model owns the embedding, norms and scratch buffers.
#pragma once
#include <cstdint>
#include <memory>
#include <vector>

#include "inferlab/attention.h"
#include "inferlab/batch.h"
#include "inferlab/kv_cache.h"
#include "inferlab/quantization.h"
#include "inferlab/weights.h"

namespace inferlab {

class Model {
 public:
  // Builds every linear through `quant` from a copy of the float weights.
  Model(const ModelWeights& weights, Quantization& quant);
  ~Model();

  const ModelConfig& config() const { return config_; }
  // Bytes of all weights as stored for inference (linears as quantized, plus embedding/norms).
  std::uint64_t weight_bytes() const;

  // Runs batch.rows() tokens: writes their K/V into `kv` at batch.slots, and fills
  // logits [batch.logit_rows.size(), vocab].
  void forward(const StepBatch& batch, KvCache& kv, Attention& attention, ThreadPool& pool,
               std::vector<float>& logits);

 private:
  struct Layer;
  ModelConfig config_;
  std::vector<float> embedding_;   // [vocab, dim]
  std::vector<float> final_norm_;  // [dim]
  std::vector<std::unique_ptr<Layer>> layers_;
  std::unique_ptr<Linear> classifier_;
  std::vector<float> inv_freq_;    // [head_dim / 2] RoPE frequencies
  // Scratch, resized per step: [rows, width]
  std::vector<float> x_, xn_, q_, k_, v_, att_, h1_, h3_, tmp_;
};

}  // namespace inferlab
