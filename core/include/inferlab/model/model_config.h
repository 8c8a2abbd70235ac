// The shape of a Llama-family decoder, and presets of real architectures.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "inferlab/rope_style.h"

namespace inferlab {

struct ModelConfig {
  std::string name;           // preset or file name, for reports
  int dim = 0;                // model width
  int hidden_dim = 0;         // SwiGLU inner width
  int n_layers = 0;
  int n_heads = 0;
  int n_kv_heads = 0;         // < n_heads: grouped-query attention
  int vocab_size = 0;
  int max_seq_len = 0;        // trained context
  float rope_theta = 10000.0f;
  float norm_eps = 1e-5f;
  bool tied_classifier = true;  // classifier shares the token embedding
  bool qkv_bias = false;        // Qwen2-style bias on q, k, v projections
  RopeStyle rope_style = RopeStyle::kInterleaved;
  int bos_id = 1;
  int eos_id = 2;
  // A GGUF checkpoint's GGML type id (GgmlType) of each linear, by linear name ("layers.0.wq",
  // "classifier"), from its header; empty for other sources. Lets a strategy that runs the
  // stored blocks refuse a model at validate time.
  std::map<std::string, std::uint32_t> source_linear_types;

  int head_dim() const { return dim / n_heads; }
  int kv_dim() const { return head_dim() * n_kv_heads; }
  // Throws Error naming the first inconsistent field.
  void validate() const;
  // Parameter count including embeddings (classifier counted once when tied).
  long long parameter_count() const;
};

// Known real shapes: stories260k, stories15m, stories110m, smollm2-135m, tinyllama-1.1b,
// llama-3.2-1b, llama-2-7b, llama-2-13b, opt-13b, llama-3-8b. Throws Error listing them for an unknown name.
ModelConfig preset_config(const std::string& name);
std::vector<std::string> preset_names();

}  // namespace inferlab
