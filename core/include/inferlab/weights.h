// Float weights of a Llama-family decoder, as loaded from a checkpoint or drawn at random.
// Quantization strategies build their Linears from these; the engine never keeps both.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "inferlab/model_config.h"

namespace inferlab {

struct LayerWeights {
  std::vector<float> attn_norm;  // [dim]
  std::vector<float> wq;         // [n_heads * head_dim, dim]  (row = output channel)
  std::vector<float> wk;         // [n_kv_heads * head_dim, dim]
  std::vector<float> wv;         // [n_kv_heads * head_dim, dim]
  std::vector<float> wo;         // [dim, n_heads * head_dim]
  std::vector<float> bq, bk, bv; // [out] each, empty unless config.qkv_bias
  std::vector<float> ffn_norm;   // [dim]
  std::vector<float> w1;         // [hidden_dim, dim]  gate
  std::vector<float> w2;         // [dim, hidden_dim]  down
  std::vector<float> w3;         // [hidden_dim, dim]  up
};

struct ModelWeights {
  ModelConfig config;
  std::vector<float> token_embedding;  // [vocab, dim]
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;       // [dim]
  std::vector<float> classifier;       // [vocab, dim]; empty when config.tied_classifier
  // Bytes the tensors occupied in the source file (quantized formats are larger once
  // dequantised); 0 for random weights.
  std::uint64_t source_bytes = 0;

  // Throws Error if a tensor's size disagrees with the config.
  void validate() const;
};

// Seeded random weights of the given shape: linears ~ N(0, 1/sqrt(fan_in)), norms = 1.
// Deterministic for a (config, seed) pair whatever the thread count.
ModelWeights random_weights(const ModelConfig& config, std::uint64_t seed);

}  // namespace inferlab
