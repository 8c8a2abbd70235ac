// Loading a model from disk: the format is detected from the file unless given.
#pragma once
#include <memory>
#include <string>

#include "inferlab/tokenizer/tokenizer.h"
#include "inferlab/model/weights.h"

namespace inferlab {

enum class ModelFormat { kAuto, kLlama2c, kGguf, kHuggingFace };

// "auto", "llama2c", "gguf", "hf"; throws Error listing them otherwise.
ModelFormat parse_model_format(const std::string& name);
const char* model_format_name(ModelFormat format);
// Looks at the path (folder => hf) and the first bytes (GGUF magic) to tell the format.
ModelFormat detect_model_format(const std::string& path);

struct LoadedModel {
  ModelWeights weights;
  std::unique_ptr<Tokenizer> tokenizer;  // null when none was found or given
  ModelFormat format = ModelFormat::kAuto;
};

// Loads weights and, where the format carries one or tokenizer_path names one, a tokenizer.
// For llama2c without tokenizer_path, tok<vocab>.bin or tokenizer.bin beside the model is used.
// Every failure (missing, truncated, corrupt, unsupported) throws Error naming the file.
LoadedModel load_model(const std::string& path, ModelFormat format = ModelFormat::kAuto,
                       const std::string& tokenizer_path = "");

// The tokenizer load_model would give, reading no tensor data (a GGUF's metadata, a Hugging
// Face folder's tokenizer.json, a llama2.c tokenizer file): for tokenising without a model, and
// for vocabulary-only files. Throws Error when there is none.
// pre_fallback: see load_gguf_tokenizer.
std::unique_ptr<Tokenizer> load_model_tokenizer(const std::string& path, ModelFormat format = ModelFormat::kAuto,
                                                const std::string& tokenizer_path = "", const std::string& pre_fallback = "");

// The model's config from the checkpoint's header alone — llama2.c: its 28-byte header; GGUF:
// metadata and tensor infos; Hugging Face: config.json — reading no tensor data and no
// tokenizer. Throws Error as load_model does for a bad header; truncated or corrupt tensor data
// is found only by load_model. The fields equal load_model's config, except tied_classifier for
// a GGUF whose output.weight is byte for byte the embedding: untied here, tied once loaded.
ModelConfig read_model_config(const std::string& path, ModelFormat format = ModelFormat::kAuto);

// llama2.c checkpoint (legacy v0 header: dim, hidden_dim, n_layers, n_heads, n_kv_heads,
// vocab_size (negative = separate classifier), seq_len; then fp32 tensors).
ModelWeights load_llama2c(const std::string& path);
// Its header alone (see read_model_config).
ModelConfig read_llama2c_config(const std::string& path);

}  // namespace inferlab
