// Hugging Face export (write_hf, `inferlab export --format hf`): export -> load_hf round trips.
// A half-rotation model keeps every tensor bit for bit; an interleaved-RoPE model (llama2.c, the
// presets) has its Q/K rows permuted and must compute the same logits; BF16 / F16 hold the
// rounded values; an existing export is never overwritten; the CLI refuses what it cannot write.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include "config_checks.h"
#include "format_writers.h"
#include "inferlab/formats/checkpoint.h"
#include "inferlab/error.h"
#include "inferlab/formats/formats.h"
#include "inferlab/model/model.h"
#include "inferlab/model/model_config.h"
#include "kernels/ref/half.h"
#include "model_fixtures.h"
#include "test_support.h"

namespace inferlab {
namespace {

// What load_hf must give back for a model of config c exported into folder `dir`: c itself but
// for the folder's name and the half rotation (an interleaved model's Q/K rows were permuted).
ModelConfig as_exported(ModelConfig c, const std::string& dir) {
  c.name = std::filesystem::path(dir).filename().string();
  c.rope_style = RopeStyle::kHalf;
  return c;
}

TEST(HfExport, HalfRotationModelRoundTripsBitForBit) {
  testing::TempDir dir("hf_export_half");
  ModelConfig c = preset_config("smollm2-135m");  // GQA 9/3, tied classifier
  c.rope_style = RopeStyle::kHalf;                 // as a Hugging Face checkpoint loads
  c.n_layers = 2;
  c.vocab_size = 400;
  const ModelWeights w = random_weights(c, 4);
  const HfExportSummary s = write_hf(dir.file("m"), w, {});
  EXPECT_EQ(s.model_type, "llama");
  EXPECT_FALSE(s.permuted);
  const LoadedModel back = load_hf(dir.file("m"));
  testing::expect_same_config(back.weights.config, as_exported(c, dir.file("m")));
  EXPECT_TRUE(back.weights.classifier.empty());
  testing::expect_weights_equal(back.weights, w);
}

TEST(HfExport, InterleavedModelIsPermutedAndComputesTheSameLogits) {
  testing::TempDir dir("hf_export_interleaved");
  for (bool bias : {false, true}) {
    SCOPED_TRACE(bias ? "qkv bias (qwen2)" : "llama");
    ModelConfig c = preset_config("tinyllama-1.1b");  // interleaved RoPE, untied classifier, GQA
    c.dim = 64, c.hidden_dim = 96, c.n_layers = 2, c.n_heads = 4, c.n_kv_heads = 2, c.vocab_size = 300;
    c.qkv_bias = bias;
    ModelWeights w = random_weights(c, 6);
    const std::string out = dir.file(bias ? "qwen" : "llama");
    const HfExportSummary s = write_hf(out, w, {});
    EXPECT_EQ(s.model_type, bias ? "qwen2" : "llama");
    EXPECT_TRUE(s.permuted);
    const LoadedModel back = load_hf(out);
    testing::expect_same_config(back.weights.config, as_exported(c, out));
    EXPECT_NE(back.weights.layers[0].wq, w.layers[0].wq);  // rows moved
    EXPECT_EQ(back.weights.layers[0].wv, w.layers[0].wv);  // V is not rotated
    EXPECT_EQ(back.weights.classifier, w.classifier);
    const std::vector<int> tokens = {1, 17, 299, 4, 250, 31};
    const auto a = testing::cpu_logits(w, tokens), b = testing::cpu_logits(back.weights, tokens);
    ASSERT_EQ(a.size(), b.size());
    for (std::size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-4f) << i;
  }
}

TEST(HfExport, HalfDtypesHoldTheRoundedValues) {
  testing::TempDir dir("hf_export_dtypes");
  ModelConfig c = preset_config("smollm2-135m");
  c.n_layers = 1;
  c.vocab_size = 128;
  const ModelWeights w = random_weights(c, 8);
  for (const char* dtype : {"BF16", "F16"}) {
    SCOPED_TRACE(dtype);
    HfExportOptions o;
    o.dtype = dtype;
    const std::string out = dir.file(dtype);
    const HfExportSummary s = write_hf(out, w, o);
    const LoadedModel back = load_hf(out);
    std::vector<float> want(w.layers[0].w2.size());
    for (std::size_t i = 0; i < want.size(); ++i)
      want[i] = std::string(dtype) == "BF16" ? ref::bf16_to_float(ref::float_to_bf16(w.layers[0].w2[i]))
                                             : ref::f16_to_float(ref::float_to_f16(w.layers[0].w2[i]));
    EXPECT_EQ(back.weights.layers[0].w2, want);
    std::uint64_t values = w.token_embedding.size() + w.final_norm.size() + w.classifier.size();
    for (const LayerWeights& L : w.layers)
      values += L.attn_norm.size() + L.wq.size() + L.wk.size() + L.wv.size() + L.wo.size() + L.ffn_norm.size() +
                L.w1.size() + L.w2.size() + L.w3.size();
    EXPECT_EQ(s.tensor_bytes, 2 * values);  // two bytes a value, every tensor once
    EXPECT_LT(std::filesystem::file_size(std::filesystem::path(out) / "model.safetensors") - s.tensor_bytes, 16384u);
    std::ifstream cfg(std::filesystem::path(out) / "config.json");
    const std::string text((std::istreambuf_iterator<char>(cfg)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find(std::string("\"torch_dtype\": \"") + (std::string(dtype) == "BF16" ? "bfloat16" : "float16")),
              std::string::npos);
  }
  HfExportOptions bad;
  bad.dtype = "Q8_0";
  EXPECT_THROW(write_hf(dir.file("bad"), w, bad), Error);
}

TEST(HfExport, AnEarlierExportIsNeverOverwritten) {
  testing::TempDir dir("hf_export_twice");
  ModelConfig c = preset_config("stories260k");
  const ModelWeights w = random_weights(c, 2);
  write_hf(dir.file("m"), w, {});
  const auto before = std::filesystem::file_size(std::filesystem::path(dir.file("m")) / "model.safetensors");
  try {
    write_hf(dir.file("m"), random_weights(c, 3), {});
    FAIL() << "a second export into the same folder was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("exists"), std::string::npos) << e.what();
  }
  EXPECT_EQ(std::filesystem::file_size(std::filesystem::path(dir.file("m")) / "model.safetensors"), before);
  EXPECT_EQ(load_hf(dir.file("m")).weights.token_embedding, w.token_embedding);
}

TEST(HfExport, CliWritesAFolderAndRefusesWhatItCannotWrite) {
  testing::TempDir dir("hf_export_cli");
  const testing::CliResult ok = testing::run_inferlab("export --preset stories260k --format hf --type bf16 --out " + dir.file("m"));
  ASSERT_EQ(ok.code, 0) << ok.err;
  EXPECT_NE(ok.out.find("model_type llama"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("permuted"), std::string::npos) << ok.out;
  EXPECT_EQ(load_hf(dir.file("m")).weights.config.dim, preset_config("stories260k").dim);
  const testing::CliResult q = testing::run_inferlab("export --preset stories260k --format hf --type q8_0 --out " + dir.file("q"));
  EXPECT_NE(q.code, 0);
  EXPECT_NE(q.err.find("allowed: f32, f16, bf16"), std::string::npos) << q.err;
  const testing::CliResult t =
      testing::run_inferlab("export --preset stories260k --format hf --tokenizer synthetic --out " + dir.file("t"));
  EXPECT_NE(t.code, 0);
  EXPECT_NE(t.err.find("--tokenizer"), std::string::npos) << t.err;
  const testing::CliResult f = testing::run_inferlab("export --preset stories260k --format onnx --out " + dir.file("o"));
  EXPECT_NE(f.code, 0);
  EXPECT_NE(f.err.find("allowed: gguf, hf"), std::string::npos) << f.err;
}

}  // namespace
}  // namespace inferlab
