// Model loading: format detection, the llama2.c checkpoint reader and the dispatch to the
// GGUF and Hugging Face readers.
#include "inferlab/formats/checkpoint.h"

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>

#include "inferlab/error.h"
#include "inferlab/formats/formats.h"
#include "inferlab/experiment/input_checks.h"
#include "inferlab/support/log.h"

namespace inferlab {
namespace fs = std::filesystem;

namespace {

// Reads consecutive fp32 tensors from a file whose size has already been checked.
class TensorReader {
 public:
  TensorReader(std::ifstream& in, const std::string& path) : in_(in), path_(path) {}
  void read(std::vector<float>& out, std::size_t count, const std::string& what) {
    out.resize(count);
    in_.read(reinterpret_cast<char*>(out.data()), static_cast<std::streamsize>(count * sizeof(float)));
    check(in_.good(), path_ + ": read failed in " + what);
  }
  void skip(std::size_t count) { in_.seekg(static_cast<std::streamoff>(count * sizeof(float)), std::ios::cur); }

 private:
  std::ifstream& in_;
  const std::string& path_;
};

// Splits a [n_layers * rows * cols] block into per-layer tensors.
void read_per_layer(TensorReader& r, std::vector<LayerWeights>& layers,
                    std::vector<float> LayerWeights::*field, std::size_t per_layer, const char* name) {
  for (std::size_t l = 0; l < layers.size(); ++l)
    r.read(layers[l].*field, per_layer, std::string(name) + " of layer " + std::to_string(l));
}

bool starts_with_gguf_magic(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char magic[4] = {};
  in.read(magic, 4);
  return in.gcount() == 4 && std::memcmp(magic, "GGUF", 4) == 0;
}

}  // namespace

ModelFormat parse_model_format(const std::string& name) {
  if (name == "auto") return ModelFormat::kAuto;
  if (name == "llama2c") return ModelFormat::kLlama2c;
  if (name == "gguf") return ModelFormat::kGguf;
  if (name == "hf") return ModelFormat::kHuggingFace;
  throw Error("unknown model format '" + name + "'; allowed: auto, llama2c, gguf, hf");
}

const char* model_format_name(ModelFormat format) {
  switch (format) {
    case ModelFormat::kAuto: return "auto";
    case ModelFormat::kLlama2c: return "llama2c";
    case ModelFormat::kGguf: return "gguf";
    case ModelFormat::kHuggingFace: return "hf";
  }
  return "?";
}

ModelFormat detect_model_format(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) return ModelFormat::kHuggingFace;
  // A FIFO or /dev/zero would block or never end; a symlink loop says so.
  require_regular_file(path, "a checkpoint: llama2.c .bin, .gguf, or a Hugging Face folder");
  if (fs::path(path).extension() == ".safetensors") return ModelFormat::kHuggingFace;
  if (starts_with_gguf_magic(path)) return ModelFormat::kGguf;
  if (fs::path(path).extension() == ".gguf")  // the llama2.c reader's message would mislead
    throw Error(path + ": not a GGUF file (the first 4 bytes are not 'GGUF'); expected a GGUF v2/v3 model");
  return ModelFormat::kLlama2c;
}

namespace {

// The llama2.c v0 header: 7 int32.
constexpr std::size_t kLlama2cHeaderBytes = 7 * sizeof(std::int32_t);

// Reads and checks the header at the start of `in`; `fields` gets its values for messages.
ModelConfig read_llama2c_header(std::ifstream& in, const std::string& path, std::string& fields) {
  std::int32_t header[7] = {};
  static_assert(sizeof(header) == kLlama2cHeaderBytes);
  in.read(reinterpret_cast<char*>(header), sizeof(header));
  check(in.good(), path + ": too short for a llama2.c header (28 bytes)");
  const int dim = header[0], hidden = header[1], n_layers = header[2], n_heads = header[3],
            n_kv_heads = header[4], signed_vocab = header[5], seq_len = header[6];
  fields = "dim=" + std::to_string(dim) + " hidden_dim=" + std::to_string(hidden) +
           " n_layers=" + std::to_string(n_layers) + " n_heads=" + std::to_string(n_heads) +
           " n_kv_heads=" + std::to_string(n_kv_heads) + " vocab_size=" + std::to_string(signed_vocab) +
           " seq_len=" + std::to_string(seq_len);
  // Bounds far above any real model, low enough that the size arithmetic below cannot overflow.
  auto in_range = [](int v, int hi) { return v > 0 && v <= hi; };
  const bool plausible = in_range(dim, 1 << 16) && in_range(hidden, 1 << 18) &&
                         in_range(n_layers, 1024) && in_range(n_heads, 1024) &&
                         in_range(n_kv_heads, 1024) && signed_vocab != 0 &&
                         signed_vocab != std::numeric_limits<std::int32_t>::min() &&
                         in_range(signed_vocab < 0 ? -signed_vocab : signed_vocab, 1 << 22) &&
                         in_range(seq_len, 1 << 24);
  check(plausible, path + ": not a llama2.c checkpoint (implausible header " + fields + ")");
  check(dim % n_heads == 0 && n_heads % n_kv_heads == 0 && (dim / n_heads) % 2 == 0,
        path + ": inconsistent llama2.c header (" + fields +
            "): n_heads must divide dim with an even head size, n_kv_heads must divide n_heads");

  ModelConfig c;
  c.name = fs::path(path).stem().string();
  c.dim = dim;
  c.hidden_dim = hidden;
  c.n_layers = n_layers;
  c.n_heads = n_heads;
  c.n_kv_heads = n_kv_heads;
  c.vocab_size = signed_vocab < 0 ? -signed_vocab : signed_vocab;
  c.max_seq_len = seq_len;
  c.tied_classifier = signed_vocab > 0;
  c.rope_style = RopeStyle::kInterleaved;
  c.rope_theta = 10000.0f;
  c.norm_eps = 1e-5f;
  c.validate();
  return c;
}

std::ifstream open_llama2c(const std::string& path) {
  require_regular_file(path, "a llama2.c checkpoint (.bin)");
  std::ifstream in(path, std::ios::binary);
  check(in.good(), path + ": cannot open");
  return in;
}

}  // namespace

ModelConfig read_llama2c_config(const std::string& path) {
  std::ifstream in = open_llama2c(path);
  std::string fields;
  return read_llama2c_header(in, path, fields);
}

ModelWeights load_llama2c(const std::string& path) {
  std::ifstream in = open_llama2c(path);
  std::error_code ec;
  const std::uintmax_t file_size = fs::file_size(path, ec);
  check(!ec, path + ": cannot read size: " + ec.message());
  check(file_size >= kLlama2cHeaderBytes, path + ": " + std::to_string(file_size) +
                                              " bytes, too short for a llama2.c header (28 bytes)");
  std::string fields;
  const ModelConfig c = read_llama2c_header(in, path, fields);
  const int dim = c.dim, hidden = c.hidden_dim, n_layers = c.n_layers, seq_len = c.max_seq_len;

  const std::uint64_t d = static_cast<std::uint64_t>(dim), h = static_cast<std::uint64_t>(hidden),
                      L = static_cast<std::uint64_t>(n_layers),
                      kv = static_cast<std::uint64_t>(c.kv_dim()),
                      v = static_cast<std::uint64_t>(c.vocab_size);
  const std::uint64_t freq = static_cast<std::uint64_t>(seq_len) * static_cast<std::uint64_t>(c.head_dim()) / 2;
  const std::uint64_t weight_floats = v * d + L * (2 * d + 2 * d * d + 2 * kv * d + 3 * h * d) + d +
                                      (c.tied_classifier ? 0 : v * d);
  const std::uint64_t expected = kLlama2cHeaderBytes + (weight_floats + 2 * freq) * sizeof(float);
  check(file_size == expected, path + ": " + std::to_string(file_size) + " bytes, but the header (" +
                                   fields + ") implies " + std::to_string(expected) +
                                   (file_size < expected ? " (truncated file?)" : " (trailing data?)"));

  ModelWeights w;
  w.config = c;
  w.layers.resize(L);
  TensorReader r(in, path);
  r.read(w.token_embedding, v * d, "token_embedding");
  read_per_layer(r, w.layers, &LayerWeights::attn_norm, d, "rms_att_weight");
  read_per_layer(r, w.layers, &LayerWeights::wq, d * d, "wq");
  read_per_layer(r, w.layers, &LayerWeights::wk, kv * d, "wk");
  read_per_layer(r, w.layers, &LayerWeights::wv, kv * d, "wv");
  read_per_layer(r, w.layers, &LayerWeights::wo, d * d, "wo");
  read_per_layer(r, w.layers, &LayerWeights::ffn_norm, d, "rms_ffn_weight");
  read_per_layer(r, w.layers, &LayerWeights::w1, h * d, "w1");
  read_per_layer(r, w.layers, &LayerWeights::w2, d * h, "w2");
  read_per_layer(r, w.layers, &LayerWeights::w3, h * d, "w3");
  r.read(w.final_norm, d, "rms_final_weight");
  r.skip(2 * freq);  // freq_cis_real, freq_cis_imag: RoPE is recomputed from rope_theta
  if (!c.tied_classifier) r.read(w.classifier, v * d, "classifier");
  w.source_bytes = weight_floats * sizeof(float);
  w.validate();
  return w;
}

ModelConfig read_model_config(const std::string& path, ModelFormat format) {
  if (format == ModelFormat::kAuto) format = detect_model_format(path);
  switch (format) {
    case ModelFormat::kLlama2c: return read_llama2c_config(path);
    case ModelFormat::kGguf: return read_gguf_config(path);
    case ModelFormat::kHuggingFace: return read_hf_config(path);
    case ModelFormat::kAuto: break;
  }
  throw Error(path + ": could not determine the model format");
}

LoadedModel load_model(const std::string& path, ModelFormat format, const std::string& tokenizer_path) {
  if (format == ModelFormat::kAuto) format = detect_model_format(path);
  LoadedModel out;
  out.format = format;
  switch (format) {
    case ModelFormat::kLlama2c: {
      out.weights = load_llama2c(path);
      std::string tok = tokenizer_path;
      if (tok.empty()) {
        const fs::path dir = fs::path(path).parent_path();
        const fs::path candidates[] = {
            dir / ("tok" + std::to_string(out.weights.config.vocab_size) + ".bin"),
            dir / "tokenizer.bin"};
        for (const auto& p : candidates) {
          std::error_code ec;
          if (fs::is_regular_file(p, ec)) {
            tok = p.string();
            break;
          }
        }
      }
      if (!tok.empty()) {
        out.tokenizer = load_llama2c_tokenizer(tok, out.weights.config.vocab_size);
        log::debug(path + ": tokenizer " + tok);
      } else {
        log::info(path + ": no tokenizer given and none found beside it (tok" +
                  std::to_string(out.weights.config.vocab_size) + ".bin, tokenizer.bin)");
      }
      return out;
    }
    case ModelFormat::kGguf:
    case ModelFormat::kHuggingFace: {
      out = format == ModelFormat::kGguf ? load_gguf(path) : load_hf(path);
      if (!tokenizer_path.empty()) {  // an explicit tokenizer replaces the embedded one
        const std::string ext = fs::path(tokenizer_path).extension().string();
        if (ext == ".json") out.tokenizer = load_hf_tokenizer(tokenizer_path);
        else if (ext == ".gguf") out.tokenizer = load_gguf_tokenizer(GgufFile::open(tokenizer_path));
        else out.tokenizer = load_llama2c_tokenizer(tokenizer_path, out.weights.config.vocab_size);
      }
      return out;
    }
    case ModelFormat::kAuto: break;
  }
  throw Error(path + ": could not determine the model format");
}

std::unique_ptr<Tokenizer> load_model_tokenizer(const std::string& path, ModelFormat format,
                                                const std::string& tokenizer_path, const std::string& pre_fallback) {
  if (format == ModelFormat::kAuto) format = detect_model_format(path);
  auto from_file = [&](const std::string& tok, int vocab) -> std::unique_ptr<Tokenizer> {
    const std::string ext = fs::path(tok).extension().string();
    if (ext == ".json") return load_hf_tokenizer(tok);
    if (ext == ".gguf") return load_gguf_tokenizer(GgufFile::open(tok), pre_fallback);
    return load_llama2c_tokenizer(tok, vocab);
  };
  std::unique_ptr<Tokenizer> out;
  switch (format) {
    case ModelFormat::kLlama2c: {
      // The vocabulary size is the header's; the tokenizer file as load_model finds it.
      const int vocab = read_llama2c_config(path).vocab_size;
      if (!tokenizer_path.empty()) return from_file(tokenizer_path, vocab);
      const fs::path dir = fs::path(path).parent_path();
      for (const fs::path& p : {dir / ("tok" + std::to_string(vocab) + ".bin"), dir / "tokenizer.bin"}) {
        std::error_code ec;
        if (fs::is_regular_file(p, ec)) return load_llama2c_tokenizer(p.string(), vocab);
      }
      break;
    }
    case ModelFormat::kGguf: {
      if (!tokenizer_path.empty()) return from_file(tokenizer_path, 0);
      const GgufFile f = GgufFile::open(path);
      out = load_gguf_tokenizer(f, pre_fallback);
      if (const GgufValue* kind = f.find("tokenizer.ggml.model"); !out && kind)
        throw Error(path + ": tokenizer model '" + kind->as_string("tokenizer.ggml.model") +
                    "' is not supported (llama, gpt2)");
      break;
    }
    case ModelFormat::kHuggingFace: {
      if (!tokenizer_path.empty()) return from_file(tokenizer_path, 0);
      const fs::path dir = fs::is_directory(path) ? fs::path(path) : fs::path(path).parent_path();
      if (fs::is_regular_file(dir / "tokenizer.json")) out = load_hf_tokenizer((dir / "tokenizer.json").string());
      break;
    }
    case ModelFormat::kAuto: break;
  }
  if (!out) throw Error(path + ": no tokenizer found in or beside the model; pass --tokenizer FILE");
  return out;
}

}  // namespace inferlab
