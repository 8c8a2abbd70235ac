// GGUF reader: the real stories260K GGUF against its llama2.c twin, dequantisation of every
// supported block type against exact values, header versions 2 and 3, alignment, metadata of
// every value type. Bad files are in test_gguf_errors.cpp, SmolLM2 in test_smollm2.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
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
#include "gguf_fixtures.h"
#include "test_support.h"

namespace inferlab {
namespace {

using testing::GgufBuilder;
using testing::TempDir;
using testing::TinyGguf;
using testing::tiny_llama_gguf;

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
  // The header alone: the same config, except that tying an output.weight identical to
  // token_embd needs the bytes, so the header reads it as a separate classifier.
  ModelConfig header = read_model_config(gguf);
  EXPECT_FALSE(header.tied_classifier);
  header.tied_classifier = true;
  testing::expect_same_config(header, gc);
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
  EXPECT_TRUE(ggml_type_supported(12));   // Q4_K (tests/core/test_gguf_kquants.cpp checks its values)
  EXPECT_TRUE(ggml_type_supported(10));   // Q2_K (tests/gguf/check_dequant.py checks its values)
  EXPECT_TRUE(ggml_type_supported(6));    // Q5_0
  EXPECT_TRUE(ggml_type_supported(23));   // IQ4_XS
  EXPECT_FALSE(ggml_type_supported(16));  // IQ2_XXS
  EXPECT_FALSE(ggml_type_supported(9));   // Q8_1
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
      testing::expect_weights_equal(m.weights, t.expected);
      testing::expect_same_config(read_model_config(path), c);  // the header alone

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
}  // namespace
}  // namespace inferlab
