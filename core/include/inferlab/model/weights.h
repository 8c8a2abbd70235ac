// Float weights of a Llama-family decoder, as loaded from a checkpoint or drawn at random.
// Quantization strategies build their Linears from these; the engine never keeps both.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "inferlab/model/model_config.h"

namespace inferlab {

// A tensor's bytes as the checkpoint stored them: GGML blocks of type ggml_type (a GgmlType id).
struct SourceBlocks {
  std::uint32_t ggml_type = 0;
  std::vector<std::uint8_t> bytes;  // [out rows of in / block_elements blocks]
};

// A matrix of seeded random weights drawn when asked (ModelWeights::matrix): the values
// random_weights would hold, stddev · approx-normal draws from chunk seeds derived from `seed`.
struct SeededMatrix {
  std::uint64_t seed = 0;
  float stddev = 0.0f;
};

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
  // A GGUF's block-quantized matrices as the file stores them, by field ("wq", "w1", ...). Such
  // a matrix's fp32 field above stays empty (ModelWeights::matrix dequantises it on demand), so
  // a loaded GGUF costs its file's bytes, not four to seven times more. The blocks travel with
  // the layer: erasing or truncating layers keeps every matrix with its own bytes.
  // Shared and immutable: a copy of the weights (a draft's) or a linear built on them
  // (quantization/gguf) holds the same bytes, not a copy.
  std::map<std::string, std::shared_ptr<const SourceBlocks>> blocks;
  // Matrices of seeded_weights, by field as `blocks`: the field stays empty, the values are
  // drawn when a strategy asks for them.
  std::map<std::string, SeededMatrix> seeded;
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
  // The token table's and the classifier's blocks, as LayerWeights::blocks: "classifier" (the
  // tied table, or a separate output.weight) and "embedding" (a table beside a separate
  // classifier). Their fp32 fields stay empty in the same way.
  std::map<std::string, std::shared_ptr<const SourceBlocks>> table_blocks;
  // The tables' seeded matrices, keyed as table_blocks.
  std::map<std::string, SeededMatrix> table_seeded;

  // The stored blocks of linear `name` ("layers.3.wq", "classifier", "embedding"), for
  // strategies that run them natively (quantization/gguf); null when it has none (other
  // formats, F32/F16/BF16 tensors, random weights).
  const SourceBlocks* source_blocks(const std::string& name) const;
  // The same blocks, shared: for a linear that runs them without copying the bytes.
  std::shared_ptr<const SourceBlocks> shared_source_blocks(const std::string& name) const;
  // Makes `blocks` the stored blocks of linear `name` (where source_blocks finds them); throws
  // Error for a name that is not a linear of these weights (mind the layer count).
  void set_source_blocks(const std::string& name, SourceBlocks blocks);
  // The fp32 values of linear `name`, [out, in]: a copy of its field, its blocks dequantised
  // (bit for bit as ggml), or its seeded values drawn. Throws Error for an unknown name.
  std::vector<float> matrix(const std::string& name) const;
  // True when some matrix is held only as blocks or a seed (its field empty).
  bool has_lazy_matrices() const;
  // Fills every such matrix's field (the blocks and seeds stay), for code that reads the fields
  // directly; a no-op when every field holds its values.
  void materialize();

  // Throws Error if a tensor's size disagrees with the config (a block-held matrix counts by
  // its blocks' elements).
  void validate() const;
};

// Seeded random weights of the given shape: linears ~ N(0, 1/sqrt(fan_in)), norms = 1.
// Deterministic for a (config, seed) pair whatever the thread count.
ModelWeights random_weights(const ModelConfig& config, std::uint64_t seed);
// The same weights with every matrix (linears, embedding, classifier) left as a SeededMatrix:
// norms and biases only are drawn now, a matrix when a strategy asks (ModelWeights::matrix gives
// random_weights' values bit for bit). A preset then costs what its model's strategy stores, not
// an fp32 copy on top: what `[model] preset` and `--preset` load.
ModelWeights seeded_weights(const ModelConfig& config, std::uint64_t seed);

}  // namespace inferlab
