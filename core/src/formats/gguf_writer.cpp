// ModelWeights -> GGUF v3 (the layout gguf_reader.cpp parses): header, metadata, tensor infos,
// then each tensor's data at an offset aligned to general.alignment (32). Names, shapes and
// keys are the ones load_gguf reads and llama.cpp's "llama" / "qwen2" loaders expect, so the
// same bytes run in both. Matrices are [out, in] row-major, i.e. GGUF dims {in, out}.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>

#include "inferlab/tokenizer/bpe_tokenizer.h"
#include "inferlab/error.h"
#include "inferlab/formats/formats.h"

namespace inferlab {

namespace {

constexpr std::uint64_t kAlignment = 32;

// llama.cpp's llama_ftype for a model whose matrices are all `type`.
std::uint32_t file_type_of(GgmlType type) {
  switch (type) {
    case GgmlType::kF32: return 0;   // LLAMA_FTYPE_ALL_F32
    case GgmlType::kF16: return 1;   // LLAMA_FTYPE_MOSTLY_F16
    case GgmlType::kQ4_0: return 2;  // LLAMA_FTYPE_MOSTLY_Q4_0
    case GgmlType::kQ8_0: return 7;  // LLAMA_FTYPE_MOSTLY_Q8_0
    default: break;
  }
  throw Error("GGUF export: type " + ggml_type_name(static_cast<std::uint32_t>(type)) +
              " is not supported; allowed: F32, F16, Q8_0, Q4_0");
}

// Encodes metadata values (type id + payload) as gguf_reader.cpp decodes them.
class MetadataWriter {
 public:
  std::uint64_t count = 0;
  std::string bytes;

  void u32(const std::string& key, std::uint32_t v) { put(key, GgufValueType::kUint32, pod(v)); }
  void f32(const std::string& key, float v) { put(key, GgufValueType::kFloat32, pod(v)); }
  void str(const std::string& key, const std::string& v) { put(key, GgufValueType::kString, string(v)); }
  void strings(const std::string& key, const std::vector<std::string>& v) {
    std::string p = pod(static_cast<std::uint32_t>(GgufValueType::kString)) + pod<std::uint64_t>(v.size());
    for (const auto& s : v) p += string(s);
    put(key, GgufValueType::kArray, p);
  }
  void floats(const std::string& key, const std::vector<float>& v) {
    std::string p = pod(static_cast<std::uint32_t>(GgufValueType::kFloat32)) + pod<std::uint64_t>(v.size());
    for (float x : v) p += pod(x);
    put(key, GgufValueType::kArray, p);
  }
  void ints(const std::string& key, const std::vector<std::int32_t>& v) {
    std::string p = pod(static_cast<std::uint32_t>(GgufValueType::kInt32)) + pod<std::uint64_t>(v.size());
    for (auto x : v) p += pod(x);
    put(key, GgufValueType::kArray, p);
  }
  // Any value read by GgufFile, re-encoded with its own type.
  void value(const std::string& key, const GgufValue& v) { put(key, v.type, payload(v)); }

  template <typename T>
  static std::string pod(T v) {
    return std::string(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  static std::string string(const std::string& s) { return pod<std::uint64_t>(s.size()) + s; }

 private:
  void put(const std::string& key, GgufValueType type, const std::string& payload) {
    bytes += string(key) + pod(static_cast<std::uint32_t>(type)) + payload;
    ++count;
  }
  static std::string scalar(GgufValueType type, std::int64_t i, double f, const std::string& s) {
    switch (type) {
      case GgufValueType::kUint8: return pod(static_cast<std::uint8_t>(i));
      case GgufValueType::kInt8: return pod(static_cast<std::int8_t>(i));
      case GgufValueType::kUint16: return pod(static_cast<std::uint16_t>(i));
      case GgufValueType::kInt16: return pod(static_cast<std::int16_t>(i));
      case GgufValueType::kUint32: return pod(static_cast<std::uint32_t>(i));
      case GgufValueType::kInt32: return pod(static_cast<std::int32_t>(i));
      case GgufValueType::kFloat32: return pod(static_cast<float>(f));
      case GgufValueType::kBool: return pod(static_cast<std::uint8_t>(i != 0));
      case GgufValueType::kString: return string(s);
      case GgufValueType::kUint64: return pod(static_cast<std::uint64_t>(i));
      case GgufValueType::kInt64: return pod(i);
      case GgufValueType::kFloat64: return pod(f);
      case GgufValueType::kArray: break;
    }
    throw Error("GGUF export: metadata value of type " + std::to_string(static_cast<unsigned>(type)) +
                " cannot be written");
  }
  static std::string payload(const GgufValue& v) {
    if (v.type != GgufValueType::kArray) return scalar(v.type, v.i, v.f, v.str);
    std::string p = pod(static_cast<std::uint32_t>(v.item_type)) + pod<std::uint64_t>(v.array_size());
    if (v.item_type == GgufValueType::kString) {
      for (const auto& s : v.strings) p += string(s);
    } else if (v.item_type == GgufValueType::kArray) {
      for (const auto& a : v.arrays) p += payload(a);
    } else if (v.item_type == GgufValueType::kFloat32 || v.item_type == GgufValueType::kFloat64) {
      for (double f : v.floats) p += scalar(v.item_type, 0, f, "");
    } else {
      for (std::int64_t i : v.ints) p += scalar(v.item_type, i, 0.0, "");
    }
    return p;
  }
};

// SentencePiece pieces keep ' ' (llama2.c); GGUF's "llama" vocabulary writes U+2581 for it.
std::string gguf_piece(const std::string& piece) {
  std::string out;
  for (char ch : piece) out += ch == ' ' ? std::string("\xe2\x96\x81") : std::string(1, ch);
  return out;
}

bool is_byte_piece(const std::string& p) {
  return p.size() == 6 && p.compare(0, 3, "<0x") == 0 && p[5] == '>';
}

// llama.cpp's token types: 1 normal, 2 unknown, 3 control, 6 byte.
void write_sentencepiece(MetadataWriter& m, std::vector<std::string> pieces, std::vector<float> scores, int bos,
                         int eos) {
  std::vector<std::int32_t> types(pieces.size(), 1);
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    if (is_byte_piece(pieces[i])) types[i] = 6;
    if (pieces[i] == "<unk>") types[i] = 2;
  }
  for (int id : {bos, eos})
    if (id >= 0 && static_cast<std::size_t>(id) < pieces.size()) types[static_cast<std::size_t>(id)] = 3;
  m.str("tokenizer.ggml.model", "llama");
  m.strings("tokenizer.ggml.tokens", pieces);
  m.floats("tokenizer.ggml.scores", scores);
  m.ints("tokenizer.ggml.token_type", types);
  m.u32("tokenizer.ggml.bos_token_id", static_cast<std::uint32_t>(bos));
  m.u32("tokenizer.ggml.eos_token_id", static_cast<std::uint32_t>(eos));
  m.u32("tokenizer.ggml.unknown_token_id", 0);
}

// The placeholder vocabulary (see GgufExportOptions): byte tokens keep llama.cpp's SentencePiece
// loader happy (it looks up <0x0A> for the newline token).
void write_synthetic_tokenizer(MetadataWriter& m, const ModelConfig& c) {
  const auto n = static_cast<std::size_t>(c.vocab_size);
  std::vector<std::string> pieces(n);
  std::vector<float> scores(n, 0.0f);
  for (std::size_t i = 0; i < n; ++i) {
    pieces[i] = "\xe2\x96\x81t" + std::to_string(i);
    scores[i] = -static_cast<float>(i);
  }
  pieces[0] = "<unk>";
  for (std::size_t b = 0; b < 256 && 3 + b < n; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", static_cast<unsigned>(b));
    pieces[3 + b] = buf;
  }
  if (c.bos_id >= 0 && static_cast<std::size_t>(c.bos_id) < n) pieces[static_cast<std::size_t>(c.bos_id)] = "<s>";
  if (c.eos_id >= 0 && static_cast<std::size_t>(c.eos_id) < n) pieces[static_cast<std::size_t>(c.eos_id)] = "</s>";
  write_sentencepiece(m, std::move(pieces), std::move(scores), c.bos_id, c.eos_id);
}

// Returns the summary's tokenizer word.
std::string write_tokenizer(MetadataWriter& m, const ModelWeights& w, const GgufExportOptions& o) {
  if (o.synthetic_tokenizer || (!o.tokenizer_source && !o.tokenizer)) {
    write_synthetic_tokenizer(m, w.config);
    return "synthetic";
  }
  if (o.tokenizer_source) {
    for (const auto& [key, v] : o.tokenizer_source->metadata())
      if (key.rfind("tokenizer.", 0) == 0) m.value(key, v);
    return "copied";
  }
  const auto* spm = dynamic_cast<const SentencePieceTokenizer*>(o.tokenizer);
  if (!spm)
    throw Error("GGUF export: the model's tokenizer (not SentencePiece, and not from a GGUF file) cannot be written; "
                "allowed: a GGUF or llama2.c source, or the placeholder vocabulary (--tokenizer synthetic)");
  std::vector<std::string> pieces;
  std::vector<float> scores;
  for (int i = 0; i < spm->vocab_size(); ++i) {
    pieces.push_back(gguf_piece(spm->piece(i)));
    scores.push_back(spm->score(i));
  }
  write_sentencepiece(m, std::move(pieces), std::move(scores), spm->bos_id(), spm->eos_id());
  return "sentencepiece";
}

// Half-rotation rows (pair i of a head = rows i and i + head_dim/2) -> interleaved (rows 2i,
// 2i + 1), as convert_hf_to_gguf.py permutes Q and K for llama.cpp's "llama".
std::vector<float> interleave_rope_rows(const std::vector<float>& w, int heads, int head_dim, int in) {
  std::vector<float> out(w.size());  // [heads * head_dim, in]
  const auto row = static_cast<std::size_t>(in);
  for (int h = 0; h < heads; ++h)
    for (int i = 0; i < head_dim / 2; ++i)
      for (int j = 0; j < 2; ++j) {
        const auto from = static_cast<std::size_t>(h * head_dim + j * head_dim / 2 + i);
        const auto to = static_cast<std::size_t>(h * head_dim + 2 * i + j);
        std::copy_n(w.begin() + static_cast<std::ptrdiff_t>(from * row), row,
                    out.begin() + static_cast<std::ptrdiff_t>(to * row));
      }
  return out;
}

struct PendingTensor {
  std::string name;
  std::vector<std::uint64_t> dims;  // ne0 first
  GgmlType type;
  std::function<std::vector<float>()> values;  // made when written: one matrix in memory at a time
  std::uint64_t offset = 0, bytes = 0;
};

}  // namespace

GgufExportSummary write_gguf(const std::string& path, const ModelWeights& w, const GgufExportOptions& o) {
  const ModelConfig& c = w.config;
  w.validate();  // every tensor's size, lazy matrices included, before the file is opened
  GgufExportSummary summary;
  summary.architecture = c.qkv_bias ? "qwen2" : "llama";
  if (c.qkv_bias && c.rope_style != RopeStyle::kHalf)
    throw Error("GGUF export: a model with QKV bias and interleaved RoPE has no llama.cpp architecture; allowed: "
                "QKV bias with half-rotation RoPE (qwen2) or no bias (llama)");
  const bool permute = !c.qkv_bias && c.rope_style == RopeStyle::kHalf;
  const std::string& a = summary.architecture;
  MetadataWriter m;
  m.str("general.architecture", a);
  m.str("general.name", c.name);
  m.u32("general.alignment", static_cast<std::uint32_t>(kAlignment));
  m.u32("general.file_type", file_type_of(o.type));
  m.u32(a + ".context_length", static_cast<std::uint32_t>(c.max_seq_len));
  m.u32(a + ".embedding_length", static_cast<std::uint32_t>(c.dim));
  m.u32(a + ".feed_forward_length", static_cast<std::uint32_t>(c.hidden_dim));
  m.u32(a + ".block_count", static_cast<std::uint32_t>(c.n_layers));
  m.u32(a + ".attention.head_count", static_cast<std::uint32_t>(c.n_heads));
  m.u32(a + ".attention.head_count_kv", static_cast<std::uint32_t>(c.n_kv_heads));
  m.u32(a + ".rope.dimension_count", static_cast<std::uint32_t>(c.head_dim()));
  m.u32(a + ".vocab_size", static_cast<std::uint32_t>(c.vocab_size));
  m.f32(a + ".rope.freq_base", c.rope_theta);
  m.f32(a + ".attention.layer_norm_rms_epsilon", c.norm_eps);
  summary.tokenizer = write_tokenizer(m, w, o);

  // Matrices come from ModelWeights::matrix when written (a GGUF's blocks dequantised, a preset's
  // seeded values drawn), so a model is never held in fp32 whole; vectors are copied.
  std::vector<PendingTensor> tensors;
  auto vector_tensor = [&](const std::string& name, const std::vector<float>& v) {
    tensors.push_back({name, {v.size()}, GgmlType::kF32, [&v] { return v; }});
  };
  auto matrix = [&](const std::string& name, const std::string& linear, int out, int in, int rope_heads = 0) {
    GgmlType t = o.type;
    if (static_cast<std::size_t>(in) % ggml_block_elements(t) != 0) {
      t = GgmlType::kF32;
      summary.kept_f32.push_back(name);
    }
    auto values = [&w, &c, linear, rope_heads] {
      std::vector<float> v = w.matrix(linear);
      return rope_heads > 0 ? interleave_rope_rows(v, rope_heads, c.head_dim(), c.dim) : v;
    };
    tensors.push_back({name, {static_cast<std::uint64_t>(in), static_cast<std::uint64_t>(out)}, t, values});
  };
  matrix("token_embd.weight", c.tied_classifier ? "classifier" : "embedding", c.vocab_size, c.dim);
  for (std::size_t l = 0; l < w.layers.size(); ++l) {
    const LayerWeights& L = w.layers[l];
    const std::string p = "blk." + std::to_string(l) + ".", e = "layers." + std::to_string(l) + ".";
    vector_tensor(p + "attn_norm.weight", L.attn_norm);
    matrix(p + "attn_q.weight", e + "wq", c.n_heads * c.head_dim(), c.dim, permute ? c.n_heads : 0);
    matrix(p + "attn_k.weight", e + "wk", c.kv_dim(), c.dim, permute ? c.n_kv_heads : 0);
    matrix(p + "attn_v.weight", e + "wv", c.kv_dim(), c.dim);
    matrix(p + "attn_output.weight", e + "wo", c.dim, c.n_heads * c.head_dim());
    if (c.qkv_bias) {
      vector_tensor(p + "attn_q.bias", L.bq);
      vector_tensor(p + "attn_k.bias", L.bk);
      vector_tensor(p + "attn_v.bias", L.bv);
    }
    vector_tensor(p + "ffn_norm.weight", L.ffn_norm);
    matrix(p + "ffn_gate.weight", e + "w1", c.hidden_dim, c.dim);
    matrix(p + "ffn_down.weight", e + "w2", c.dim, c.hidden_dim);
    matrix(p + "ffn_up.weight", e + "w3", c.hidden_dim, c.dim);
  }
  vector_tensor("output_norm.weight", w.final_norm);
  if (!c.tied_classifier) matrix("output.weight", "classifier", c.vocab_size, c.dim);

  std::string infos;
  std::uint64_t offset = 0;
  for (PendingTensor& t : tensors) {
    std::uint64_t n = 1;
    for (auto d : t.dims) n *= d;
    t.bytes = ggml_tensor_bytes(t.type, n);
    t.offset = offset;
    offset += (t.bytes + kAlignment - 1) / kAlignment * kAlignment;
    summary.tensor_bytes += t.bytes;
    infos += MetadataWriter::string(t.name) + MetadataWriter::pod(static_cast<std::uint32_t>(t.dims.size()));
    for (auto d : t.dims) infos += MetadataWriter::pod(d);
    infos += MetadataWriter::pod(static_cast<std::uint32_t>(t.type)) + MetadataWriter::pod(t.offset);
  }
  std::string header = "GGUF" + MetadataWriter::pod<std::uint32_t>(3) + MetadataWriter::pod<std::uint64_t>(tensors.size()) +
                       MetadataWriter::pod<std::uint64_t>(m.count) + m.bytes + infos;
  header.resize((header.size() + kAlignment - 1) / kAlignment * kAlignment, '\0');

  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  if (!f) throw Error(path + ": cannot open for writing");
  f.write(header.data(), static_cast<std::streamsize>(header.size()));
  std::vector<std::uint8_t> buf;
  for (const PendingTensor& t : tensors) {
    buf.assign((t.bytes + kAlignment - 1) / kAlignment * kAlignment, 0);
    const std::vector<float> values = t.values();
    quantize(t.type, values.data(), values.size(), buf.data());
    f.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(buf.size()));
  }
  f.flush();
  if (!f) throw Error(path + ": write failed (disk full?)");
  return summary;
}

}  // namespace inferlab
