// Checkpoint formats from the llama.cpp and Hugging Face worlds: GGUF files (v2, v3) and
// Hugging Face snapshot folders (config.json + safetensors). Both load into the engine's
// ModelWeights: float tensors as fp32; a GGUF's block-quantized linears as their blocks only
// (LayerWeights::blocks, ModelWeights::table_blocks), dequantised per matrix when a strategy
// asks for values (ModelWeights::matrix). ModelWeights::source_bytes is the file's tensor bytes.
//
// Every failure on a bad file (wrong magic, unsupported version or tensor type, truncation at
// any offset, a tensor whose shape disagrees with the config, a missing shard) throws
// inferlab::Error("<path>: <problem>"). Readers bound every read by the file size, so a corrupt
// count never causes an absurd allocation.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "inferlab/formats/checkpoint.h"
#include "inferlab/ggml_types.h"
#include "inferlab/tokenizer/tokenizer.h"

namespace inferlab {

// ---------------------------------------------------------------------------------------------
// GGML tensor types and dequantisation

// For a checkpoint whose linears are stored block-quantized (source_linear_types: a GGUF's
// Q4_1, ...): "linears stored as Q4_1: the fp32 reference (quantization none) is the dequantised
// file, not a float checkpoint, so quality metrics are measured against it"; "" otherwise.
std::string quantized_source_note(const std::map<std::string, std::uint32_t>& source_linear_types);
// dst[0..n) = the n elements encoded in src (ggml_tensor_bytes(type, n) bytes).
void dequantize(GgmlType type, const std::uint8_t* src, std::size_t n, float* dst);

// fp32 -> GGML blocks (ggml_quantize.cpp): dst[0..ggml_tensor_bytes(type, n)) = src[0..n) encoded
// with ggml's reference rounding (quantize_row_q8_0_ref / quantize_row_q4_0_ref), so the bytes
// equal llama-quantize's for the same input. Throws Error for a type ggml_type_quantizable
// rejects or an n that is not a multiple of the block.
bool ggml_type_quantizable(GgmlType type);  // F32, F16, Q8_0, Q4_0
void quantize(GgmlType type, const float* src, std::size_t n, std::uint8_t* dst);


// ---------------------------------------------------------------------------------------------
// GGUF

enum class GgufValueType : std::uint32_t {
  kUint8 = 0, kInt8 = 1, kUint16 = 2, kInt16 = 3, kUint32 = 4, kInt32 = 5, kFloat32 = 6,
  kBool = 7, kString = 8, kArray = 9, kUint64 = 10, kInt64 = 11, kFloat64 = 12,
};

// One metadata value. Scalars keep their type; arrays keep their items compactly by kind.
struct GgufValue {
  GgufValueType type = GgufValueType::kUint8;
  GgufValueType item_type = GgufValueType::kUint8;  // arrays only
  std::int64_t i = 0;   // integer and bool scalars (uint64 above INT64_MAX is stored wrapped)
  double f = 0.0;       // float scalars
  std::string str;      // strings
  std::vector<std::int64_t> ints;    // arrays of integers or bools
  std::vector<double> floats;        // arrays of floats
  std::vector<std::string> strings;  // arrays of strings
  std::vector<GgufValue> arrays;     // arrays of arrays

  bool is_integer() const;
  bool is_float() const;
  std::size_t array_size() const;  // 0 for scalars
  // Throw Error (naming `key`) when the value is not of a fitting type.
  std::int64_t as_int(const std::string& key) const;
  double as_float(const std::string& key) const;  // integers convert too
  const std::string& as_string(const std::string& key) const;
  const std::vector<std::string>& as_strings(const std::string& key) const;
  std::vector<float> as_floats(const std::string& key) const;  // integer arrays convert too
  const std::vector<std::int64_t>& as_ints(const std::string& key) const;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<std::uint64_t> dims;  // ne[0] first: the fastest-varying (in_features) dimension
  std::uint32_t type = 0;           // a GgmlType id (possibly unsupported)
  std::uint64_t offset = 0;         // absolute file offset of the data
  std::uint64_t bytes = 0;          // 0 when the type is unsupported
  std::uint64_t elements() const;
};

// A parsed GGUF header: metadata and tensor infos. Tensor data is read on demand.
class GgufFile {
 public:
  // Parses header, metadata and tensor infos; checks every tensor lies inside the file.
  static GgufFile open(const std::string& path);

  const std::string& path() const { return path_; }
  std::uint32_t version() const { return version_; }
  std::uint64_t alignment() const { return alignment_; }
  std::uint64_t data_offset() const { return data_offset_; }
  std::uint64_t file_size() const { return file_size_; }
  const std::map<std::string, GgufValue>& metadata() const { return metadata_; }
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }

  // Null when absent.
  const GgufValue* find(const std::string& key) const;
  const GgufTensorInfo* find_tensor(const std::string& name) const;
  // Raw bytes of a tensor / the tensor dequantised to fp32. Throw Error for an unsupported type.
  std::vector<std::uint8_t> read_bytes(const GgufTensorInfo& tensor) const;
  std::vector<float> read_f32(const GgufTensorInfo& tensor) const;

 private:
  std::string path_;
  std::uint32_t version_ = 0;
  std::uint64_t alignment_ = 32;
  std::uint64_t data_offset_ = 0;
  std::uint64_t file_size_ = 0;
  std::map<std::string, GgufValue> metadata_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, std::size_t> tensor_index_;
};

// Loads a GGUF of architecture "llama" (interleaved RoPE) or "qwen2" (half RoPE, QKV bias),
// with its tokenizer ("llama" => SentencePieceTokenizer, "gpt2" => ByteLevelBpeTokenizer).
// An output.weight absent or bit-identical to token_embd.weight gives a tied classifier.
LoadedModel load_gguf(const std::string& path);
// Its config from the metadata alone (see read_model_config).
ModelConfig read_gguf_config(const std::string& path);
// The tokenizer embedded in a GGUF, or null when it has none. An unknown tokenizer.ggml.pre is
// an Error listing the known names, unless pre_fallback names a known pre-tokenizer to use
// instead (with a warning naming both).
std::unique_ptr<Tokenizer> load_gguf_tokenizer(const GgufFile& file, const std::string& pre_fallback = "");

// GGUF export (gguf_writer.cpp): a GGUF v3 file llama.cpp loads and load_gguf reads back.
struct GgufExportOptions {
  // The type of every matrix (embedding, projections, classifier) whose rows are a multiple of
  // its block; other matrices and all norms and biases are written as F32 (exactly as held).
  GgmlType type = GgmlType::kF32;
  // The tokenizer to embed: tokenizer_source's "tokenizer.*" metadata copied verbatim when set,
  // else a SentencePieceTokenizer's pieces, scores and token types; neither (null, or
  // synthetic_tokenizer): a placeholder SentencePiece vocabulary of config.vocab_size tokens
  // (<unk>, <s>/</s> at bos_id/eos_id, the 256 <0xXX> byte tokens, then "▁t<id>"), which is
  // what llama.cpp needs to load and bench a model that has none. Any other tokenizer kind
  // (byte-level BPE from a Hugging Face folder) is an Error unless synthetic_tokenizer.
  const GgufFile* tokenizer_source = nullptr;
  const Tokenizer* tokenizer = nullptr;
  bool synthetic_tokenizer = false;
};
struct GgufExportSummary {
  std::string architecture;             // "llama" (interleaved RoPE) or "qwen2" (QKV bias)
  std::string tokenizer;                // "copied", "sentencepiece" or "synthetic"
  std::vector<std::string> kept_f32;    // matrices not quantised (row length not a block multiple)
  std::uint64_t tensor_bytes = 0;       // sum of the tensors' data bytes
};
// Writes `weights` to `path`: architecture "llama" (Q/K rows of a half-rotation model
// are permuted to the interleaved layout llama.cpp's "llama" expects; a model with QKV bias is
// written as "qwen2", which keeps the half rotation), general.file_type naming options.type,
// no output.weight for a tied classifier. Throws Error naming the path on an I/O failure.
GgufExportSummary write_gguf(const std::string& path, const ModelWeights& weights, const GgufExportOptions& options);

// Hugging Face export (hf_writer.cpp): config.json and model.safetensors, which transformers'
// LlamaForCausalLM (Qwen2ForCausalLM with QKV bias) and load_hf read; the peer of
// scripts/gpu_peers.py runs the very weights inferlab runs. No tokenizer is written.
struct HfExportOptions {
  std::string dtype = "F32";  // F32, F16 or BF16 (every tensor; F16/BF16 round to nearest even)
};
struct HfExportSummary {
  std::string model_type;        // "llama" or "qwen2" (QKV bias)
  bool permuted = false;         // Q/K rows (and biases) moved from interleaved to half rotation
  std::uint64_t tensor_bytes = 0;
};
// Writes into `dir` (created if absent). A model with interleaved RoPE has its Q/K rows
// permuted to Hugging Face's half-rotation order, so it computes the same function. Throws Error
// naming the file when config.json or model.safetensors already exists there (never
// overwritten), for another dtype, or on an I/O failure.
HfExportSummary write_hf(const std::string& dir, const ModelWeights& weights, const HfExportOptions& options);

// ---------------------------------------------------------------------------------------------
// Hugging Face snapshot folders

// Loads config.json (model_type llama or qwen2), model.safetensors or the shards listed in
// model.safetensors.index.json (F32, F16, BF16), and tokenizer.json when present and a
// byte-level BPE (otherwise the tokenizer is null and a warning is logged).
// Hugging Face stores Q/K for the half-rotation RoPE, so config.rope_style = kHalf.
LoadedModel load_hf(const std::string& dir);
// config.json alone (see read_model_config).
ModelConfig read_hf_config(const std::string& dir);
// A Hugging Face tokenizer.json with a byte-level BPE model. Throws Error for anything else.
std::unique_ptr<Tokenizer> load_hf_tokenizer(const std::string& path);

}  // namespace inferlab
