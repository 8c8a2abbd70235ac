// Hugging Face snapshot folder -> ModelWeights: config.json (llama, qwen2), model.safetensors or
// the shards of model.safetensors.index.json, and a byte-level BPE tokenizer.json.
// PyTorch stores a linear as [out, in], our row-major layout, so tensors are copied as they are;
// Q/K rows are in the half-rotation RoPE order, hence rope_style = kHalf.
#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "formats/file_reader.h"
#include "inferlab/tokenizer/bpe_tokenizer.h"
#include "inferlab/error.h"
#include "inferlab/formats/formats.h"
#include "inferlab/support/log.h"
#include "inferlab/tokenizer/pretokenizer.h"
#include "formats/json.h"
#include "formats/safetensors.h"

namespace fs = std::filesystem;

namespace inferlab {

namespace json = formats::json;
using formats::json_array;
using formats::json_bool;
using formats::json_find;
using formats::json_int;
using formats::json_number;
using formats::json_object;
using formats::json_string;
using formats::SafeTensor;
using formats::SafetensorsFile;

namespace {

std::string read_text(const std::string& path) {
  formats::FileReader r(path);
  return r.get_string(r.size(), "file");
}

json::value read_json(const std::string& path) { return formats::parse_json(read_text(path), path); }

std::string shape_string(const std::vector<std::uint64_t>& s) {
  std::string out = "[";
  for (std::size_t i = 0; i < s.size(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + "]";
}

// A token id in config.json: an integer, a list (the first is taken) or null.
int token_id(const json::value& cfg, const char* key, int fallback, const std::string& where) {
  const json::value* v = json_find(cfg, key);
  if (!v || v->is_null()) return fallback;
  if (v->is_array()) {
    const auto& a = v->get_array();
    return a.empty() ? fallback : static_cast<int>(json_int(a[0], where + ": " + key));
  }
  return static_cast<int>(json_int(*v, where + ": " + key));
}

ModelConfig read_config(const std::string& dir, const std::string& cfg_path) {
  const json::value cfg = read_json(cfg_path);
  auto num = [&](const char* key, bool required, double fallback) -> double {
    const json::value* v = json_find(cfg, key);
    if (!v || v->is_null()) {
      if (required) throw Error(cfg_path + ": missing '" + key + "'");
      return fallback;
    }
    return json_number(*v, cfg_path + ": '" + key + "'");
  };
  auto integer = [&](const char* key, bool required, std::int64_t fallback) -> int {
    const json::value* v = json_find(cfg, key);
    if (!v || v->is_null()) {
      if (required) throw Error(cfg_path + ": missing '" + key + "'");
      return static_cast<int>(fallback);
    }
    const std::int64_t x = json_int(*v, cfg_path + ": '" + key + "'");
    if (x < 0 || x > (1ll << 30)) throw Error(cfg_path + ": '" + key + "' = " + std::to_string(x) + " is out of range");
    return static_cast<int>(x);
  };
  auto flag = [&](const char* key, bool fallback) {
    const json::value* v = json_find(cfg, key);
    return v && !v->is_null() ? json_bool(*v, cfg_path + ": '" + key + "'") : fallback;
  };
  const json::value* type_v = json_find(cfg, "model_type");
  if (!type_v) throw Error(cfg_path + ": missing 'model_type'");
  const std::string type = json_string(*type_v, cfg_path + ": 'model_type'");
  if (type != "llama" && type != "qwen2")
    throw Error(cfg_path + ": model_type '" + type + "' is not supported (llama, qwen2)");

  ModelConfig c;
  c.name = fs::path(dir).filename().string();
  if (c.name.empty()) c.name = fs::path(dir).parent_path().filename().string();
  c.dim = integer("hidden_size", true, 0);
  c.hidden_dim = integer("intermediate_size", true, 0);
  c.n_layers = integer("num_hidden_layers", true, 0);
  c.n_heads = integer("num_attention_heads", true, 0);
  c.n_kv_heads = integer("num_key_value_heads", false, c.n_heads);
  c.vocab_size = integer("vocab_size", true, 0);
  c.max_seq_len = integer("max_position_embeddings", false, 2048);
  c.rope_theta = static_cast<float>(num("rope_theta", false, 10000.0));
  c.norm_eps = static_cast<float>(num("rms_norm_eps", false, 1e-6));
  c.tied_classifier = flag("tie_word_embeddings", false);
  c.qkv_bias = type == "qwen2";
  c.rope_style = RopeStyle::kHalf;
  c.bos_id = token_id(cfg, "bos_token_id", 1, cfg_path);
  c.eos_id = token_id(cfg, "eos_token_id", 2, cfg_path);
  if (c.n_heads > 0 && c.dim % c.n_heads == 0) {
    const int head_dim = integer("head_dim", false, c.dim / c.n_heads);
    if (head_dim != c.dim / c.n_heads)
      throw Error(cfg_path + ": head_dim " + std::to_string(head_dim) + " differs from hidden_size / "
                  "num_attention_heads: not supported");
  }
  if (type == "llama" && (flag("attention_bias", false) || flag("mlp_bias", false)))
    throw Error(cfg_path + ": attention_bias / mlp_bias are not supported for llama");
  const json::value* act_v = json_find(cfg, "hidden_act");
  const std::string act = act_v && act_v->is_string() ? std::string(act_v->get_string()) : "silu";
  if (act != "silu") throw Error(cfg_path + ": hidden_act '" + act + "' is not supported (silu)");
  if (const json::value* rs = json_find(cfg, "rope_scaling"); rs && !rs->is_null())
    log::warn(cfg_path + ": rope_scaling is ignored (plain RoPE with rope_theta is used)");
  const bool bos_ok = c.bos_id >= 0 && c.bos_id < c.vocab_size, eos_ok = c.eos_id >= 0 && c.eos_id < c.vocab_size;
  if (!bos_ok) c.bos_id = 0;
  if (!eos_ok) c.eos_id = 0;
  try {
    c.validate();
  } catch (const Error& e) {
    throw Error(cfg_path + ": " + e.what());
  }
  return c;
}

// All tensors of the snapshot: name -> (shard, tensor).
struct TensorSet {
  std::vector<SafetensorsFile> shards;
  std::map<std::string, std::pair<std::size_t, const SafeTensor*>> index;
};

TensorSet open_tensors(const std::string& dir) {
  TensorSet set;
  const fs::path index_path = fs::path(dir) / "model.safetensors.index.json";
  const fs::path single = fs::path(dir) / "model.safetensors";
  std::vector<std::string> files;
  std::map<std::string, std::string> expected;  // tensor -> shard, from the index
  if (fs::is_regular_file(index_path)) {
    const json::value index = read_json(index_path.string());
    const json::value* map = json_find(index, "weight_map");
    if (!map) throw Error(index_path.string() + ": missing 'weight_map'");
    for (const auto& member : json_object(*map, index_path.string() + ": weight_map")) {
      const std::string tensor(member.key());
      const std::string shard = json_string(member.value(), index_path.string() + ": weight_map['" + tensor + "']");
      if (shard.empty() || shard.find('/') != std::string::npos || shard == "." || shard == "..")
        throw Error(index_path.string() + ": shard name '" + shard + "' is not a file in the folder");
      expected.emplace(tensor, shard);
      if (std::find(files.begin(), files.end(), shard) == files.end()) files.push_back(shard);
    }
    for (const std::string& shard : files)
      if (!fs::is_regular_file(fs::path(dir) / shard))
        throw Error((fs::path(dir) / shard).string() + ": missing shard listed in model.safetensors.index.json");
  } else if (fs::is_regular_file(single)) {
    files.push_back("model.safetensors");
  } else {
    throw Error(dir + ": no model.safetensors or model.safetensors.index.json");
  }
  set.shards.reserve(files.size());
  for (const std::string& file : files) set.shards.push_back(SafetensorsFile::open((fs::path(dir) / file).string()));
  for (std::size_t s = 0; s < set.shards.size(); ++s)
    for (const auto& [name, t] : set.shards[s].tensors()) {
      auto it = expected.find(name);
      if (!expected.empty() && (it == expected.end() || it->second != files[s])) continue;  // not listed here
      if (!set.index.emplace(name, std::make_pair(s, &t)).second)
        throw Error(set.shards[s].path() + ": tensor '" + name + "' appears in more than one shard");
    }
  for (const auto& [tensor, shard] : expected)
    if (!set.index.count(tensor))
      throw Error((fs::path(dir) / shard).string() + ": tensor '" + tensor +
                  "' listed in model.safetensors.index.json is missing");
  return set;
}

class HfReader {
 public:
  explicit HfReader(const TensorSet& set) : set_(set) {}
  // The tensor `name` as fp32 after checking its [out, in] shape.
  std::vector<float> get(const std::string& name, std::vector<std::uint64_t> expect) {
    auto it = set_.index.find(name);
    if (it == set_.index.end()) {
      const std::string where = set_.shards.size() == 1 ? set_.shards[0].path() : "the safetensors shards";
      throw Error(where + ": missing tensor '" + name + "'");
    }
    const SafetensorsFile& file = set_.shards[it->second.first];
    const SafeTensor& t = *it->second.second;
    std::vector<std::uint64_t> shape = t.shape;
    if (shape != expect)
      throw Error(file.path() + ": tensor '" + name + "' has shape " + shape_string(shape) +
                  ", the config needs " + shape_string(expect));
    used.push_back(name);
    source_bytes += t.bytes;
    return file.read_f32(t);
  }
  bool has(const std::string& name) const { return set_.index.count(name) > 0; }
  std::vector<std::string> used;
  std::uint64_t source_bytes = 0;

 private:
  const TensorSet& set_;
};

// The regex sequence of a tokenizer.json `pre_tokenizer` section: Split{Regex, Isolated} is its
// pattern, ByteLevel{use_regex} the GPT-2 pattern, Digits \p{N} (individual) or \p{N}+.
// Sets *byte_level when a ByteLevel step is present; other steps are an Error naming them.
void pre_tokenizer_patterns(const json::value* pre, const std::string& path, std::vector<std::string>& patterns,
                            bool* byte_level) {
  if (!pre || pre->is_null()) return;
  const json::value* type = json_find(*pre, "type");
  const std::string t = type && type->is_string() ? std::string(type->get_string()) : "";
  auto flag = [&](const char* key, bool fallback) {
    const json::value* v = json_find(*pre, key);
    return v && v->is_bool() ? v->get_bool() : fallback;
  };
  if (t == "Sequence") {
    if (const json::value* list = json_find(*pre, "pretokenizers"); list && list->is_array())
      for (const json::value& p : list->get_array()) pre_tokenizer_patterns(&p, path, patterns, byte_level);
  } else if (t == "ByteLevel") {
    *byte_level = true;
    if (flag("use_regex", true)) patterns.push_back(kGpt2Pattern);
  } else if (t == "Digits") {
    patterns.push_back(flag("individual_digits", false) ? "\\p{N}" : "\\p{N}+");
  } else if (t == "Split") {
    const json::value* behavior = json_find(*pre, "behavior");
    const json::value* pattern = json_find(*pre, "pattern");
    const json::value* regex = pattern ? json_find(*pattern, "Regex") : nullptr;
    const json::value* literal = pattern ? json_find(*pattern, "String") : nullptr;
    const bool isolated = behavior && behavior->is_string() && behavior->get_string() == "Isolated";
    if (!isolated || flag("invert", false) || !(regex || literal))
      throw Error(path + ": pre_tokenizer Split is supported with behavior Isolated, invert false and a Regex or "
                  "String pattern");
    if (regex) {
      patterns.push_back(json_string(*regex, path + ": Split pattern"));
    } else {
      std::string quoted = "\\Q" + json_string(*literal, path + ": Split pattern") + "\\E";
      patterns.push_back(quoted);
    }
  } else {
    throw Error(path + ": pre_tokenizer type '" + t + "' is not supported (Sequence, ByteLevel, Split, Digits)");
  }
}

// add_bos/add_eos from tokenizer_config.json when it says, else whether the post_processor's
// TemplateProcessing puts a special token before/after the text.
TokenizerConventions hf_conventions(const json::value& doc, const json::value* config) {
  TokenizerConventions c{false, false, false};
  if (const json::value* pp = json_find(doc, "post_processor"); pp && pp->is_object()) {
    const json::value* type = json_find(*pp, "type");
    const json::value* single = json_find(*pp, "single");
    if (type && type->is_string() && type->get_string() == "TemplateProcessing" && single && single->is_array()) {
      const auto& items = single->get_array();
      if (!items.empty()) {
        c.add_bos = json_find(items.front(), "SpecialToken") != nullptr;
        c.add_eos = json_find(items.back(), "SpecialToken") != nullptr;
      }
    }
  }
  if (config) {
    auto flag = [&](const char* key, bool& value) {
      if (const json::value* v = json_find(*config, key); v && v->is_bool()) value = v->get_bool();
    };
    flag("add_bos_token", c.add_bos);
    flag("add_eos_token", c.add_eos);
  }
  return c;
}

// The byte-level BPE of a tokenizer.json document, or null (with the reason in *why) when the
// document holds another kind of tokenizer. bos/eos of -1 are looked up in tokenizer_config.json.
std::unique_ptr<Tokenizer> bpe_from_json(const json::value& doc, const std::string& path, int bos, int eos,
                                         std::string* why) {
  const json::value* model = json_find(doc, "model");
  const json::value* type = model ? json_find(*model, "type") : nullptr;
  if (!type || !type->is_string() || type->get_string() != "BPE") {
    *why = "only BPE tokenizer models are supported";
    return nullptr;
  }
  BpeOptions opt;
  std::vector<std::string> patterns;
  bool byte_level = false;
  pre_tokenizer_patterns(json_find(doc, "pre_tokenizer"), path, patterns, &byte_level);
  if (!byte_level) {
    *why = "only byte-level BPE (a ByteLevel pre-tokenizer) is supported";
    return nullptr;
  }
  opt.pre_tokenizer = std::make_shared<const PreTokenizer>("tokenizer.json", std::move(patterns));
  if (const json::value* im = json_find(*model, "ignore_merges"); im && im->is_bool())
    opt.ignore_merges = im->get_bool();

  const json::value* vocab = json_find(*model, "vocab");
  if (!vocab || !vocab->is_object()) throw Error(path + ": model.vocab must be an object");
  const json::object& entries = vocab->get_object();
  const json::value* added = json_find(doc, "added_tokens");
  const std::size_t n_added = added && added->is_array() ? added->get_array().size() : 0;
  const std::size_t max_id = entries.size() + n_added + 1024;  // ids are dense in practice
  std::vector<std::string> tokens;
  auto place = [&](std::int64_t id, const std::string& text) {
    if (id < 0 || static_cast<std::size_t>(id) >= max_id)
      throw Error(path + ": token id " + std::to_string(id) + " out of range");
    if (tokens.size() <= static_cast<std::size_t>(id)) tokens.resize(static_cast<std::size_t>(id) + 1);
    tokens[static_cast<std::size_t>(id)] = text;
  };
  for (const auto& entry : entries) place(json_int(entry.value(), path + ": vocab id"), std::string(entry.key()));
  if (n_added > 0)
    for (const json::value& a : added->get_array()) {
      const json::value* id = json_find(a, "id");
      const json::value* content = json_find(a, "content");
      if (!id || !content) throw Error(path + ": added token without id or content");
      place(json_int(*id, path + ": added token id"), json_string(*content, path + ": added token content"));
      const json::value* special = json_find(a, "special");
      const bool control = !special || !special->is_bool() || special->get_bool();
      (control ? opt.special_ids : opt.user_defined_ids).push_back(static_cast<int>(json_int(*id, "id")));
    }
  if (tokens.empty()) throw Error(path + ": empty vocabulary");

  std::vector<std::pair<std::string, std::string>> merges;
  if (const json::value* m = json_find(*model, "merges"); m && m->is_array()) {
    for (const json::value& item : m->get_array()) {
      if (item.is_string()) {
        auto split = ByteLevelBpeTokenizer::split_merges({std::string(item.get_string())});
        if (!split.empty()) merges.push_back(std::move(split[0]));
      } else {
        const auto& pair = json_array(item, path + ": merge");
        if (pair.size() != 2) throw Error(path + ": a merge must be \"a b\" or [a, b]");
        merges.emplace_back(json_string(pair[0], path + ": merge"), json_string(pair[1], path + ": merge"));
      }
    }
  }
  auto id_of = [&](const std::string& text) {
    auto it = std::find(tokens.begin(), tokens.end(), text);
    return it == tokens.end() ? -1 : static_cast<int>(it - tokens.begin());
  };
  if (const json::value* unk = json_find(*model, "unk_token"); unk && unk->is_string()) opt.unk_id = id_of(std::string(unk->get_string()));
  const fs::path tc = fs::path(path).parent_path() / "tokenizer_config.json";
  std::optional<json::value> cfg_doc;
  if (fs::is_regular_file(tc)) cfg_doc = read_json(tc.string());
  if ((bos < 0 || eos < 0) && cfg_doc) {
    const json::value& cfg = *cfg_doc;
    auto lookup = [&](const char* key) {
      const json::value* v = json_find(cfg, key);
      if (v && v->is_object()) v = json_find(*v, "content");
      return v && v->is_string() ? id_of(std::string(v->get_string())) : -1;
    };
    if (bos < 0) bos = lookup("bos_token");
    if (eos < 0) eos = lookup("eos_token");
  }
  const int n = static_cast<int>(tokens.size());
  if (bos >= n) bos = -1;
  if (eos >= n) eos = -1;
  auto tok = std::make_unique<ByteLevelBpeTokenizer>(std::move(tokens), merges, bos, eos, std::move(opt));
  tok->set_conventions(hf_conventions(doc, cfg_doc ? &*cfg_doc : nullptr));
  return tok;
}

}  // namespace

std::unique_ptr<Tokenizer> load_hf_tokenizer(const std::string& path) {
  std::string why;
  auto t = bpe_from_json(read_json(path), path, -1, -1, &why);
  if (!t) throw Error(path + ": " + why);
  return t;
}

namespace {

// The snapshot folder of `path` (the folder itself, or the folder of a .safetensors file).
std::string snapshot_dir(const std::string& path) {
  return fs::is_regular_file(path) ? fs::path(path).parent_path().string() : path;
}

fs::path config_path(const std::string& dir) {
  const fs::path cfg_path = fs::path(dir) / "config.json";
  if (!fs::is_regular_file(cfg_path)) throw Error(cfg_path.string() + ": missing (not a Hugging Face snapshot folder?)");
  return cfg_path;
}

}  // namespace

namespace {

// num_hidden_layers against the layers the checkpoint holds (model.layers.N. tensors): a
// config.json claiming a million layers is refused naming the mismatch, not as a memory estimate.
void check_layers_in_tensors(const ModelConfig& c, const TensorSet& set, const std::string& cfg_path) {
  int in_file = 0;
  const std::string prefix = "model.layers.";
  for (const auto& [name, where] : set.index) {
    (void)where;
    if (name.rfind(prefix, 0) != 0) continue;
    int l = 0;
    const char* first = name.data() + prefix.size();
    const auto [end, ec] = std::from_chars(first, name.data() + name.size(), l);
    if (ec == std::errc() && end < name.data() + name.size() && *end == '.') in_file = std::max(in_file, l + 1);
  }
  if (c.n_layers > in_file)
    throw Error(cfg_path + ": num_hidden_layers " + std::to_string(c.n_layers) + ", but the checkpoint's tensors cover " +
                std::to_string(in_file) + " layer(s) (model.layers.0 .. " + std::to_string(in_file - 1) +
                "); allowed: num_hidden_layers <= " + std::to_string(in_file));
}

}  // namespace

ModelConfig read_hf_config(const std::string& path) {
  const std::string dir = snapshot_dir(path);
  const std::string cfg_path = config_path(dir).string();
  ModelConfig c = read_config(dir, cfg_path);
  // The tensor headers only (no weights), when the folder has them: config.json alone is read as is.
  if (fs::is_regular_file(fs::path(dir) / "model.safetensors") ||
      fs::is_regular_file(fs::path(dir) / "model.safetensors.index.json"))
    check_layers_in_tensors(c, open_tensors(dir), cfg_path);
  return c;
}

LoadedModel load_hf(const std::string& path) {
  const std::string dir = snapshot_dir(path);
  const fs::path cfg_path = config_path(dir);
  LoadedModel out;
  out.format = ModelFormat::kHuggingFace;
  ModelWeights& w = out.weights;
  w.config = read_config(dir, cfg_path.string());
  const ModelConfig& c = w.config;
  const TensorSet set = open_tensors(dir);
  check_layers_in_tensors(c, set, cfg_path.string());  // before allocating layers
  HfReader r(set);
  const auto d = static_cast<std::uint64_t>(c.dim), h = static_cast<std::uint64_t>(c.hidden_dim),
             kv = static_cast<std::uint64_t>(c.kv_dim()), v = static_cast<std::uint64_t>(c.vocab_size);
  w.token_embedding = r.get("model.embed_tokens.weight", {v, d});  // [vocab, dim]
  w.layers.resize(static_cast<std::size_t>(c.n_layers));
  for (int l = 0; l < c.n_layers; ++l) {
    LayerWeights& L = w.layers[static_cast<std::size_t>(l)];
    const std::string p = "model.layers." + std::to_string(l) + ".";
    L.attn_norm = r.get(p + "input_layernorm.weight", {d});
    L.wq = r.get(p + "self_attn.q_proj.weight", {d, d});   // [dim, dim]
    L.wk = r.get(p + "self_attn.k_proj.weight", {kv, d});  // [kv_dim, dim]
    L.wv = r.get(p + "self_attn.v_proj.weight", {kv, d});  // [kv_dim, dim]
    L.wo = r.get(p + "self_attn.o_proj.weight", {d, d});   // [dim, dim]
    if (c.qkv_bias) {
      L.bq = r.get(p + "self_attn.q_proj.bias", {d});
      L.bk = r.get(p + "self_attn.k_proj.bias", {kv});
      L.bv = r.get(p + "self_attn.v_proj.bias", {kv});
    }
    L.ffn_norm = r.get(p + "post_attention_layernorm.weight", {d});
    L.w1 = r.get(p + "mlp.gate_proj.weight", {h, d});  // [hidden, dim]
    L.w2 = r.get(p + "mlp.down_proj.weight", {d, h});  // [dim, hidden]
    L.w3 = r.get(p + "mlp.up_proj.weight", {h, d});    // [hidden, dim]
  }
  w.final_norm = r.get("model.norm.weight", {d});
  if (!c.tied_classifier) w.classifier = r.get("lm_head.weight", {v, d});  // [vocab, dim]
  for (const auto& [name, where] : set.index) {
    (void)where;
    const bool known_extra = name.ends_with("rotary_emb.inv_freq") || (c.tied_classifier && name == "lm_head.weight");
    if (!known_extra && std::find(r.used.begin(), r.used.end(), name) == r.used.end())
      log::warn(dir + ": tensor '" + name + "' is not used by the model");
  }
  w.source_bytes = r.source_bytes;
  w.validate();

  const fs::path tok = fs::path(dir) / "tokenizer.json";
  if (fs::is_regular_file(tok)) {
    std::string why;
    out.tokenizer = bpe_from_json(read_json(tok.string()), tok.string(), c.bos_id, c.eos_id, &why);
    if (!out.tokenizer) log::warn(tok.string() + ": " + why + "; no tokenizer loaded");
    else if (out.tokenizer->vocab_size() > c.vocab_size)
      throw Error(tok.string() + ": " + std::to_string(out.tokenizer->vocab_size()) +
                  " tokens, more than the model's vocab_size " + std::to_string(c.vocab_size));
  }
  return out;
}

}  // namespace inferlab
