// Presets, random weights and the llama2.c checkpoint reader (round trip and corrupt files).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "config_checks.h"
#include "inferlab/formats/checkpoint.h"
#include "inferlab/error.h"
#include "inferlab/model/model_config.h"
#include "inferlab/model/weights.h"
#include "model_fixtures.h"
#include "test_support.h"

namespace inferlab {
namespace {
namespace fs = std::filesystem;

TEST(ModelConfig, PresetsValidateAndHaveTheirPublishedParameterCounts) {
  ASSERT_EQ(preset_names().size(), 10u);
  for (const auto& name : preset_names()) {
    const ModelConfig c = preset_config(name);
    EXPECT_EQ(c.name, name);
    EXPECT_NO_THROW(c.validate()) << name;
  }
  // Published totals (embedding and untied classifier included).
  EXPECT_EQ(preset_config("stories260k").parameter_count(), 260032);
  EXPECT_EQ(preset_config("stories15m").parameter_count(), 15191712);
  EXPECT_EQ(preset_config("smollm2-135m").parameter_count(), 134515008);
  EXPECT_EQ(preset_config("tinyllama-1.1b").parameter_count(), 1100048384);
  EXPECT_EQ(preset_config("llama-3.2-1b").parameter_count(), 1235814400);
  EXPECT_EQ(preset_config("llama-2-7b").parameter_count(), 6738415616);
  EXPECT_EQ(preset_config("llama-2-13b").parameter_count(), 13015864320);  // HF Llama-2-13b
  EXPECT_EQ(preset_config("llama-3-8b").parameter_count(), 8030261248);
  // OPT-13B's attention shape and context in the Llama structure (tied classifier, SwiGLU width
  // chosen for its size): 12.84B against OPT's published 12.85B, which adds biases and learned
  // positions.
  EXPECT_EQ(preset_config("opt-13b").parameter_count(), 12840514560);
  const ModelConfig smol = preset_config("smollm2-135m");
  EXPECT_EQ(smol.head_dim(), 64);
  EXPECT_EQ(smol.kv_dim(), 192);
  EXPECT_FLOAT_EQ(smol.rope_theta, 100000.0f);
}

TEST(ModelConfig, UnknownPresetListsTheKnownOnes) {
  try {
    preset_config("llama-9");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tinyllama-1.1b"), std::string::npos) << e.what();
  }
}

TEST(ModelConfig, ValidateNamesTheBadField) {
  ModelConfig c = preset_config("stories260k");
  c.n_kv_heads = 3;
  EXPECT_THROW(c.validate(), Error);
  c = preset_config("stories260k");
  c.dim = 60;  // 8 heads do not divide 60
  EXPECT_THROW(c.validate(), Error);
  c = preset_config("stories260k");
  c.bos_id = 512;
  EXPECT_THROW(c.validate(), Error);
}

ModelConfig tiny_config(bool tied, bool bias) {
  ModelConfig c{.name = "tiny", .dim = 16, .hidden_dim = 24, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2,
                .vocab_size = 40, .max_seq_len = 32};
  c.tied_classifier = tied;
  c.qkv_bias = bias;
  return c;
}

TEST(RandomWeights, DeterministicPerSeedAndDifferentAcrossSeeds) {
  const ModelConfig c = tiny_config(false, true);
  const ModelWeights a = random_weights(c, 42), b = random_weights(c, 42), d = random_weights(c, 43);
  EXPECT_NO_THROW(a.validate());
  EXPECT_EQ(a.token_embedding, b.token_embedding);
  EXPECT_EQ(a.layers[1].w2, b.layers[1].w2);
  EXPECT_EQ(a.layers[0].bk, b.layers[0].bk);
  EXPECT_EQ(a.classifier, b.classifier);
  EXPECT_NE(a.layers[1].w2, d.layers[1].w2);
  EXPECT_NE(a.token_embedding, d.token_embedding);
  EXPECT_NE(a.layers[0].wq, a.layers[1].wq);  // tensors draw independent streams
  EXPECT_EQ(a.layers[0].attn_norm, std::vector<float>(16, 1.0f));
  EXPECT_EQ(a.final_norm, std::vector<float>(16, 1.0f));
  EXPECT_EQ(a.source_bytes, 0u);
}

// seeded_weights holds the norms and biases now and every matrix as a seed: each drawn matrix,
// and the whole set materialised, is random_weights' bit for bit (tied and untied, with QKV
// biases between the matrices' ids), and a model built from either gives the same logits.
TEST(SeededWeights, DrawRandomWeightsValuesOnDemand) {
  for (bool tied : {true, false}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    const ModelConfig c = tiny_config(tied, true);
    const ModelWeights eager = random_weights(c, 7);
    const ModelWeights lazy = seeded_weights(c, 7);
    EXPECT_NO_THROW(lazy.validate());
    EXPECT_TRUE(lazy.has_lazy_matrices());
    EXPECT_TRUE(lazy.token_embedding.empty());
    EXPECT_TRUE(lazy.layers[1].w2.empty());
    EXPECT_EQ(lazy.layers[1].bk, eager.layers[1].bk);
    EXPECT_EQ(lazy.matrix("layers.1.w2"), eager.layers[1].w2);
    EXPECT_EQ(lazy.matrix("embedding"), eager.token_embedding);
    EXPECT_EQ(lazy.matrix("classifier"), tied ? eager.token_embedding : eager.classifier);
    ModelWeights dense = lazy;
    dense.materialize();
    EXPECT_FALSE(dense.has_lazy_matrices());
    testing::expect_weights_equal(dense, eager);
    const std::vector<int> tokens = {1, 5, 9, 30};
    EXPECT_EQ(testing::cpu_logits(lazy, tokens), testing::cpu_logits(eager, tokens));
  }
  EXPECT_THROW((void)seeded_weights(tiny_config(true, false), 1).matrix("layers.2.wq"), Error);
}

TEST(RandomWeights, LinearsHaveUnitFanInScale) {
  const ModelConfig c = preset_config("stories15m");
  const ModelWeights w = random_weights(c, 1);
  EXPECT_NO_THROW(w.validate());
  EXPECT_TRUE(w.classifier.empty());
  auto moments = [](const std::vector<float>& t) {
    double s = 0, ss = 0;
    for (float v : t) s += v, ss += static_cast<double>(v) * v;
    const double mean = s / static_cast<double>(t.size());
    return std::pair<double, double>(mean, std::sqrt(ss / static_cast<double>(t.size()) - mean * mean));
  };
  const auto [m1, s1] = moments(w.layers[3].w1);  // fan-in 288
  EXPECT_NEAR(m1, 0.0, 2e-3);
  EXPECT_NEAR(s1, 1.0 / std::sqrt(288.0), 1e-3);
  const auto [m2, s2] = moments(w.layers[3].w2);  // fan-in 768
  EXPECT_NEAR(m2, 0.0, 2e-3);
  EXPECT_NEAR(s2, 1.0 / std::sqrt(768.0), 1e-3);
  const auto [me, se] = moments(w.token_embedding);
  EXPECT_NEAR(me, 0.0, 1e-3);
  EXPECT_NEAR(se, 0.02, 1e-3);
}

// Writes a llama2.c checkpoint of `w` (legacy header, freq_cis tables of zeros).
void write_llama2c(const std::string& path, const ModelWeights& w) {
  const ModelConfig& c = w.config;
  std::ofstream out(path, std::ios::binary);
  const std::int32_t header[7] = {c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads,
                                  c.tied_classifier ? c.vocab_size : -c.vocab_size, c.max_seq_len};
  out.write(reinterpret_cast<const char*>(header), sizeof(header));
  auto put = [&](const std::vector<float>& t) {
    out.write(reinterpret_cast<const char*>(t.data()), static_cast<std::streamsize>(t.size() * sizeof(float)));
  };
  put(w.token_embedding);
  for (const auto& l : w.layers) put(l.attn_norm);
  for (const auto& l : w.layers) put(l.wq);
  for (const auto& l : w.layers) put(l.wk);
  for (const auto& l : w.layers) put(l.wv);
  for (const auto& l : w.layers) put(l.wo);
  for (const auto& l : w.layers) put(l.ffn_norm);
  for (const auto& l : w.layers) put(l.w1);
  for (const auto& l : w.layers) put(l.w2);
  for (const auto& l : w.layers) put(l.w3);
  put(w.final_norm);
  put(std::vector<float>(static_cast<std::size_t>(c.max_seq_len * c.head_dim()), 0.0f));  // freq_cis re + im
  if (!c.tied_classifier) put(w.classifier);
}

class Llama2cFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("inferlab_test_llama2c_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

TEST_F(Llama2cFile, RoundTripsTiedAndUntiedCheckpoints) {
  for (bool tied : {true, false}) {
    const ModelWeights w = random_weights(tiny_config(tied, false), 9);
    const std::string p = path(tied ? "tied.bin" : "untied.bin");
    write_llama2c(p, w);
    const ModelWeights r = load_llama2c(p);
    EXPECT_EQ(r.config.dim, 16);
    EXPECT_EQ(r.config.n_kv_heads, 2);
    EXPECT_EQ(r.config.tied_classifier, tied);
    EXPECT_EQ(r.config.rope_style, RopeStyle::kInterleaved);
    EXPECT_EQ(r.token_embedding, w.token_embedding);
    EXPECT_EQ(r.layers[1].wk, w.layers[1].wk);
    EXPECT_EQ(r.layers[0].w3, w.layers[0].w3);
    EXPECT_EQ(r.final_norm, w.final_norm);
    EXPECT_EQ(r.classifier, w.classifier);
    EXPECT_EQ(r.source_bytes, static_cast<std::uint64_t>(w.config.parameter_count()) * 4);
    testing::expect_same_config(read_model_config(p), r.config);  // the header alone
  }
}

// read_model_config reads the 28-byte header only: a file cut right after it still gives the
// config (an experiment validates without reading weights); loading it is the error.
TEST_F(Llama2cFile, HeaderReadStopsAtTheHeader) {
  const ModelWeights w = random_weights(tiny_config(false, false), 3);
  const std::string full = path("full.bin");
  write_llama2c(full, w);
  const ModelConfig loaded = load_llama2c(full).config;
  const std::string cut = path("header_only.bin");
  fs::copy_file(full, cut, fs::copy_options::overwrite_existing);
  fs::resize_file(cut, 28);
  ModelConfig header = read_model_config(cut, ModelFormat::kLlama2c);
  header.name = loaded.name;  // named after the file
  testing::expect_same_config(header, loaded);
  EXPECT_THROW(load_llama2c(cut), Error);
  fs::resize_file(cut, 27);
  EXPECT_THROW(read_model_config(cut), Error);
}

TEST_F(Llama2cFile, TruncatedOrPaddedFileIsAnErrorNamingThePath) {
  const ModelWeights w = random_weights(tiny_config(false, false), 3);
  const std::string full = path("full.bin");
  write_llama2c(full, w);
  std::ifstream in(full, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::size_t cuts[] = {0, 5, 27, 28, 100, bytes.size() / 2, bytes.size() - 4, bytes.size() - 1};
  for (std::size_t cut : cuts) {
    const std::string p = path("cut" + std::to_string(cut) + ".bin");
    std::ofstream(p, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(cut));
    try {
      load_llama2c(p);
      ADD_FAILURE() << "no error for a file cut at " << cut;
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind(p + ":", 0), 0u) << e.what();
    }
  }
  const std::string padded = path("padded.bin");
  std::ofstream(padded, std::ios::binary) << bytes << "junk";
  EXPECT_THROW(load_llama2c(padded), Error);
  EXPECT_THROW(load_llama2c(path("missing.bin")), Error);
}

TEST_F(Llama2cFile, BadHeaderValuesAreErrors) {
  const std::int32_t headers[][7] = {
      {0, 24, 2, 4, 2, 40, 32},           // dim 0
      {16, 24, 2, 3, 3, 40, 32},          // 3 heads do not divide 16
      {16, 24, 2, 4, 3, 40, 32},          // 3 kv heads do not divide 4 heads
      {16, 24, -2, 4, 2, 40, 32},         // negative layers
      {16, 24, 2, 4, 2, 0, 32},           // no vocabulary
      {1 << 30, 24, 2, 4, 2, 40, 32},     // absurd dim
      {16, 24, 2, 4, 2, INT32_MIN, 32},   // |vocab| overflows
      {0x464C457F, 0x10102, 0, 0, 0, 0, 0},  // an ELF file, say
  };
  for (const auto& h : headers) {
    const std::string p = path("header.bin");
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(h), sizeof(h));
    out.write(std::string(4096, '\0').data(), 4096);
    out.close();
    try {
      load_llama2c(p);
      ADD_FAILURE() << "accepted header starting " << h[0] << ", " << h[1];
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
    }
  }
}

TEST_F(Llama2cFile, FormatDetectionAndNames) {
  EXPECT_EQ(parse_model_format("gguf"), ModelFormat::kGguf);
  EXPECT_EQ(parse_model_format("hf"), ModelFormat::kHuggingFace);
  EXPECT_EQ(parse_model_format("llama2c"), ModelFormat::kLlama2c);
  EXPECT_EQ(parse_model_format("auto"), ModelFormat::kAuto);
  EXPECT_THROW(parse_model_format("onnx"), Error);
  EXPECT_STREQ(model_format_name(ModelFormat::kGguf), "gguf");
  const std::string gguf = path("m.gguf");
  std::ofstream(gguf, std::ios::binary) << "GGUF\x03";
  EXPECT_EQ(detect_model_format(gguf), ModelFormat::kGguf);
  EXPECT_EQ(detect_model_format(dir_.string()), ModelFormat::kHuggingFace);
  write_llama2c(path("m.bin"), random_weights(tiny_config(true, false), 1));
  EXPECT_EQ(detect_model_format(path("m.bin")), ModelFormat::kLlama2c);
  EXPECT_THROW(detect_model_format(path("nope.bin")), Error);
  // Without a tokenizer beside it, a llama2.c model loads with none.
  const LoadedModel m = load_model(path("m.bin"));
  EXPECT_EQ(m.format, ModelFormat::kLlama2c);
  EXPECT_EQ(m.tokenizer, nullptr);
}

TEST(Checkpoint, RealStories260kLoadsWithItsTokenizer) {
  const std::string p = testing::data_path("models/stories260K/stories260K.bin");
  INFERLAB_REQUIRE_FILE(p);
  const LoadedModel m = load_model(p);
  EXPECT_EQ(m.format, ModelFormat::kLlama2c);
  const ModelConfig& c = m.weights.config;
  const ModelConfig preset = preset_config("stories260k");
  EXPECT_EQ(c.dim, preset.dim);
  EXPECT_EQ(c.hidden_dim, preset.hidden_dim);
  EXPECT_EQ(c.n_layers, preset.n_layers);
  EXPECT_EQ(c.n_heads, preset.n_heads);
  EXPECT_EQ(c.n_kv_heads, preset.n_kv_heads);
  EXPECT_EQ(c.vocab_size, preset.vocab_size);
  EXPECT_EQ(c.max_seq_len, preset.max_seq_len);
  EXPECT_TRUE(c.tied_classifier);
  EXPECT_EQ(c.parameter_count(), 260032);
  ASSERT_NE(m.tokenizer, nullptr);
  EXPECT_EQ(m.tokenizer->vocab_size(), 512);
}

}  // namespace
}  // namespace inferlab
