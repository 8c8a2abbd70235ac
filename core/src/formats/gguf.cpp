// GGUF -> ModelWeights: the llama-architecture keys and tensor names (also "qwen2"), tensors
// dequantised to fp32, and the embedded tokenizer. GGUF lists dimensions fastest-varying first,
// so a [ne0 = in, ne1 = out] tensor is already our row-major [out, in]: no transposes.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>

#include "inferlab/tokenizer/bpe_tokenizer.h"
#include "inferlab/error.h"
#include "inferlab/formats/formats.h"
#include "inferlab/support/log.h"
#include "inferlab/tokenizer/pretokenizer.h"
#include "tokenizer/pretokenizer_patterns.h"

namespace inferlab {

namespace {

std::string dims_string(const std::vector<std::uint64_t>& dims) {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

// Each layer's linears: the engine's name (after "layers.<l>.") and the GGUF's (after "blk.<l>.").
struct LinearTensorName {
  const char* engine;
  const char* gguf;
};
constexpr LinearTensorName kLayerLinears[] = {
    {"wq", "attn_q.weight"}, {"wk", "attn_k.weight"},   {"wv", "attn_v.weight"}, {"wo", "attn_output.weight"},
    {"w1", "ffn_gate.weight"}, {"w2", "ffn_down.weight"}, {"w3", "ffn_up.weight"}};

// The GGUF tensor name of an engine linear of layer l.
std::string gguf_linear_name(int l, const char* gguf) { return "blk." + std::to_string(l) + "." + gguf; }

class GgufModelReader {
 public:
  explicit GgufModelReader(const GgufFile& file) : f_(file) {}

  // Required keys are sizes: 0 would fail later with an unrelated message (RoPE, head size).
  std::int64_t int_key(const std::string& key, std::int64_t fallback, bool required) const {
    const std::int64_t lo = required ? 1 : 0;
    const GgufValue* v = f_.find(key);
    if (!v) {
      if (required) fail("missing metadata key '" + key + "'");
      return fallback;
    }
    const std::int64_t x = v->as_int(key);
    if (x < lo || x > (1ll << 30))
      fail("metadata '" + key + "' = " + std::to_string(x) + " is out of range; allowed: " + std::to_string(lo) +
           " .. 2^30");
    return x;
  }
  double float_key(const std::string& key, double fallback) const {
    const GgufValue* v = f_.find(key);
    return v ? v->as_float(key) : fallback;
  }

  // Reads `name` (ne0 first) as fp32 after checking its shape against `expect`. A linear's
  // block-quantized bytes are kept in `blocks` under its engine name `linear` instead, and it
  // returns no values (ModelWeights::matrix dequantises them when asked).
  std::vector<float> tensor(const std::string& name, std::vector<std::uint64_t> expect,
                            bool required = true, const std::string& linear = "") {
    const GgufTensorInfo* t = f_.find_tensor(name);
    if (!t) {
      if (required) fail("missing tensor '" + name + "'");
      return {};
    }
    std::vector<std::uint64_t> dims = t->dims;
    while (dims.size() > 1 && dims.back() == 1) dims.pop_back();
    if (dims != expect)
      fail("tensor '" + name + "' has shape " + dims_string(t->dims) + ", the config needs " +
           dims_string(expect));
    if (!ggml_type_supported(t->type))
      fail("tensor '" + name + "' has unsupported type " + ggml_type_name(t->type) +
           " (supported: " + ggml_supported_type_names() + ")");
    source_bytes += t->bytes;
    used.push_back(name);
    const auto type = static_cast<GgmlType>(t->type);
    std::vector<std::uint8_t> bytes = f_.read_bytes(*t);
    if (!linear.empty() && ggml_type_is_quantized(type)) {
      blocks[linear] = SourceBlocks{t->type, std::move(bytes)};
      return {};
    }
    std::vector<float> values(static_cast<std::size_t>(t->elements()));
    dequantize(type, bytes.data(), values.size(), values.data());
    return values;
  }

  [[noreturn]] void fail(const std::string& problem) const { throw Error(f_.path() + ": " + problem); }

  std::uint64_t source_bytes = 0;
  std::vector<std::string> used;
  std::map<std::string, SourceBlocks> blocks;

 private:
  const GgufFile& f_;
};

ModelConfig read_config(const GgufFile& f, const GgufModelReader& r, const std::string& arch) {
  ModelConfig c;
  c.name = std::filesystem::path(f.path()).stem().string();
  c.dim = static_cast<int>(r.int_key(arch + ".embedding_length", 0, true));
  c.hidden_dim = static_cast<int>(r.int_key(arch + ".feed_forward_length", 0, true));
  c.n_layers = static_cast<int>(r.int_key(arch + ".block_count", 0, true));
  c.n_heads = static_cast<int>(r.int_key(arch + ".attention.head_count", 0, true));
  c.n_kv_heads = static_cast<int>(r.int_key(arch + ".attention.head_count_kv", c.n_heads, false));
  c.max_seq_len = static_cast<int>(r.int_key(arch + ".context_length", 2048, false));
  c.rope_theta = static_cast<float>(r.float_key(arch + ".rope.freq_base", 10000.0));
  c.norm_eps = static_cast<float>(r.float_key(arch + ".attention.layer_norm_rms_epsilon", 1e-5));
  if (c.n_heads <= 0 || c.dim % c.n_heads != 0)
    r.fail("attention.head_count " + std::to_string(c.n_heads) + " does not divide embedding_length " +
           std::to_string(c.dim));
  const int head_dim = c.dim / c.n_heads;
  const std::int64_t rot = r.int_key(arch + ".rope.dimension_count", head_dim, false);
  if (rot > head_dim)
    r.fail("rope.dimension_count " + std::to_string(rot) + " exceeds the head dim " + std::to_string(head_dim) +
           " (embedding_length / head_count); allowed: " + std::to_string(head_dim));
  if (rot != head_dim)
    r.fail("partial rotary embeddings (rope.dimension_count " + std::to_string(rot) + " < head dim " +
           std::to_string(head_dim) + ") are not supported; allowed: " + std::to_string(head_dim));
  const std::int64_t key_length = r.int_key(arch + ".attention.key_length", head_dim, false);
  if (key_length != head_dim)
    r.fail("attention.key_length " + std::to_string(key_length) + " differs from embedding_length / head_count (" +
           std::to_string(head_dim) + "): not supported");
  // Vocabulary: the explicit key, else the tokenizer's size, else the embedding's rows.
  std::int64_t vocab = r.int_key(arch + ".vocab_size", 0, false);
  if (vocab == 0) {
    if (const GgufValue* toks = f.find("tokenizer.ggml.tokens")) vocab = static_cast<std::int64_t>(toks->array_size());
  }
  if (vocab == 0) {
    if (const GgufTensorInfo* e = f.find_tensor("token_embd.weight"); e && e->dims.size() == 2)
      vocab = static_cast<std::int64_t>(e->dims[1]);
  }
  c.vocab_size = static_cast<int>(vocab);
  c.rope_style = arch == "qwen2" ? RopeStyle::kHalf : RopeStyle::kInterleaved;
  c.qkv_bias = arch == "qwen2";
  auto token_id = [&](const char* key, int fallback) {
    const GgufValue* v = f.find(key);
    const std::int64_t id = v ? v->as_int(key) : fallback;
    return id >= 0 && id < vocab ? static_cast<int>(id) : fallback;
  };
  c.bos_id = token_id("tokenizer.ggml.bos_token_id", 1);
  c.eos_id = token_id("tokenizer.ggml.eos_token_id", 2);
  return c;
}

// The architecture check and the checked config. tied_classifier says only whether an
// output.weight exists; load_gguf also ties one identical to the embedding.
ModelConfig gguf_config(const GgufFile& f, const GgufModelReader& r) {
  const GgufValue* arch_v = f.find("general.architecture");
  if (!arch_v) r.fail("missing metadata key 'general.architecture'");
  const std::string arch = arch_v->as_string("general.architecture");
  if (arch != "llama" && arch != "qwen2")
    r.fail("architecture '" + arch + "' is not supported (llama, qwen2)");
  ModelConfig c = read_config(f, r, arch);
  c.tied_classifier = f.find_tensor("output.weight") == nullptr;
  c.validate();
  // block_count against the layers the file holds (blk.N. tensors): a header claiming a million
  // layers is refused here, naming the mismatch, not later as a memory estimate of hundreds of GiB.
  int in_file = 0;
  for (const GgufTensorInfo& t : f.tensors()) {
    if (t.name.rfind("blk.", 0) != 0) continue;
    int l = 0;
    const auto [end, ec] = std::from_chars(t.name.data() + 4, t.name.data() + t.name.size(), l);
    if (ec == std::errc() && end < t.name.data() + t.name.size() && *end == '.') in_file = std::max(in_file, l + 1);
  }
  if (!f.tensors().empty() && c.n_layers > in_file)
    r.fail("block_count " + std::to_string(c.n_layers) + ", but the file's tensors cover " + std::to_string(in_file) +
           " layer(s) (blk.0 .. blk." + std::to_string(in_file - 1) + "); allowed: block_count <= " +
           std::to_string(in_file));
  for (int l = 0; l < c.n_layers && static_cast<std::size_t>(l) < f.tensors().size(); ++l)
    for (const LinearTensorName& n : kLayerLinears)
      if (const GgufTensorInfo* t = f.find_tensor(gguf_linear_name(l, n.gguf)))
        c.source_linear_types["layers." + std::to_string(l) + "." + n.engine] = t->type;
  if (const GgufTensorInfo* t = f.find_tensor(c.tied_classifier ? "token_embd.weight" : "output.weight"))
    c.source_linear_types["classifier"] = t->type;
  // A separate classifier leaves the embedding table a linear of its own (its rows are looked up).
  if (const GgufTensorInfo* t = f.find_tensor("token_embd.weight"); t && !c.tied_classifier)
    c.source_linear_types["embedding"] = t->type;
  return c;
}

// Runs fn, prefixing "<path>: " to an Error that does not name the file yet.
template <typename Fn>
auto naming_path(const std::string& path, Fn fn) {
  try {
    return fn();
  } catch (const Error& e) {
    const std::string what = e.what();
    if (what.rfind(path + ":", 0) == 0) throw;
    throw Error(path + ": " + what);
  }
}

}  // namespace

ModelConfig read_gguf_config(const std::string& path) {
  return naming_path(path, [&] {
    const GgufFile f = GgufFile::open(path);
    return gguf_config(f, GgufModelReader(f));
  });
}

namespace {

// tokenizer.ggml.token_type, each one of llama.cpp's types: 0 undefined, 1 normal, 2 unknown,
// 3 control, 4 user-defined, 5 unused, 6 byte. Another value is a damaged file, not a normal token.
const std::vector<std::int64_t>& checked_token_types(const GgufFile& f, const GgufValue& types) {
  const auto& t = types.as_ints("tokenizer.ggml.token_type");
  for (std::size_t i = 0; i < t.size(); ++i)
    if (t[i] < 0 || t[i] > 6)
      throw Error(f.path() + ": tokenizer.ggml.token_type of token " + std::to_string(i) + " is " + std::to_string(t[i]) +
                  "; allowed: 0 .. 6 (undefined, normal, unknown, control, user-defined, unused, byte)");
  return t;
}

}  // namespace

std::unique_ptr<Tokenizer> load_gguf_tokenizer(const GgufFile& f, const std::string& pre_fallback) {
  const GgufValue* model = f.find("tokenizer.ggml.model");
  const GgufValue* tokens_v = f.find("tokenizer.ggml.tokens");
  if (!model || !tokens_v) return nullptr;
  const std::string& kind = model->as_string("tokenizer.ggml.model");
  std::vector<std::string> tokens = tokens_v->as_strings("tokenizer.ggml.tokens");
  const auto n = static_cast<std::int64_t>(tokens.size());
  // A vocabulary of empty strings encodes nothing: refused here, naming the file, rather than
  // at the first encode as "no piece for input".
  if (std::all_of(tokens.begin(), tokens.end(), [](const std::string& t) { return t.empty(); }))
    throw Error(f.path() + ": tokenizer.ggml.tokens: all " + std::to_string(tokens.size()) +
                " token strings are empty; allowed: a vocabulary of non-empty pieces");
  auto id_key = [&](const char* key, std::int64_t fallback) {
    const GgufValue* v = f.find(key);
    const std::int64_t id = v ? v->as_int(key) : fallback;
    return id >= 0 && id < n ? static_cast<int>(id) : -1;
  };
  const int bos = id_key("tokenizer.ggml.bos_token_id", 1);
  const int eos = id_key("tokenizer.ggml.eos_token_id", 2);

  std::unique_ptr<Tokenizer> tok;
  TokenizerConventions conv;
  if (kind == "llama") {
    std::vector<float> scores(tokens.size(), 0.0f);
    if (const GgufValue* s = f.find("tokenizer.ggml.scores")) {
      scores = s->as_floats("tokenizer.ggml.scores");
      for (std::size_t i = 0; i < scores.size(); ++i)
        if (!std::isfinite(scores[i]))
          throw Error(f.path() + ": tokenizer.ggml.scores[" + std::to_string(i) + "] = " + std::to_string(scores[i]) +
                      "; allowed: finite scores");
      if (scores.size() != tokens.size())
        throw Error(f.path() + ": tokenizer.ggml.scores has " + std::to_string(scores.size()) +
                    " entries for " + std::to_string(tokens.size()) + " tokens");
    }
    if (bos < 0 || eos < 0) throw Error(f.path() + ": tokenizer bos/eos ids outside the vocabulary");
    // GGUF keeps SentencePiece's U+2581 for spaces; the llama2.c-style tokenizer uses ' '.
    for (std::string& t : tokens) {
      if (t.find("\xe2\x96\x81") == std::string::npos) continue;
      std::string spaced;
      for (std::size_t i = 0; i < t.size();) {
        if (t.compare(i, 3, "\xe2\x96\x81") == 0) {
          spaced += ' ';
          i += 3;
        } else {
          spaced += t[i++];
        }
      }
      t = std::move(spaced);
    }
    auto spm = std::make_unique<SentencePieceTokenizer>(std::move(tokens), std::move(scores), bos, eos);
    if (const GgufValue* types = f.find("tokenizer.ggml.token_type")) {
      std::vector<int> control, user_defined;
      const auto& t = checked_token_types(f, *types);
      for (std::size_t i = 0; i < t.size() && i < static_cast<std::size_t>(spm->vocab_size()); ++i) {
        if (t[i] == 3) control.push_back(static_cast<int>(i));
        if (t[i] == 4) user_defined.push_back(static_cast<int>(i));
      }
      spm->set_special_tokens(control, user_defined);
    }
    tok = std::move(spm);
    conv = {true, false, true};  // llama.cpp's SentencePiece defaults
  } else if (kind == "gpt2") {
    const GgufValue* merges_v = f.find("tokenizer.ggml.merges");
    if (!merges_v) throw Error(f.path() + ": gpt2 tokenizer without tokenizer.ggml.merges");
    BpeOptions opt;
    const GgufValue* pre = f.find("tokenizer.ggml.pre");
    std::string pre_name = pre ? pre->as_string("tokenizer.ggml.pre") : "default";
    if (!PreTokenizer::is_known(pre_name) && !pre_fallback.empty()) {
      if (!PreTokenizer::is_known(pre_fallback)) PreTokenizer::named(pre_fallback);  // the error lists the names
      log::warn(f.path() + ": unknown pre-tokenizer '" + pre_name + "'; using the fallback '" + pre_fallback +
                "' as asked; encodings may differ from the reference");
      pre_name = pre_fallback;
    }
    try {  // as llama.cpp, an unknown name is an error; the message lists the known ones
      opt.pre_tokenizer = std::make_shared<const PreTokenizer>(PreTokenizer::named(pre_name));
    } catch (const Error& e) {
      throw Error(f.path() + ": tokenizer.ggml.pre: " + e.what());
    }
    opt.ignore_merges = find_pre_tokenizer_spec(pre_name)->ignore_merges;
    if (const GgufValue* types = f.find("tokenizer.ggml.token_type")) {
      const auto& t = checked_token_types(f, *types);
      for (std::size_t i = 0; i < t.size() && i < tokens.size(); ++i) {
        if (t[i] == 3) opt.special_ids.push_back(static_cast<int>(i));       // control
        if (t[i] == 4) opt.user_defined_ids.push_back(static_cast<int>(i));  // user-defined
      }
    }
    opt.unk_id = id_key("tokenizer.ggml.unknown_token_id", -1);
    auto merges = ByteLevelBpeTokenizer::split_merges(merges_v->as_strings("tokenizer.ggml.merges"));
    tok = std::make_unique<ByteLevelBpeTokenizer>(std::move(tokens), merges, bos, eos, std::move(opt));
    conv = {false, false, false};  // llama.cpp's BPE defaults
  } else {
    log::warn(f.path() + ": tokenizer model '" + kind + "' is not supported (llama, gpt2); no tokenizer");
    return nullptr;
  }
  auto flag = [&](const char* key, bool& value) {
    if (const GgufValue* v = f.find(key)) value = v->as_int(key) != 0;
  };
  flag("tokenizer.ggml.add_bos_token", conv.add_bos);
  flag("tokenizer.ggml.add_eos_token", conv.add_eos);
  flag("tokenizer.ggml.add_space_prefix", conv.add_space_prefix);
  tok->set_conventions(conv);
  return tok;
}
LoadedModel load_gguf(const std::string& path) {
  return naming_path(path, [&] {
    const GgufFile f = GgufFile::open(path);
    GgufModelReader r(f);
    LoadedModel out;
    out.format = ModelFormat::kGguf;
    ModelWeights& w = out.weights;
    w.config = gguf_config(f, r);
    ModelConfig& c = w.config;
    if (static_cast<std::size_t>(c.n_layers) > f.tensors().size())  // before allocating layers
      r.fail("block_count " + std::to_string(c.n_layers) + " exceeds the " + std::to_string(f.tensors().size()) +
             " tensors in the file");
    const auto d = static_cast<std::uint64_t>(c.dim), h = static_cast<std::uint64_t>(c.hidden_dim),
               kv = static_cast<std::uint64_t>(c.kv_dim()), v = static_cast<std::uint64_t>(c.vocab_size);

    w.token_embedding = r.tensor("token_embd.weight", {d, v}, true, "classifier");  // [vocab, dim]
    w.layers.resize(static_cast<std::size_t>(c.n_layers));
    for (int l = 0; l < c.n_layers; ++l) {
      LayerWeights& L = w.layers[static_cast<std::size_t>(l)];
      const std::string p = "blk." + std::to_string(l) + ".", e = "layers." + std::to_string(l) + ".";
      L.attn_norm = r.tensor(p + "attn_norm.weight", {d});
      L.wq = r.tensor(p + "attn_q.weight", {d, d}, true, e + "wq");       // [dim, dim]
      L.wk = r.tensor(p + "attn_k.weight", {d, kv}, true, e + "wk");      // [kv_dim, dim]
      L.wv = r.tensor(p + "attn_v.weight", {d, kv}, true, e + "wv");      // [kv_dim, dim]
      L.wo = r.tensor(p + "attn_output.weight", {d, d}, true, e + "wo");  // [dim, dim]
      if (c.qkv_bias) {
        L.bq = r.tensor(p + "attn_q.bias", {d});
        L.bk = r.tensor(p + "attn_k.bias", {kv});
        L.bv = r.tensor(p + "attn_v.bias", {kv});
      }
      L.ffn_norm = r.tensor(p + "ffn_norm.weight", {d});
      L.w1 = r.tensor(p + "ffn_gate.weight", {d, h}, true, e + "w1");  // [hidden, dim]
      L.w2 = r.tensor(p + "ffn_down.weight", {h, d}, true, e + "w2");  // [dim, hidden]
      L.w3 = r.tensor(p + "ffn_up.weight", {d, h}, true, e + "w3");    // [hidden, dim]
    }
    w.final_norm = r.tensor("output_norm.weight", {d});

    // A separate classifier identical to the embedding (llama2.c conversions) is tied.
    c.tied_classifier = true;
    if (const GgufTensorInfo* out_t = f.find_tensor("output.weight")) {
      const GgufTensorInfo* emb_t = f.find_tensor("token_embd.weight");
      const bool same_bytes = out_t->type == emb_t->type && out_t->dims == emb_t->dims &&
                              f.read_bytes(*out_t) == f.read_bytes(*emb_t);
      if (same_bytes) {
        r.source_bytes += out_t->bytes;
        r.used.push_back("output.weight");
        c.source_linear_types["classifier"] = emb_t->type;  // tied after all: one table
        c.source_linear_types.erase("embedding");
      } else {
        // The embedding's blocks stay as the "embedding" linear's; output.weight's are the classifier's.
        if (auto it = r.blocks.find("classifier"); it != r.blocks.end()) {
          r.blocks["embedding"] = std::move(it->second);
          r.blocks.erase(it);
        }
        w.classifier = r.tensor("output.weight", {d, v}, true, "classifier");  // [vocab, dim]
        c.tied_classifier = false;
      }
    }
    for (auto& [linear, b] : r.blocks) w.set_source_blocks(linear, std::move(b));  // with its layer
    for (const GgufTensorInfo& t : f.tensors())
      if (std::find(r.used.begin(), r.used.end(), t.name) == r.used.end())
        log::warn(path + ": tensor '" + t.name + "' is not used by the model");
    w.source_bytes = r.source_bytes;
    w.validate();
    out.tokenizer = load_gguf_tokenizer(f);
    if (out.tokenizer && out.tokenizer->vocab_size() > c.vocab_size)
      r.fail("tokenizer has " + std::to_string(out.tokenizer->vocab_size()) +
             " tokens, the model's vocabulary only " + std::to_string(c.vocab_size));
    return out;
  });
}

}  // namespace inferlab
