// Float weights of a Llama-family decoder, as loaded from a checkpoint or drawn at random.
// Quantization strategies build their Linears from these; the engine never keeps both.
#pragma once
#include <cstdint>
#include <map>
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

// A tensor's bytes as the checkpoint stored them: GGML blocks of type ggml_type (a GgmlType id).
struct SourceBlocks {
  std::uint32_t ggml_type = 0;
  std::vector<std::uint8_t> bytes;  // [out rows of in / block_elements blocks]
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
  // A GGUF's block-quantized linears as stored, by linear name ("layers.3.wq", "classifier"),
  // beside their fp32 copies above, for strategies that run the blocks natively
  // (quantization/gguf). Empty for other formats and for F32/F16/BF16 tensors. Costs the
  // file's bytes of these tensors (1/4 .. 1/7 of their fp32 copies).
  std::map<std::string, SourceBlocks> source_blocks;

  // Throws Error if a tensor's size disagrees with the config.
  void validate() const;
};

// Seeded random weights of the given shape: linears ~ N(0, 1/sqrt(fan_in)), norms = 1.
// Deterministic for a (config, seed) pair whatever the thread count.
ModelWeights random_weights(const ModelConfig& config, std::uint64_t seed);

}  // namespace inferlab
