// Hugging Face snapshot folders: tiny llama and qwen2 checkpoints written by the test (F32, F16,
// BF16, sharded), stories260K re-exported in Hugging Face's half-rotation Q/K layout (same logits
// as the llama2.c original), tokenizer.json, and bad folders (missing shard or tensor, wrong
// shapes, unsupported model types, random mutations of the safetensors file).
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <functional>
#include <random>

#include <gtest/gtest.h>

#include "config_checks.h"
#include "format_writers.h"
#include "inferlab/tokenizer/bpe_tokenizer.h"
#include "inferlab/formats/checkpoint.h"
#include "inferlab/error.h"
#include "inferlab/formats/formats.h"
#include "inferlab/support/log.h"
#include "inferlab/model/model.h"
#include "model_fixtures.h"
#include "test_support.h"

namespace inferlab {
namespace {

using testing::SafeTensorSpec;
using testing::TempDir;

using testing::error_of;

std::string bytes_of(const std::vector<float>& v, const std::string& dtype) {
  std::string out;
  for (float x : v) {
    std::uint32_t bits;
    std::memcpy(&bits, &x, 4);
    if (dtype == "F32") testing::append_pod(out, x);
    else if (dtype == "F16") testing::append_pod<std::uint16_t>(out, fp32_to_fp16(x));
    else testing::append_pod<std::uint16_t>(out, static_cast<std::uint16_t>(bits >> 16));  // BF16 (exact values)
  }
  return out;
}

// A tiny checkpoint: values exactly representable in F16 and BF16 (multiples of 1/16 in [-2, 2]).
struct TinyHf {
  ModelWeights w;
  std::string config_json;
  std::vector<SafeTensorSpec> tensors;  // in file order
};

TinyHf tiny_hf(const std::string& model_type, const std::string& dtype, bool tied) {
  TinyHf t;
  ModelConfig& c = t.w.config;
  c.dim = 16, c.hidden_dim = 24, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.vocab_size = 40;
  c.max_seq_len = 64, c.rope_theta = 1e6f, c.norm_eps = 1e-6f, c.bos_id = 3, c.eos_id = 4;
  c.qkv_bias = model_type == "qwen2";
  c.tied_classifier = tied;
  c.rope_style = RopeStyle::kHalf;
  int salt = 0;
  auto add = [&](const std::string& name, std::vector<std::uint64_t> shape) {
    std::uint64_t n = 1;
    for (auto d : shape) n *= d;
    std::vector<float> v(n);
    ++salt;
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(static_cast<int>((i * 13 + salt * 7) % 64) - 32) / 16.0f;
    t.tensors.push_back({name, dtype, shape, bytes_of(v, dtype)});
    return v;
  };
  const std::uint64_t d = 16, h = 24, kv = 8, voc = 40;
  t.w.token_embedding = add("model.embed_tokens.weight", {voc, d});
  t.w.layers.resize(2);
  for (int l = 0; l < 2; ++l) {
    LayerWeights& L = t.w.layers[static_cast<std::size_t>(l)];
    const std::string p = "model.layers." + std::to_string(l) + ".";
    L.attn_norm = add(p + "input_layernorm.weight", {d});
    L.wq = add(p + "self_attn.q_proj.weight", {d, d});
    L.wk = add(p + "self_attn.k_proj.weight", {kv, d});
    L.wv = add(p + "self_attn.v_proj.weight", {kv, d});
    L.wo = add(p + "self_attn.o_proj.weight", {d, d});
    if (c.qkv_bias) {
      L.bq = add(p + "self_attn.q_proj.bias", {d});
      L.bk = add(p + "self_attn.k_proj.bias", {kv});
      L.bv = add(p + "self_attn.v_proj.bias", {kv});
    }
    L.ffn_norm = add(p + "post_attention_layernorm.weight", {d});
    L.w1 = add(p + "mlp.gate_proj.weight", {h, d});
    L.w3 = add(p + "mlp.up_proj.weight", {h, d});
    L.w2 = add(p + "mlp.down_proj.weight", {d, h});
  }
  t.w.final_norm = add("model.norm.weight", {d});
  if (!tied) t.w.classifier = add("lm_head.weight", {voc, d});
  t.config_json = R"({"architectures": ["X"], "model_type": ")" + model_type + R"(",
    "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 2, "num_attention_heads": 4,
    "num_key_value_heads": 2, "vocab_size": 40, "max_position_embeddings": 64, "rope_theta": 1000000.0,
    "rms_norm_eps": 1e-06, "tie_word_embeddings": )" + std::string(tied ? "true" : "false") + R"(,
    "bos_token_id": 3, "eos_token_id": [4, 5], "hidden_act": "silu", "rope_scaling": null,
    "torch_dtype": "float32", "note": "esc\"aped \u00e9 \ud83d\ude00"})";
  return t;
}

void write_folder(const TempDir& dir, const TinyHf& t, int shards = 1) {
  testing::write_file(dir.file("config.json"), t.config_json);
  if (shards == 1) {
    testing::write_file(dir.file("model.safetensors"), testing::build_safetensors(t.tensors));
    return;
  }
  std::string index = R"({"metadata": {"total_size": 0}, "weight_map": {)";
  for (int s = 0; s < shards; ++s) {
    std::vector<SafeTensorSpec> part;
    const std::string name = "model-0000" + std::to_string(s + 1) + "-of-0000" + std::to_string(shards) + ".safetensors";
    for (std::size_t i = static_cast<std::size_t>(s); i < t.tensors.size(); i += static_cast<std::size_t>(shards)) {
      part.push_back(t.tensors[i]);
      index += (index.back() == '{' ? "" : ",") + std::string("\n  \"") + t.tensors[i].name + "\": \"" + name + "\"";
    }
    testing::write_file(dir.file(name), testing::build_safetensors(part));
  }
  testing::write_file(dir.file("model.safetensors.index.json"), index + "}}");
}

TEST(HfCheckpoint, TinyLlamaAndQwen2InEveryDtype) {
  for (const char* type : {"llama", "qwen2"}) {
    for (const char* dtype : {"F32", "F16", "BF16"}) {
      for (bool tied : {false, true}) {
        SCOPED_TRACE(std::string(type) + " " + dtype + (tied ? " tied" : ""));
        TempDir dir("hf");
        const TinyHf t = tiny_hf(type, dtype, tied);
        write_folder(dir, t);
        EXPECT_EQ(detect_model_format(dir.path.string()), ModelFormat::kHuggingFace);
        const LoadedModel m = load_model(dir.path.string());
        EXPECT_EQ(m.format, ModelFormat::kHuggingFace);
        const ModelConfig& c = m.weights.config;
        EXPECT_EQ(c.dim, 16);
        EXPECT_EQ(c.hidden_dim, 24);
        EXPECT_EQ(c.n_layers, 2);
        EXPECT_EQ(c.n_heads, 4);
        EXPECT_EQ(c.n_kv_heads, 2);
        EXPECT_EQ(c.vocab_size, 40);
        EXPECT_EQ(c.max_seq_len, 64);
        EXPECT_EQ(c.rope_theta, 1e6f);
        EXPECT_EQ(c.norm_eps, 1e-6f);
        EXPECT_EQ(c.bos_id, 3);
        EXPECT_EQ(c.eos_id, 4);  // the first of a list
        EXPECT_EQ(c.tied_classifier, tied);
        EXPECT_EQ(c.qkv_bias, std::string(type) == "qwen2");
        EXPECT_EQ(c.rope_style, RopeStyle::kHalf);
        std::uint64_t bytes = 0;
        for (const auto& s : t.tensors) bytes += s.data.size();
        EXPECT_EQ(m.weights.source_bytes, bytes);
        testing::expect_weights_equal(m.weights, t.w);
        EXPECT_EQ(m.tokenizer, nullptr);  // no tokenizer.json
        testing::expect_same_config(read_model_config(dir.path.string()), c);  // config.json alone
      }
    }
  }
}

TEST(HfCheckpoint, ShardedWithIndex) {
  TempDir dir("hf_shards");
  const TinyHf t = tiny_hf("qwen2", "BF16", false);
  write_folder(dir, t, 3);
  const LoadedModel m = load_hf(dir.path.string());
  testing::expect_weights_equal(m.weights, t.w);
  // A path to one of the files finds the folder too.
  EXPECT_EQ(load_hf(dir.file("model.safetensors.index.json")).weights.token_embedding, t.w.token_embedding);

  std::filesystem::remove(dir.file("model-00002-of-00003.safetensors"));
  const std::string err = error_of([&] { load_hf(dir.path.string()); });
  EXPECT_NE(err.find("model-00002-of-00003.safetensors: missing shard"), std::string::npos) << err;
}

TEST(HfCheckpoint, RejectsBadFolders) {
  TempDir dir("hf_bad");
  TinyHf t = tiny_hf("llama", "F32", false);
  EXPECT_NE(error_of([&] { load_hf(dir.path.string()); }).find("config.json: missing"), std::string::npos);

  write_folder(dir, t);
  std::filesystem::remove(dir.file("model.safetensors"));
  EXPECT_NE(error_of([&] { load_hf(dir.path.string()); }).find("no model.safetensors"), std::string::npos);

  // A missing tensor, named.
  TinyHf missing = t;
  missing.tensors.erase(missing.tensors.begin() + 3);  // layer 0 k_proj
  write_folder(dir, missing);
  std::string err = error_of([&] { load_hf(dir.path.string()); });
  EXPECT_NE(err.find("model.safetensors: missing tensor 'model.layers.0.self_attn.k_proj.weight'"), std::string::npos)
      << err;

  // A shape that disagrees with config.json.
  TinyHf wrong = t;
  wrong.tensors[2].shape = {8, 32};  // q_proj, same byte count
  write_folder(dir, wrong);
  err = error_of([&] { load_hf(dir.path.string()); });
  EXPECT_NE(err.find("tensor 'model.layers.0.self_attn.q_proj.weight' has shape [8, 32], the config needs [16, 16]"),
            std::string::npos)
      << err;

  // Bytes that disagree with dtype and shape, and an unsupported dtype.
  TinyHf bad_bytes = t;
  bad_bytes.tensors[1].data.pop_back();
  write_folder(dir, bad_bytes);
  EXPECT_NE(error_of([&] { load_hf(dir.path.string()); }).find("'model.layers.0.input_layernorm.weight' has 63 bytes"),
            std::string::npos);
  TinyHf i8 = t;
  i8.tensors[1].dtype = "I32";
  write_folder(dir, i8);
  EXPECT_NE(error_of([&] { load_hf(dir.path.string()); }).find("unsupported dtype I32"), std::string::npos);

  // Unsupported architectures and broken JSON.
  TinyHf mixtral = t;
  mixtral.config_json.replace(mixtral.config_json.find("llama"), 5, "mixtral");
  write_folder(dir, mixtral);
  EXPECT_NE(error_of([&] { load_hf(dir.path.string()); }).find("model_type 'mixtral' is not supported"),
            std::string::npos);
  TinyHf broken = t;
  broken.config_json.pop_back();
  write_folder(dir, broken);
  err = error_of([&] { load_hf(dir.path.string()); });
  EXPECT_NE(err.find("config.json: invalid JSON: unexpected end of text"), std::string::npos) << err;
}

TEST(HfCheckpoint, RandomMutationsOfSafetensorsLoadOrThrowError) {
  const log::Level saved = log::level();
  log::set_level(log::Level::kQuiet);
  TempDir dir("hf_fuzz");
  const TinyHf t = tiny_hf("qwen2", "F16", false);
  write_folder(dir, t);
  const std::string good = testing::read_file(dir.file("model.safetensors"));
  std::uint64_t header = 0;
  std::memcpy(&header, good.data(), 8);
  std::mt19937_64 rng(7);
  int rejected = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string b = good;
    const int edits = 1 + static_cast<int>(rng() % 3);
    for (int e = 0; e < edits && !b.empty(); ++e) {
      const std::size_t span = rng() % 4 == 0 ? b.size() : std::min<std::size_t>(b.size(), header + 8);
      const std::size_t at = rng() % span;
      switch (rng() % 5) {
        case 0: b[at] = static_cast<char>(rng()); break;
        case 1: b[at] = "0123456789[]{}\",:-eE."[rng() % 21]; break;  // JSON-ish characters
        case 2: b[at] = static_cast<char>(b[at] ^ (1 << (rng() % 8))); break;
        case 3: b.resize(at); break;
        case 4: b.erase(at, 1 + rng() % 4); break;
      }
    }
    testing::write_file(dir.file("model.safetensors"), b);
    try {
      load_hf(dir.path.string());
    } catch (const Error&) {
      ++rejected;
    } catch (const std::exception& e) {
      log::set_level(saved);
      FAIL() << "iteration " << iter << ": non-Error exception " << e.what();
    }
  }
  log::set_level(saved);
  EXPECT_GT(rejected, 1000);
}

TEST(HfCheckpoint, ByteLevelTokenizerJson) {
  TempDir dir("hf_tok");
  write_folder(dir, tiny_hf("llama", "F32", true));
  // Vocabulary: letters a..z (0..25), "Ġ" 26, "ab" 27, "abc" 28, "Ġa" 29, digits 0..8 (30..38), "<s>" 39.
  std::string vocab;
  for (int i = 0; i < 26; ++i) vocab += "\"" + std::string(1, static_cast<char>('a' + i)) + "\": " + std::to_string(i) + ", ";
  vocab += "\"\\u0120\": 26, \"ab\": 27, \"abc\": 28, \"\\u0120a\": 29";
  for (int i = 0; i < 9; ++i) vocab += ", \"" + std::to_string(i) + "\": " + std::to_string(30 + i);
  testing::write_file(dir.file("tokenizer.json"), R"({"version": "1.0",
    "added_tokens": [{"id": 39, "content": "<s>", "special": true}],
    "normalizer": null,
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": true},
                      {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true}]},
    "model": {"type": "BPE", "dropout": null, "unk_token": null, "vocab": {)" + vocab + R"(},
              "merges": ["a b", ["ab", "c"], "\u0120 a"]}})");
  const LoadedModel m = load_hf(dir.path.string());
  ASSERT_NE(m.tokenizer, nullptr);
  EXPECT_EQ(m.tokenizer->bos_id(), 3);  // from config.json
  EXPECT_EQ(m.tokenizer->eos_id(), 4);
  EXPECT_EQ(m.tokenizer->vocab_size(), 40);
  EXPECT_EQ(m.tokenizer->encode("abc a12<s>", true), (std::vector<int>{3, 28, 29, 31, 32, 39}));
  EXPECT_EQ(m.tokenizer->decode({28, 29, 31, 32, 39}), "abc a12<s>");

  // load_hf_tokenizer on its own; a non-BPE model is refused by name.
  EXPECT_EQ(load_hf_tokenizer(dir.file("tokenizer.json"))->encode("ab", false), (std::vector<int>{27}));
  testing::write_file(dir.file("tokenizer.json"), R"({"model": {"type": "Unigram", "vocab": []}})");
  EXPECT_NE(error_of([&] { load_hf_tokenizer(dir.file("tokenizer.json")); }).find("only BPE"), std::string::npos);
  EXPECT_EQ(load_hf(dir.path.string()).tokenizer, nullptr);  // weights still load, with a warning
}

// A Llama 3 style tokenizer.json: a Split{Regex, Isolated} pre-tokenizer before a regex-free
// ByteLevel, BOS from the post_processor's template unless tokenizer_config.json says otherwise.
TEST(HfCheckpoint, SplitRegexPreTokenizerAndBosConventions) {
  TempDir dir("hf_tok_split");
  std::string vocab;
  for (int i = 0; i < 26; ++i) vocab += "\"" + std::string(1, static_cast<char>('a' + i)) + "\": " + std::to_string(i) + ", ";
  vocab += "\"\\u0120\": 26, \"1\": 27, \"11\": 28, \"111\": 29";
  const std::string json = R"({"version": "1.0",
    "added_tokens": [{"id": 30, "content": "<|begin|>", "special": true}],
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
       "behavior": "Isolated", "invert": false},
      {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]},
    "post_processor": {"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<|begin|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}]},
    "model": {"type": "BPE", "ignore_merges": true, "vocab": {)" + vocab + R"(}, "merges": ["1 1", "11 1"]}})";
  testing::write_file(dir.file("tokenizer.json"), json);
  testing::write_file(dir.file("tokenizer_config.json"), R"({"bos_token": "<|begin|>"})");
  auto tok = load_hf_tokenizer(dir.file("tokenizer.json"));
  EXPECT_TRUE(tok->conventions().add_bos);  // the template starts with a special token
  EXPECT_EQ(tok->encode_document("1111111"), (std::vector<int>{30, 29, 29, 27}));  // digits in threes
  testing::write_file(dir.file("tokenizer_config.json"), R"({"bos_token": "<|begin|>", "add_bos_token": false})");
  EXPECT_FALSE(load_hf_tokenizer(dir.file("tokenizer.json"))->conventions().add_bos);

  std::string bad = json;
  bad.replace(bad.find("\"Isolated\""), 10, "\"Removed\"");
  testing::write_file(dir.file("tokenizer.json"), bad);
  EXPECT_NE(error_of([&] { load_hf_tokenizer(dir.file("tokenizer.json")); }).find("behavior Isolated"), std::string::npos);
}

// stories260K re-exported the way Hugging Face's conversion does it: Q/K rows of each head
// permuted from interleaved pairs (2i, 2i+1) to halves (i, i + head_dim/2). With
// rope_style = kHalf the model must give the llama2.c original's logits.
std::vector<float> to_half_layout(const std::vector<float>& w, int heads, int head_dim, int cols) {
  std::vector<float> out(w.size());
  for (int h = 0; h < heads; ++h)
    for (int r = 0; r < head_dim; ++r) {
      const int dst = h * head_dim + (r % 2) * (head_dim / 2) + r / 2;
      std::memcpy(&out[static_cast<std::size_t>(dst) * cols], &w[static_cast<std::size_t>(h * head_dim + r) * cols],
                  static_cast<std::size_t>(cols) * sizeof(float));
    }
  return out;
}

TEST(HfCheckpoint, Stories260KInHalfRopeLayoutGivesSameLogits) {
  const std::string bin = testing::data_path("models/stories260K/stories260K.bin");
  INFERLAB_REQUIRE_FILE(bin);
  const ModelWeights ref = load_llama2c(bin);
  const ModelConfig& c = ref.config;
  std::vector<SafeTensorSpec> tensors;
  auto add = [&](const std::string& name, const std::vector<float>& v, std::vector<std::uint64_t> shape) {
    tensors.push_back({name, "F32", std::move(shape), bytes_of(v, "F32")});
  };
  const auto d = static_cast<std::uint64_t>(c.dim), h = static_cast<std::uint64_t>(c.hidden_dim),
             kv = static_cast<std::uint64_t>(c.kv_dim()), v = static_cast<std::uint64_t>(c.vocab_size);
  add("model.embed_tokens.weight", ref.token_embedding, {v, d});
  for (int l = 0; l < c.n_layers; ++l) {
    const LayerWeights& L = ref.layers[static_cast<std::size_t>(l)];
    const std::string p = "model.layers." + std::to_string(l) + ".";
    add(p + "input_layernorm.weight", L.attn_norm, {d});
    add(p + "self_attn.q_proj.weight", to_half_layout(L.wq, c.n_heads, c.head_dim(), c.dim), {d, d});
    add(p + "self_attn.k_proj.weight", to_half_layout(L.wk, c.n_kv_heads, c.head_dim(), c.dim), {kv, d});
    add(p + "self_attn.v_proj.weight", L.wv, {kv, d});
    add(p + "self_attn.o_proj.weight", L.wo, {d, d});
    add(p + "post_attention_layernorm.weight", L.ffn_norm, {d});
    add(p + "mlp.gate_proj.weight", L.w1, {h, d});
    add(p + "mlp.up_proj.weight", L.w3, {h, d});
    add(p + "mlp.down_proj.weight", L.w2, {d, h});
  }
  add("model.norm.weight", ref.final_norm, {d});
  TempDir dir("hf_stories");
  testing::write_file(dir.file("model.safetensors"), testing::build_safetensors(tensors));
  testing::write_file(dir.file("config.json"),
                      R"({"model_type": "llama", "hidden_size": 64, "intermediate_size": 172, "num_hidden_layers": 5,
                          "num_attention_heads": 8, "num_key_value_heads": 4, "vocab_size": 512,
                          "max_position_embeddings": 512, "rope_theta": 10000.0, "rms_norm_eps": 1e-05,
                          "tie_word_embeddings": true, "bos_token_id": 1, "eos_token_id": 2})");
  const LoadedModel hf = load_hf(dir.path.string());
  ASSERT_EQ(hf.weights.config.rope_style, RopeStyle::kHalf);

  testing::FloatQuantization q1, q2;
  testing::RefAttention attention;
  CpuDevice device(1);
  Model a(ref, q1, device), b(hf.weights, q2, device);
  testing::SequenceRunner ra(a, attention), rb(b, attention);
  const std::vector<int> prompt = {1, 403, 407, 261, 378, 432, 383, 286, 261, 376};
  const std::vector<float> la = ra.feed_all_logits(prompt);
  const std::vector<float> lb = rb.feed_all_logits(prompt);
  ASSERT_EQ(la.size(), lb.size());
  float worst = 0.0f;
  for (std::size_t i = 0; i < la.size(); ++i) worst = std::max(worst, std::fabs(la[i] - lb[i]));
  EXPECT_LT(worst, 1e-4f);
  // The same permuted weights read with the interleaved RoPE give other logits: the layout matters.
  ModelWeights wrong = hf.weights;
  wrong.config.rope_style = RopeStyle::kInterleaved;
  testing::FloatQuantization q3;
  Model m(wrong, q3, device);
  testing::SequenceRunner rw(m, attention);
  const std::vector<float> lw = rw.feed_all_logits(prompt);
  float diff = 0.0f;
  for (std::size_t i = 0; i < la.size(); ++i) diff = std::max(diff, std::fabs(la[i] - lw[i]));
  EXPECT_GT(diff, 1e-2f);

  // The same folder through `inferlab generate`: the format is detected (a folder is HF), the
  // tokenizer is given explicitly, and the golden story comes out.
  const std::string out = dir.file("generated.txt");
  const std::string cmd = testing::binary_dir() + "/bin/inferlab generate --model " + dir.path.string() +
                          " --tokenizer " + testing::data_path("models/stories260K/tok512.bin") +
                          " --max-tokens 80 --log warn > " + out;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::ifstream in(out);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text.rfind("Once upon a time, there was a little girl named Lily. She loved to play outside in the park. "
                       "One day, she saw a big, red ball. She wanted to play with it, but it was too high.", 0),
            0u)
      << text;
}

}  // namespace
}  // namespace inferlab
