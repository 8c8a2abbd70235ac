// GGUF reader: the real stories260K GGUF against its llama2.c twin, dequantisation of every
// supported block type against exact values, header versions, and bad files (wrong magic or
// version, unsupported types, wrong shapes, truncation at every offset, random mutations).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>

#include <gtest/gtest.h>

#include "format_writers.h"
#include "inferlab/bpe_tokenizer.h"
#include "inferlab/checkpoint.h"
#include "inferlab/error.h"
#include "inferlab/formats.h"
#include "inferlab/log.h"
#include "inferlab/model.h"
#include "model_fixtures.h"
#include "test_support.h"

namespace inferlab {
namespace {

using testing::GgufBuilder;
using testing::TempDir;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

struct QuietLogs {  // the mutation tests provoke warnings by design
  log::Level saved = log::level();
  QuietLogs() { log::set_level(log::Level::kQuiet); }
  ~QuietLogs() { log::set_level(saved); }
};

// ---- stories260K: GGUF vs llama2.c -------------------------------------------------------------

void expect_same_floats(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * sizeof(float)), 0) << what << " differs";
}

TEST(Gguf, Stories260KIsBitIdenticalToLlama2c) {
  const std::string gguf = testing::data_path("models/stories260K/stories260K.gguf");
  const std::string bin = testing::data_path("models/stories260K/stories260K.bin");
  INFERLAB_REQUIRE_FILE(gguf);
  INFERLAB_REQUIRE_FILE(bin);
  const LoadedModel g = load_gguf(gguf);
  const ModelWeights b = load_llama2c(bin);
  const ModelConfig &gc = g.weights.config, &bc = b.config;
  EXPECT_EQ(g.format, ModelFormat::kGguf);
  EXPECT_EQ(gc.dim, 64);
  EXPECT_EQ(gc.dim, bc.dim);
  EXPECT_EQ(gc.hidden_dim, bc.hidden_dim);
  EXPECT_EQ(gc.n_layers, bc.n_layers);
  EXPECT_EQ(gc.n_heads, bc.n_heads);
  EXPECT_EQ(gc.n_kv_heads, bc.n_kv_heads);
  EXPECT_EQ(gc.vocab_size, bc.vocab_size);
  EXPECT_EQ(gc.rope_theta, bc.rope_theta);
  EXPECT_EQ(gc.norm_eps, bc.norm_eps);
  EXPECT_EQ(gc.rope_style, RopeStyle::kInterleaved);
  EXPECT_EQ(gc.rope_style, bc.rope_style);
  EXPECT_EQ(gc.qkv_bias, bc.qkv_bias);
  EXPECT_EQ(gc.bos_id, bc.bos_id);
  EXPECT_EQ(gc.eos_id, bc.eos_id);
  // The GGUF stores output.weight, bit-identical to token_embd: loaded as a tied classifier.
  EXPECT_TRUE(gc.tied_classifier);
  EXPECT_EQ(gc.tied_classifier, bc.tied_classifier);
  // The converter wrote context_length 2048 while the .bin header says 512: not a weight.
  EXPECT_EQ(gc.max_seq_len, 2048);
  EXPECT_EQ(bc.max_seq_len, 512);

  expect_same_floats(g.weights.token_embedding, b.token_embedding, "token_embedding");
  ASSERT_EQ(g.weights.layers.size(), b.layers.size());
  for (std::size_t l = 0; l < b.layers.size(); ++l) {
    const LayerWeights &x = g.weights.layers[l], &y = b.layers[l];
    const std::string p = "layer " + std::to_string(l) + " ";
    expect_same_floats(x.attn_norm, y.attn_norm, p + "attn_norm");
    expect_same_floats(x.wq, y.wq, p + "wq");
    expect_same_floats(x.wk, y.wk, p + "wk");
    expect_same_floats(x.wv, y.wv, p + "wv");
    expect_same_floats(x.wo, y.wo, p + "wo");
    expect_same_floats(x.ffn_norm, y.ffn_norm, p + "ffn_norm");
    expect_same_floats(x.w1, y.w1, p + "w1");
    expect_same_floats(x.w2, y.w2, p + "w2");
    expect_same_floats(x.w3, y.w3, p + "w3");
  }
  expect_same_floats(g.weights.final_norm, b.final_norm, "final_norm");
  EXPECT_TRUE(g.weights.classifier.empty());
  // 48 F32 tensors: the model's parameters plus the duplicated classifier.
  EXPECT_EQ(g.weights.source_bytes,
            (static_cast<std::uint64_t>(gc.parameter_count()) + 512ull * 64ull) * sizeof(float));
}

TEST(Gguf, Stories260KTokenizerMatchesTok512) {
  const std::string gguf = testing::data_path("models/stories260K/stories260K.gguf");
  const std::string tok = testing::data_path("models/stories260K/tok512.bin");
  INFERLAB_REQUIRE_FILE(gguf);
  INFERLAB_REQUIRE_FILE(tok);
  const LoadedModel g = load_gguf(gguf);
  ASSERT_NE(g.tokenizer, nullptr);
  ASSERT_NE(dynamic_cast<const SentencePieceTokenizer*>(g.tokenizer.get()), nullptr);
  const auto ref = load_llama2c_tokenizer(tok, 512);
  EXPECT_EQ(g.tokenizer->vocab_size(), ref->vocab_size());
  EXPECT_EQ(g.tokenizer->bos_id(), ref->bos_id());
  EXPECT_EQ(g.tokenizer->eos_id(), ref->eos_id());
  for (const char* text : {"Once upon a time, there was a little girl named Lily.", "", " ", "  two  spaces",
                           "Tom's dog said: \"Hello!\"\nThe end.", "caf\xc3\xa9 \xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\x98\x80",
                           "x = 42; y = 3.14", "\t\ttabs\n\n"}) {
    for (bool bos : {false, true}) {
      const std::vector<int> ids = g.tokenizer->encode(text, bos);
      EXPECT_EQ(ids, ref->encode(text, bos)) << text;
      EXPECT_EQ(g.tokenizer->decode(ids), ref->decode(ids)) << text;
    }
  }
  // llama2.c's export renamed BOS/EOS to "\n<s>\n" / "\n</s>\n"; every other piece must agree.
  for (int id = 3; id < 512; ++id)
    for (int prev : {1, 5, 300}) EXPECT_EQ(g.tokenizer->decode_token(prev, id), ref->decode_token(prev, id)) << id;
}

// ---- dequantisation ----------------------------------------------------------------------------

TEST(Gguf, HalfConversionsAreExact) {
  for (std::uint32_t h = 0; h < 0x10000; ++h) {
    const float f = fp16_to_fp32(static_cast<std::uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(fp32_to_fp16(f), h) << h;
  }
  EXPECT_EQ(fp16_to_fp32(0x3C00), 1.0f);
  EXPECT_EQ(fp16_to_fp32(0xC000), -2.0f);
  EXPECT_EQ(fp16_to_fp32(0x0001), std::ldexp(1.0f, -24));  // smallest subnormal
  EXPECT_EQ(fp16_to_fp32(0x7BFF), 65504.0f);
  EXPECT_TRUE(std::isinf(fp16_to_fp32(0x7C00)));
  EXPECT_EQ(fp32_to_fp16(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie -> even
  EXPECT_EQ(fp32_to_fp16(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3C02);
  EXPECT_EQ(fp32_to_fp16(70000.0f), 0x7C00);
  EXPECT_EQ(bf16_to_fp32(0x3F80), 1.0f);
  EXPECT_EQ(bf16_to_fp32(0xC0A0), -5.0f);
}

TEST(Gguf, DequantizesEveryBlockTypeExactly) {
  constexpr std::size_t n = 64;  // two blocks
  std::vector<std::int8_t> q8(n);
  std::vector<std::uint8_t> nib(n);
  for (std::size_t i = 0; i < n; ++i) {
    q8[i] = static_cast<std::int8_t>(static_cast<int>(i * 37 % 255) - 127);
    nib[i] = static_cast<std::uint8_t>((i * 5 + 3) % 16);
  }
  const std::uint16_t d = 0x3800, m = 0xBC00;  // 0.5, -1.0
  std::vector<float> out(n);

  const std::string b8 = testing::encode_q8_0(q8, d);
  ASSERT_EQ(b8.size(), ggml_tensor_bytes(GgmlType::kQ8_0, n));
  dequantize(GgmlType::kQ8_0, reinterpret_cast<const std::uint8_t*>(b8.data()), n, out.data());
  for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(out[i], q8[i] * 0.5f) << i;

  const std::string b40 = testing::encode_q4(nib, d, nullptr);
  ASSERT_EQ(b40.size(), 36u);
  dequantize(GgmlType::kQ4_0, reinterpret_cast<const std::uint8_t*>(b40.data()), n, out.data());
  for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(out[i], (nib[i] - 8) * 0.5f) << i;

  const std::string b41 = testing::encode_q4(nib, d, &m);
  ASSERT_EQ(b41.size(), 40u);
  dequantize(GgmlType::kQ4_1, reinterpret_cast<const std::uint8_t*>(b41.data()), n, out.data());
  for (std::size_t i = 0; i < n; ++i) EXPECT_EQ(out[i], nib[i] * 0.5f - 1.0f) << i;

  // Element 0 of a Q4 block is the low nibble of byte 0 and element 16 its high nibble.
  const std::uint8_t block[18] = {0x00, 0x3C, 0xA3};  // d = 1, qs[0] = (high 10, low 3)
  dequantize(GgmlType::kQ4_0, block, 32, out.data());
  EXPECT_EQ(out[0], 3.0f - 8.0f);
  EXPECT_EQ(out[16], 10.0f - 8.0f);

  std::vector<std::uint16_t> halves = {0x3C00, 0xB800, 0x0001, 0x7BFF};
  dequantize(GgmlType::kF16, reinterpret_cast<const std::uint8_t*>(halves.data()), 4, out.data());
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -0.5f);
  EXPECT_EQ(out[2], std::ldexp(1.0f, -24));
  EXPECT_EQ(out[3], 65504.0f);
  std::vector<std::uint16_t> bf = {0x3F80, 0x4049, 0xBF00};
  dequantize(GgmlType::kBF16, reinterpret_cast<const std::uint8_t*>(bf.data()), 3, out.data());
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], 3.140625f);
  EXPECT_EQ(out[2], -0.5f);

  EXPECT_THROW(ggml_tensor_bytes(GgmlType::kQ8_0, 33), Error);
  EXPECT_EQ(ggml_type_name(12), "Q4_K");
  EXPECT_EQ(ggml_type_name(30), "BF16");
  EXPECT_FALSE(ggml_type_supported(12));
}

// ---- a tiny llama GGUF with every tensor type ---------------------------------------------------

struct TinyGguf {
  std::string bytes;
  ModelWeights expected;  // the exact values the loader must produce
  std::uint64_t tensor_bytes = 0;
};

TinyGguf tiny_llama_gguf(std::uint32_t version = 3, std::uint64_t alignment = 32) {
  TinyGguf t;
  ModelConfig& c = t.expected.config;
  c.dim = 32, c.hidden_dim = 64, c.n_layers = 1, c.n_heads = 4, c.n_kv_heads = 2, c.vocab_size = 32;
  c.max_seq_len = 128, c.rope_theta = 5000.0f, c.norm_eps = 1e-6f, c.bos_id = 29, c.eos_id = 30;
  GgufBuilder g(version);
  g.string("general.architecture", "llama");
  g.u32("llama.embedding_length", 32);
  g.u32("llama.feed_forward_length", 64);
  g.u32("llama.block_count", 1);
  g.u32("llama.attention.head_count", 4);
  g.u32("llama.attention.head_count_kv", 2);
  g.u32("llama.context_length", 128);
  g.f32("llama.rope.freq_base", 5000.0f);
  g.f32("llama.attention.layer_norm_rms_epsilon", 1e-6f);
  if (alignment != 32) g.u32("general.alignment", static_cast<std::uint32_t>(alignment));
  std::vector<std::string> tokens;
  for (char ch = 'a'; ch <= 'z'; ++ch) tokens.emplace_back(1, ch);
  for (const char* s : {"\xc4\xa0", "ab", "abc", "<s>", "</s>", "\xc4\xa0" "a"}) tokens.emplace_back(s);
  std::vector<std::int32_t> types(32, 1);
  types[29] = types[30] = 3;
  g.string("tokenizer.ggml.model", "gpt2");
  g.strings("tokenizer.ggml.tokens", tokens);
  g.ints("tokenizer.ggml.token_type", types);
  g.strings("tokenizer.ggml.merges", {"a b", "ab c", "\xc4\xa0 a"});
  g.u32("tokenizer.ggml.bos_token_id", 29);
  g.u32("tokenizer.ggml.eos_token_id", 30);

  auto q8_tensor = [&](const std::string& name, std::uint64_t ne0, std::uint64_t ne1, int salt) {
    std::vector<std::int8_t> q(ne0 * ne1);
    std::vector<float> v(q.size());
    for (std::size_t i = 0; i < q.size(); ++i) {
      q[i] = static_cast<std::int8_t>(static_cast<int>((i * 37 + salt) % 255) - 127);
      v[i] = q[i] * 0.25f;
    }
    std::string data = testing::encode_q8_0(q, 0x3400);  // d = 0.25
    t.tensor_bytes += data.size();
    g.tensor(name, {ne0, ne1}, GgmlType::kQ8_0, data);
    return v;
  };
  auto q4_tensor = [&](const std::string& name, std::uint64_t ne0, std::uint64_t ne1, bool with_min) {
    std::vector<std::uint8_t> nib(ne0 * ne1);
    std::vector<float> v(nib.size());
    const std::uint16_t m = 0xBC00;  // -1.0
    for (std::size_t i = 0; i < nib.size(); ++i) {
      nib[i] = static_cast<std::uint8_t>((i * 7 + (with_min ? 1 : 4)) % 16);
      v[i] = with_min ? nib[i] * 0.5f - 1.0f : (nib[i] - 8) * 0.5f;
    }
    std::string data = testing::encode_q4(nib, 0x3800, with_min ? &m : nullptr);  // d = 0.5
    t.tensor_bytes += data.size();
    g.tensor(name, {ne0, ne1}, with_min ? GgmlType::kQ4_1 : GgmlType::kQ4_0, data);
    return v;
  };
  auto half_tensor = [&](const std::string& name, std::uint64_t ne0, std::uint64_t ne1, bool bf16) {
    std::vector<float> v(ne0 * ne1);
    std::string data;
    for (std::size_t i = 0; i < v.size(); ++i) {
      v[i] = static_cast<float>(static_cast<int>(i % 61) - 30) / 16.0f;
      std::uint32_t bits;
      std::memcpy(&bits, &v[i], 4);
      testing::append_pod<std::uint16_t>(data, bf16 ? static_cast<std::uint16_t>(bits >> 16) : fp32_to_fp16(v[i]));
    }
    t.tensor_bytes += data.size();
    g.tensor(name, {ne0, ne1}, bf16 ? GgmlType::kBF16 : GgmlType::kF16, data);
    return v;
  };
  auto f32_tensor = [&](const std::string& name, std::vector<std::uint64_t> dims, float base) {
    std::uint64_t n = 1;
    for (auto d : dims) n *= d;
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = base + static_cast<float>(i) / 64.0f;
    t.tensor_bytes += n * sizeof(float);
    g.tensor_f32(name, dims, v);
    return v;
  };
  ModelWeights& w = t.expected;
  w.token_embedding = q8_tensor("token_embd.weight", 32, 32, 0);
  w.layers.resize(1);
  LayerWeights& L = w.layers[0];
  L.attn_norm = f32_tensor("blk.0.attn_norm.weight", {32}, 1.0f);
  L.wq = q4_tensor("blk.0.attn_q.weight", 32, 32, false);
  L.wk = q4_tensor("blk.0.attn_k.weight", 32, 16, true);
  L.wv = half_tensor("blk.0.attn_v.weight", 32, 16, false);
  L.wo = half_tensor("blk.0.attn_output.weight", 32, 32, true);
  L.ffn_norm = f32_tensor("blk.0.ffn_norm.weight", {32}, 0.5f);
  L.w1 = f32_tensor("blk.0.ffn_gate.weight", {32, 64}, -1.0f);
  L.w2 = q8_tensor("blk.0.ffn_down.weight", 64, 32, 5);
  L.w3 = half_tensor("blk.0.ffn_up.weight", 32, 64, false);
  w.final_norm = f32_tensor("output_norm.weight", {32}, 2.0f);
  t.bytes = g.build(alignment);
  return t;
}

void expect_weights_equal(const ModelWeights& a, const ModelWeights& e) {
  EXPECT_EQ(a.token_embedding, e.token_embedding);
  ASSERT_EQ(a.layers.size(), e.layers.size());
  for (std::size_t l = 0; l < e.layers.size(); ++l) {
    EXPECT_EQ(a.layers[l].attn_norm, e.layers[l].attn_norm);
    EXPECT_EQ(a.layers[l].wq, e.layers[l].wq);
    EXPECT_EQ(a.layers[l].wk, e.layers[l].wk);
    EXPECT_EQ(a.layers[l].wv, e.layers[l].wv);
    EXPECT_EQ(a.layers[l].wo, e.layers[l].wo);
    EXPECT_EQ(a.layers[l].bq, e.layers[l].bq);
    EXPECT_EQ(a.layers[l].bk, e.layers[l].bk);
    EXPECT_EQ(a.layers[l].bv, e.layers[l].bv);
    EXPECT_EQ(a.layers[l].ffn_norm, e.layers[l].ffn_norm);
    EXPECT_EQ(a.layers[l].w1, e.layers[l].w1);
    EXPECT_EQ(a.layers[l].w2, e.layers[l].w2);
    EXPECT_EQ(a.layers[l].w3, e.layers[l].w3);
  }
  EXPECT_EQ(a.final_norm, e.final_norm);
  EXPECT_EQ(a.classifier, e.classifier);
}

TEST(Gguf, TinyModelWithEveryTensorTypeLoadsExactly) {
  TempDir dir("gguf");
  for (std::uint32_t version : {2u, 3u}) {
    for (std::uint64_t alignment : {32u, 64u}) {
      const TinyGguf t = tiny_llama_gguf(version, alignment);
      const std::string path = dir.file("tiny.gguf");
      testing::write_file(path, t.bytes);
      EXPECT_EQ(detect_model_format(path), ModelFormat::kGguf);
      const LoadedModel m = load_model(path);
      const ModelConfig& c = m.weights.config;
      EXPECT_EQ(c.dim, 32);
      EXPECT_EQ(c.hidden_dim, 64);
      EXPECT_EQ(c.n_layers, 1);
      EXPECT_EQ(c.n_heads, 4);
      EXPECT_EQ(c.n_kv_heads, 2);
      EXPECT_EQ(c.vocab_size, 32);
      EXPECT_EQ(c.max_seq_len, 128);
      EXPECT_EQ(c.rope_theta, 5000.0f);
      EXPECT_EQ(c.norm_eps, 1e-6f);
      EXPECT_EQ(c.bos_id, 29);
      EXPECT_EQ(c.eos_id, 30);
      EXPECT_TRUE(c.tied_classifier);  // no output.weight
      EXPECT_EQ(c.rope_style, RopeStyle::kInterleaved);
      EXPECT_EQ(m.weights.source_bytes, t.tensor_bytes);
      expect_weights_equal(m.weights, t.expected);

      const GgufFile f = GgufFile::open(path);
      EXPECT_EQ(f.version(), version);
      EXPECT_EQ(f.alignment(), alignment);
      EXPECT_EQ(f.data_offset() % alignment, 0u);
      EXPECT_EQ(f.tensors().size(), 11u);
      const GgufTensorInfo* q = f.find_tensor("blk.0.attn_k.weight");
      ASSERT_NE(q, nullptr);
      EXPECT_EQ(q->dims, (std::vector<std::uint64_t>{32, 16}));
      EXPECT_EQ(q->type, static_cast<std::uint32_t>(GgmlType::kQ4_1));
      EXPECT_EQ(q->bytes, 16u * 20u);

      // The gpt2 tokenizer: merges "a b", "ab c" and control tokens matched verbatim.
      ASSERT_NE(m.tokenizer, nullptr);
      const auto* bpe = dynamic_cast<const ByteLevelBpeTokenizer*>(m.tokenizer.get());
      ASSERT_NE(bpe, nullptr);
      EXPECT_EQ(m.tokenizer->encode("abc", false), (std::vector<int>{28}));
      EXPECT_EQ(m.tokenizer->encode("abcab a<s>", true), (std::vector<int>{29, 28, 27, 31, 29}));
      EXPECT_EQ(m.tokenizer->decode({28, 27, 31, 30}), "abcab a</s>");
    }
  }
}

TEST(Gguf, MetadataOfEveryValueType) {
  GgufBuilder g(3);
  g.raw("u8", 0, std::string(1, '\xfe'));
  g.raw("i8", 1, std::string(1, '\xfe'));
  g.raw("u16", 2, std::string("\xff\xff", 2));
  g.raw("i16", 3, std::string("\xfe\xff", 2));
  g.u32("u32", 4000000000u);
  g.i32("i32", -7);
  g.f32("f32", 0.125f);
  g.boolean("bool", true);
  g.string("str", "h\xc3\xa9llo");
  g.u64("u64", 1ull << 40);
  std::string i64;
  testing::append_pod<std::int64_t>(i64, -(1ll << 40));
  g.raw("i64", 11, i64);
  std::string f64;
  testing::append_pod<double>(f64, 2.5);
  g.raw("f64", 12, f64);
  g.floats("floats", {1.5f, -2.0f});
  g.strings("strings", {"a", "", "c c"});
  // [[1, 2], [3]] as an array of u8 arrays
  std::string nested;
  testing::append_pod<std::uint64_t>(nested, 2);  // two items, each a u8 array
  testing::append_pod<std::uint32_t>(nested, 0);
  testing::append_pod<std::uint64_t>(nested, 2);
  nested += std::string("\x01\x02", 2);
  testing::append_pod<std::uint32_t>(nested, 0);
  testing::append_pod<std::uint64_t>(nested, 1);
  nested += '\x03';
  g.raw("nested", 9, std::string("\x09\x00\x00\x00", 4) + nested);
  TempDir dir("gguf_meta");
  testing::write_file(dir.file("m.gguf"), g.build());
  const GgufFile f = GgufFile::open(dir.file("m.gguf"));
  EXPECT_EQ(f.find("u8")->as_int("u8"), 254);
  EXPECT_EQ(f.find("i8")->as_int("i8"), -2);
  EXPECT_EQ(f.find("u16")->as_int("u16"), 65535);
  EXPECT_EQ(f.find("i16")->as_int("i16"), -2);
  EXPECT_EQ(f.find("u32")->as_int("u32"), 4000000000ll);
  EXPECT_EQ(f.find("i32")->as_int("i32"), -7);
  EXPECT_EQ(f.find("f32")->as_float("f32"), 0.125);
  EXPECT_EQ(f.find("bool")->as_int("bool"), 1);
  EXPECT_EQ(f.find("str")->as_string("str"), "h\xc3\xa9llo");
  EXPECT_EQ(f.find("u64")->as_int("u64"), 1ll << 40);
  EXPECT_EQ(f.find("i64")->as_int("i64"), -(1ll << 40));
  EXPECT_EQ(f.find("f64")->as_float("f64"), 2.5);
  EXPECT_EQ(f.find("floats")->as_floats("floats"), (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(f.find("strings")->as_strings("strings"), (std::vector<std::string>{"a", "", "c c"}));
  const GgufValue* n = f.find("nested");
  ASSERT_EQ(n->arrays.size(), 2u);
  EXPECT_EQ(n->arrays[0].as_ints("n"), (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ(n->arrays[1].as_ints("n"), (std::vector<std::int64_t>{3}));
  EXPECT_THROW(f.find("str")->as_int("str"), Error);
  EXPECT_EQ(f.find("missing"), nullptr);
  EXPECT_TRUE(f.tensors().empty());
}

// ---- bad files ---------------------------------------------------------------------------------

TEST(Gguf, RejectsBadMagicVersionAndTypes) {
  TempDir dir("gguf_bad");
  const std::string path = dir.file("bad.gguf");
  std::string bytes = tiny_llama_gguf().bytes;

  std::string magic = bytes;
  magic[0] = 'X';
  testing::write_file(path, magic);
  EXPECT_NE(error_of([&] { load_gguf(path); }).find(path + ": not a GGUF file (bad magic)"), std::string::npos);

  for (std::uint32_t v : {1u, 4u}) {
    std::string ver = bytes;
    std::memcpy(ver.data() + 4, &v, 4);
    testing::write_file(path, ver);
    EXPECT_NE(error_of([&] { load_gguf(path); }).find("unsupported GGUF version " + std::to_string(v)),
              std::string::npos);
  }

  // A Q4_K attention matrix: named in the error, both when loading and when reading it.
  GgufBuilder g;
  g.string("general.architecture", "llama");
  g.tensor_raw_type("token_embd.weight", {256, 4}, 12, std::string(4 * 144, '\0'));
  testing::write_file(path, g.build());
  const GgufFile f = GgufFile::open(path);
  EXPECT_NE(error_of([&] { f.read_f32(f.tensors()[0]); }).find("unsupported type Q4_K"), std::string::npos);
  GgufBuilder m;
  m.string("general.architecture", "mamba");
  testing::write_file(path, m.build());
  EXPECT_NE(error_of([&] { load_gguf(path); }).find("architecture 'mamba' is not supported"), std::string::npos);
  EXPECT_NE(error_of([&] { load_gguf(dir.file("absent.gguf")); }).find("absent.gguf: cannot open"),
            std::string::npos);
}

TEST(Gguf, RejectsUnsupportedTensorTypeInModel) {
  // Rewrite the type id of blk.0.attn_q.weight (Q4_0 = 2) to Q5_0 (6) in place.
  TinyGguf t = tiny_llama_gguf();
  const std::string name = "blk.0.attn_q.weight";
  const std::size_t at = t.bytes.find(name);
  ASSERT_NE(at, std::string::npos);
  const std::size_t type_at = at + name.size() + 4 + 2 * 8;  // n_dims, two dims
  ASSERT_EQ(t.bytes[type_at], 2);
  t.bytes[type_at] = 6;
  TempDir dir("gguf_type");
  testing::write_file(dir.file("t.gguf"), t.bytes);
  const std::string err = error_of([&] { load_gguf(dir.file("t.gguf")); });
  EXPECT_NE(err.find("t.gguf"), std::string::npos) << err;
  EXPECT_NE(err.find("'blk.0.attn_q.weight' has unsupported type Q5_0"), std::string::npos) << err;
}

TEST(Gguf, RejectsShapeDisagreeingWithConfig) {
  TinyGguf t = tiny_llama_gguf();
  // Claim a feed-forward width of 96: ffn_gate [32, 64] no longer fits.
  const std::string key = "llama.feed_forward_length";
  const std::size_t at = t.bytes.find(key);
  ASSERT_NE(at, std::string::npos);
  const std::uint32_t wide = 96;
  std::memcpy(t.bytes.data() + at + key.size() + 4, &wide, 4);
  TempDir dir("gguf_shape");
  testing::write_file(dir.file("s.gguf"), t.bytes);
  const std::string err = error_of([&] { load_gguf(dir.file("s.gguf")); });
  EXPECT_NE(err.find("s.gguf: tensor 'blk.0.ffn_gate.weight' has shape [32, 64], the config needs [32, 96]"),
            std::string::npos)
      << err;
}

TEST(Gguf, RejectsTensorDataPastEndOfFile) {
  const TinyGguf t = tiny_llama_gguf();
  TempDir dir("gguf_eof");
  testing::write_file(dir.file("e.gguf"), t.bytes.substr(0, t.bytes.size() - 1));
  const std::string err = error_of([&] { GgufFile::open(dir.file("e.gguf")); });
  EXPECT_NE(err.find("'output_norm.weight': data"), std::string::npos) << err;
  EXPECT_NE(err.find("runs past the end of the file"), std::string::npos) << err;
}

TEST(Gguf, TruncationAtEveryOffsetIsAnError) {
  QuietLogs quiet;
  const TinyGguf t = tiny_llama_gguf();
  TempDir dir("gguf_trunc");
  const std::string path = dir.file("cut.gguf");
  // Every offset through the header and the first tensors, then every 7th through the data
  // (data cuts all meet the same bounds check).
  const std::size_t dense = GgufFile::open([&] {
    testing::write_file(path, t.bytes);
    return path;
  }()).data_offset() + 256;
  for (std::size_t n = 0; n < t.bytes.size(); n += n < dense ? 1 : 7) {
    testing::write_file(path, t.bytes.substr(0, n));
    const std::string err = error_of([&] { load_gguf(path); });
    ASSERT_EQ(err.rfind(path + ": ", 0), 0u) << "cut at " << n << ": '" << err << "'";
  }
}

// Random mutations of a valid file must load or throw Error: never crash, never another exception.
TEST(Gguf, RandomMutationsLoadOrThrowError) {
  QuietLogs quiet;
  const TinyGguf t = tiny_llama_gguf();
  const std::size_t header = GgufBuilder().build().size() + 2048;  // bias mutations to the header
  TempDir dir("gguf_fuzz");
  const std::string path = dir.file("fuzz.gguf");
  std::mt19937_64 rng(20240601);
  int loaded = 0, rejected = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::string b = t.bytes;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const std::size_t span = rng() % 4 == 0 ? b.size() : std::min(header, b.size());
      const std::size_t at = rng() % span;
      switch (rng() % 5) {
        case 0: b[at] = static_cast<char>(rng()); break;                      // random byte
        case 1: b[at] = static_cast<char>(b[at] ^ (1 << (rng() % 8))); break;  // bit flip
        case 2: b[at] = static_cast<char>(0xFF); break;                       // huge counts
        case 3: b.resize(at); break;                                          // truncate
        case 4: b.insert(at, 1 + rng() % 8, static_cast<char>(rng())); break;  // insert
      }
      if (b.empty()) break;
    }
    testing::write_file(path, b);
    try {
      load_gguf(path);
      ++loaded;
    } catch (const Error& e) {
      ++rejected;
      ASSERT_EQ(std::string(e.what()).rfind(path + ": ", 0), 0u) << e.what();
    } catch (const std::exception& e) {
      FAIL() << "iteration " << iter << ": non-Error exception " << e.what();
    }
  }
  EXPECT_GT(rejected, 1000);
  EXPECT_GT(loaded, 0);  // mutations of tensor data still load
}

// ---- SmolLM2 (optional: scripts/fetch_smollm2.sh) -----------------------------------------------

std::string smollm2_path() {
  const char* env = std::getenv("INFERLAB_MODELS");
  const std::string dir = env ? env : testing::source_dir() + "/models";
  return dir + "/SmolLM2-135M-Instruct.Q4_1.gguf";
}

TEST(Gguf, SmolLM2Q4_1Loads) {
  const std::string path = smollm2_path();
  INFERLAB_REQUIRE_FILE(path);
  const GgufFile f = GgufFile::open(path);
  std::uint64_t total = 0;
  for (const auto& t : f.tensors()) total += t.bytes;
  const LoadedModel m = load_gguf(path);
  const ModelConfig& c = m.weights.config;
  EXPECT_EQ(c.dim, 576);
  EXPECT_EQ(c.hidden_dim, 1536);
  EXPECT_EQ(c.n_layers, 30);
  EXPECT_EQ(c.n_heads, 9);
  EXPECT_EQ(c.n_kv_heads, 3);
  EXPECT_EQ(c.vocab_size, 49152);
  EXPECT_EQ(c.max_seq_len, 8192);
  EXPECT_EQ(c.rope_theta, 100000.0f);
  EXPECT_TRUE(c.tied_classifier);
  EXPECT_EQ(c.bos_id, 1);
  EXPECT_EQ(c.eos_id, 2);
  EXPECT_EQ(m.weights.source_bytes, total);
  EXPECT_LT(m.weights.source_bytes, static_cast<std::uint64_t>(c.parameter_count()) * 4 / 3);
  // Dequantised weights are finite and not all zero.
  double sum = 0.0;
  for (float x : m.weights.layers[0].wq) {
    ASSERT_TRUE(std::isfinite(x));
    sum += std::fabs(x);
  }
  EXPECT_GT(sum, 0.0);
  ASSERT_NE(dynamic_cast<const ByteLevelBpeTokenizer*>(m.tokenizer.get()), nullptr);
}

}  // namespace
}  // namespace inferlab

namespace inferlab {
namespace {

// End to end through the loader's dequantisation and tokenizer: greedy decoding from SmolLM2
// (Q4_1 + Q8_0) writes sensible English.
TEST(Gguf, SmolLM2GreedyKnowsTheCapitalOfFrance) {
  const std::string path = smollm2_path();
  INFERLAB_REQUIRE_FILE(path);
  LoadedModel m = load_gguf(path);
  testing::FloatQuantization quant;
  testing::RefAttention attention;
  ThreadPool pool(2);
  Model model(m.weights, quant);
  m.weights = ModelWeights{};  // the Model holds its own copy
  testing::SequenceRunner runner(model, attention, pool, 16, 8);
  std::vector<int> next = m.tokenizer->encode("The capital of France is", false);
  std::vector<int> out;
  for (int step = 0; step < 6; ++step) {
    const std::vector<float>& logits = runner.feed(next);
    const int best = static_cast<int>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    out.push_back(best);
    next = {best};
  }
  const std::string text = m.tokenizer->decode(out);
  RecordProperty("continuation", text);
  EXPECT_NE(text.find("Paris"), std::string::npos) << text;
}

}  // namespace
}  // namespace inferlab
