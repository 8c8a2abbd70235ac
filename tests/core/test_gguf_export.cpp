// GGUF export: the Q8_0 / Q4_0 quantisers against ggml's block definitions on hand-made blocks,
// and export -> load_gguf round trips (identical weights and logits for F32, the quantiser's
// dequantised values for Q8_0 / Q4_0, tokenizers kept, half-rotation RoPE permuted).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "config_checks.h"
#include "format_writers.h"
#include "inferlab/formats/checkpoint.h"
#include "inferlab/error.h"
#include "inferlab/formats/formats.h"
#include "inferlab/model/model.h"
#include "inferlab/model/model_config.h"
#include "inferlab/support/rng.h"
#include "model_fixtures.h"
#include "test_support.h"

namespace inferlab {
namespace {

std::vector<std::uint8_t> quantized(GgmlType type, const std::vector<float>& x) {
  std::vector<std::uint8_t> out(ggml_tensor_bytes(type, x.size()));
  quantize(type, x.data(), x.size(), out.data());
  return out;
}

std::vector<float> roundtrip(GgmlType type, const std::vector<float>& x) {
  const auto q = quantized(type, x);
  std::vector<float> out(x.size());
  dequantize(type, q.data(), x.size(), out.data());
  return out;
}

TEST(GgufExport, Q8_0BlockFollowsGgmlReference) {
  std::vector<float> x(32, 0.0f);
  x[0] = 127.0f;   // the largest magnitude: d = 127 / 127 = 1
  x[1] = -127.0f;
  x[2] = 63.5f;    // round half away from zero -> 64
  x[3] = -2.5f;    // -> -3
  x[4] = 0.49f;    // -> 0
  const auto q = quantized(GgmlType::kQ8_0, x);
  ASSERT_EQ(q.size(), 34u);
  EXPECT_EQ(q[0] | (q[1] << 8), 0x3c00);  // fp16 1.0
  EXPECT_EQ(static_cast<std::int8_t>(q[2]), 127);
  EXPECT_EQ(static_cast<std::int8_t>(q[3]), -127);
  EXPECT_EQ(static_cast<std::int8_t>(q[4]), 64);
  EXPECT_EQ(static_cast<std::int8_t>(q[5]), -3);
  EXPECT_EQ(static_cast<std::int8_t>(q[6]), 0);
  // An all-zero block: d = 0 and zero quants (no division by zero).
  const auto z = quantized(GgmlType::kQ8_0, std::vector<float>(32, 0.0f));
  for (auto b : z) EXPECT_EQ(b, 0);
}

TEST(GgufExport, Q4_0BlockFollowsGgmlReference) {
  std::vector<float> x(32, 0.0f);
  x[0] = -8.0f;   // largest magnitude, negative: d = -8 / -8 = 1
  x[1] = 4.0f;    // trunc(4 + 8.5) = 12
  x[2] = 7.0f;    // 15
  x[3] = 7.9f;    // trunc(16.4) = 16, clamped to 15
  x[16] = 0.5f;   // 9, in the high nibble of byte 0
  x[17] = -3.4f;  // trunc(5.1) = 5
  const auto q = quantized(GgmlType::kQ4_0, x);
  ASSERT_EQ(q.size(), 18u);
  EXPECT_EQ(q[0] | (q[1] << 8), 0x3c00);
  EXPECT_EQ(q[2], 0 | (9 << 4));
  EXPECT_EQ(q[3], 12 | (5 << 4));
  EXPECT_EQ(q[4], 15 | (8 << 4));  // x[18] = 0 -> 8
  EXPECT_EQ(q[5], 15 | (8 << 4));
  // The sign of the largest element is kept: a positive max gives a negative d.
  std::vector<float> y(32, 1.0f);
  y[5] = -3.0f;
  y[9] = 3.0f;  // same magnitude later: the first one (-3) decides, d = -3 / -8
  const auto p = quantized(GgmlType::kQ4_0, y);
  EXPECT_FLOAT_EQ(fp16_to_fp32(static_cast<std::uint16_t>(p[0] | (p[1] << 8))), fp16_to_fp32(fp32_to_fp16(0.375f)));
  EXPECT_EQ(p[2 + 5] & 0x0f, 0);  // -3 / 0.375 + 8.5 = 0.5 -> 0
}

TEST(GgufExport, QuantisersErrorIsBoundedByTheScale) {
  Rng rng(7);
  std::vector<float> x(32 * 64);
  for (float& v : x) v = static_cast<float>(rng.uniform() * 2.0 - 1.0) * 3.0f;
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_0}) {
    const auto q = quantized(type, x);
    const auto back = roundtrip(type, x);
    for (std::size_t b = 0; b < x.size() / 32; ++b) {
      const float d = std::fabs(fp16_to_fp32(static_cast<std::uint16_t>(q[b * ggml_block_bytes(type)] |
                                                                         (q[b * ggml_block_bytes(type) + 1] << 8))));
      // Half a step (Q4_0: a whole one at the clamped end, where x / d = +8 becomes level 15),
      // plus the largest level times d's fp16 rounding (the quants use the fp32 d).
      const float bound = (type == GgmlType::kQ8_0 ? 0.5f : 1.0f) * d + (type == GgmlType::kQ8_0 ? 127.0f : 8.0f) * d / 2048.0f + 1e-6f;
      for (std::size_t j = 0; j < 32; ++j)
        ASSERT_LE(std::fabs(back[b * 32 + j] - x[b * 32 + j]), bound) << ggml_type_name(static_cast<std::uint32_t>(type));
    }
  }
  EXPECT_THROW(quantize(GgmlType::kQ4_1, x.data(), 32, nullptr), Error);
  std::vector<std::uint8_t> buf(64);
  EXPECT_THROW(quantize(GgmlType::kQ8_0, x.data(), 31, buf.data()), Error);
}

// Every float tensor of two models, pairwise (same config assumed); block-held matrices as
// their dequantised values.
template <typename Fn>
void for_each_tensor(const ModelWeights& given_a, const ModelWeights& given_b, Fn fn) {
  ModelWeights storage_a, storage_b;
  const ModelWeights& a = testing::with_values(given_a, storage_a);
  const ModelWeights& b = testing::with_values(given_b, storage_b);
  fn("token_embd", a.token_embedding, b.token_embedding);
  fn("output_norm", a.final_norm, b.final_norm);
  fn("output", a.classifier, b.classifier);
  for (std::size_t l = 0; l < a.layers.size(); ++l) {
    const LayerWeights &x = a.layers[l], &y = b.layers[l];
    fn("attn_norm", x.attn_norm, y.attn_norm);
    fn("ffn_norm", x.ffn_norm, y.ffn_norm);
    fn("attn_q", x.wq, y.wq);
    fn("attn_k", x.wk, y.wk);
    fn("attn_v", x.wv, y.wv);
    fn("attn_output", x.wo, y.wo);
    fn("ffn_gate", x.w1, y.w1);
    fn("ffn_down", x.w2, y.w2);
    fn("ffn_up", x.w3, y.w3);
  }
}

TEST(GgufExport, F32RoundTripGivesIdenticalWeightsAndLogits) {
  testing::TempDir dir("gguf_export_f32");
  ModelConfig c = preset_config("tinyllama-1.1b");  // untied classifier, GQA
  c.dim = 64, c.hidden_dim = 96, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.vocab_size = 300;
  const ModelWeights w = random_weights(c, 3);
  GgufExportOptions o;
  const GgufExportSummary s = write_gguf(dir.file("m.gguf"), w, o);
  EXPECT_EQ(s.architecture, "llama");
  EXPECT_EQ(s.tokenizer, "synthetic");
  const LoadedModel back = load_gguf(dir.file("m.gguf"));
  const ModelConfig& b = back.weights.config;
  EXPECT_EQ(b.dim, c.dim);
  EXPECT_EQ(b.n_kv_heads, c.n_kv_heads);
  EXPECT_EQ(b.vocab_size, c.vocab_size);
  EXPECT_FALSE(b.tied_classifier);
  EXPECT_EQ(b.rope_theta, c.rope_theta);
  EXPECT_EQ(b.norm_eps, c.norm_eps);
  for_each_tensor(w, back.weights, [](const char* name, const auto& x, const auto& y) { EXPECT_EQ(x, y) << name; });
  const std::vector<int> tokens = {1, 17, 299, 4, 250};
  EXPECT_EQ(testing::cpu_logits(w, tokens), testing::cpu_logits(back.weights, tokens));
  // The placeholder vocabulary llama.cpp needs: <s>/</s> at the config's ids, byte tokens.
  ASSERT_NE(back.tokenizer, nullptr);
  EXPECT_EQ(back.tokenizer->vocab_size(), c.vocab_size);
  EXPECT_EQ(back.tokenizer->bos_id(), c.bos_id);
  const auto* spm = dynamic_cast<const SentencePieceTokenizer*>(back.tokenizer.get());
  ASSERT_NE(spm, nullptr);
  EXPECT_EQ(spm->piece(3 + 0x0a), "<0x0A>");
  EXPECT_EQ(spm->piece(c.eos_id), "</s>");
}

TEST(GgufExport, QuantizedRoundTripGivesTheQuantisersValues) {
  testing::TempDir dir("gguf_export_q");
  const ModelConfig c = preset_config("stories260k");  // hidden 172: ffn_down rows are not blocks of 32
  const ModelWeights w = random_weights(c, 5);
  for (GgmlType type : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kF16}) {
    SCOPED_TRACE(ggml_type_name(static_cast<std::uint32_t>(type)));
    GgufExportOptions o;
    o.type = type;
    const GgufExportSummary s = write_gguf(dir.file("m.gguf"), w, o);
    const bool blocks = ggml_block_elements(type) > 1;
    EXPECT_EQ(s.kept_f32.size(), blocks ? static_cast<std::size_t>(c.n_layers) : 0u);
    const LoadedModel back = load_gguf(dir.file("m.gguf"));
    EXPECT_TRUE(back.weights.config.tied_classifier);
    for_each_tensor(w, back.weights, [&](const std::string& name, const auto& x, const auto& y) {
      const bool vector = name.find("norm") != std::string::npos;
      if (vector || x.empty() || (blocks && name == "ffn_down")) {
        EXPECT_EQ(x, y) << name;
      } else {
        EXPECT_EQ(roundtrip(type, x), y) << name;
      }
    });
    const GgufFile f = GgufFile::open(dir.file("m.gguf"));
    EXPECT_EQ(f.version(), 3u);
    EXPECT_EQ(f.find_tensor("blk.0.attn_q.weight")->type, static_cast<std::uint32_t>(type));
    EXPECT_EQ(f.find("general.file_type")->as_int("ft"), type == GgmlType::kQ8_0 ? 7 : type == GgmlType::kQ4_0 ? 2 : 1);
    EXPECT_EQ(f.find_tensor("output.weight"), nullptr);  // tied: llama.cpp reuses token_embd
  }
}

TEST(GgufExport, HalfRotationModelIsPermutedToInterleaved) {
  testing::TempDir dir("gguf_export_rope");
  ModelConfig c = preset_config("stories260k");
  c.rope_style = RopeStyle::kHalf;
  const ModelWeights w = random_weights(c, 9);
  EXPECT_EQ(write_gguf(dir.file("m.gguf"), w, {}).architecture, "llama");
  const LoadedModel back = load_gguf(dir.file("m.gguf"));
  EXPECT_EQ(back.weights.config.rope_style, RopeStyle::kInterleaved);
  EXPECT_NE(back.weights.layers[0].wq, w.layers[0].wq);  // rows moved
  const std::vector<int> tokens = {1, 40, 41, 300, 7, 9};
  const auto a = testing::cpu_logits(w, tokens), b = testing::cpu_logits(back.weights, tokens);
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-4f) << i;
}

TEST(GgufExport, TokenizersSurviveTheRoundTrip) {
  const std::string bin = testing::data_path("models/stories260K/stories260K.bin");
  const std::string gguf = testing::data_path("models/stories260K/stories260K.gguf");
  INFERLAB_REQUIRE_FILE(bin);
  INFERLAB_REQUIRE_FILE(gguf);
  testing::TempDir dir("gguf_export_tok");
  const std::string text = "Once upon a time, Lily saw a big red ball.\nThe end.";
  // llama2.c: the SentencePiece pieces and scores are written as a "llama" vocabulary.
  const LoadedModel spm = load_model(bin);
  ASSERT_NE(spm.tokenizer, nullptr);
  GgufExportOptions o;
  o.tokenizer = spm.tokenizer.get();
  EXPECT_EQ(write_gguf(dir.file("a.gguf"), spm.weights, o).tokenizer, "sentencepiece");
  const LoadedModel a = load_gguf(dir.file("a.gguf"));
  ASSERT_NE(a.tokenizer, nullptr);
  EXPECT_EQ(a.tokenizer->encode(text, EncodeOptions{true, false, true}),
            spm.tokenizer->encode(text, EncodeOptions{true, false, true}));
  // GGUF: the tokenizer.* metadata is copied verbatim.
  const LoadedModel g = load_model(gguf);
  const GgufFile src = GgufFile::open(gguf);
  GgufExportOptions og;
  og.tokenizer_source = &src;
  EXPECT_EQ(write_gguf(dir.file("b.gguf"), g.weights, og).tokenizer, "copied");
  const GgufFile out = GgufFile::open(dir.file("b.gguf"));
  std::size_t keys = 0;
  for (const auto& [key, v] : src.metadata()) {
    if (key.rfind("tokenizer.", 0) != 0) continue;
    ++keys;
    const GgufValue* w = out.find(key);
    ASSERT_NE(w, nullptr) << key;
    EXPECT_EQ(w->type, v.type) << key;
    EXPECT_EQ(w->strings, v.strings) << key;
    EXPECT_EQ(w->floats, v.floats) << key;
    EXPECT_EQ(w->ints, v.ints) << key;
    EXPECT_EQ(w->i, v.i) << key;
  }
  EXPECT_GT(keys, 2u);
  EXPECT_EQ(load_gguf(dir.file("b.gguf")).tokenizer->encode(text, {}), g.tokenizer->encode(text, {}));
}

TEST(GgufExport, UnsupportedTypeAndUnwritablePathAreErrors) {
  const ModelWeights w = random_weights(preset_config("stories260k"), 1);
  GgufExportOptions o;
  o.type = GgmlType::kQ4_1;
  EXPECT_THROW(write_gguf("/dev/null/x.gguf", w, o), Error);
  o.type = GgmlType::kF32;
  try {
    write_gguf("/nonexistent_dir_inferlab/x.gguf", w, o);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent_dir_inferlab/x.gguf"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace inferlab
