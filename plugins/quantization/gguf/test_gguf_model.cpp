// quantization/gguf on real GGUF files (tests/data/gguf, made by llama.cpp's llama-quantize; see
// its README): the model run on the file's own blocks has the perplexity of the model run on the
// loader's dequantised fp32 copy (within 1e-4 nats with fp32 activations), and an experiment
// plans and runs it; SmolLM2-135M Q4_1 too when fetched (scripts/fetch_smollm2.sh).
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iostream>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <unistd.h>

#include "gguf_linear.h"
#include "inferlab/checkpoint.h"
#include "inferlab/experiment.h"
#include "inferlab/float_linear.h"
#include "inferlab/formats.h"
#include "inferlab/model.h"
#include "inferlab/quality.h"
#include "inferlab/registry.h"
#include "inferlab/rng.h"
#include "inferlab/runner.h"
#include "kernels/cpu/matmul_gguf.h"
#include "test_support.h"

namespace inferlab::plugins {
namespace {

std::string fixture(const std::string& name) { return testing::source_dir() + "/tests/data/gguf/" + name; }

struct NllGap {
  double fp32_nll, native_nll, int8_nll;
  int native_linears;
};

// Mean NLL of `max_tokens` tokens in windows of `context`, through the dequantised fp32 model and
// through the file's blocks (fp32 and int8 activations). The tokens: the committed eval text's
// (text), or seeded random ids (the random-weight kq256 models, whose vocabulary cannot spell it).
NllGap nll_gap(const std::string& path, int max_tokens, int context, bool text = true) {
  LoadedModel m = load_model(path);
  Registry reg({testing::plugin_dir()});
  CpuDevice device(2);
  auto att = reg.create_attention("flash", reg.resolve(PluginKind::kAttention, "flash", {}, "t"), device);
  std::ifstream in(testing::source_dir() + "/experiments/data/eval.txt");
  std::stringstream text_in;
  text_in << in.rdbuf();
  std::vector<int> tokens;
  if (text) {
    tokens = quality_tokens(text_in.str(), m.tokenizer.get(), m.weights.config.vocab_size, max_tokens);
  } else {
    Rng rng(9);
    for (int i = 0; i < max_tokens; ++i) tokens.push_back(static_cast<int>(rng.uniform_int(0, m.weights.config.vocab_size)));
  }
  NoQuantization none;
  GgufQuantization native(&m.weights, false), int8(&m.weights, true);
  Model fp32_model(m.weights, none, device), native_model(m.weights, native, device), int8_model(m.weights, int8, device);
  NllGap g{};
  g.fp32_nll = evaluate_perplexity(fp32_model, *att, tokens, context, context).mean_nll;
  g.native_nll = evaluate_perplexity(native_model, *att, tokens, context, context).mean_nll;
  g.int8_nll = evaluate_perplexity(int8_model, *att, tokens, context, context).mean_nll;
  for (const auto& [name, type] : m.weights.config.source_linear_types)
    g.native_linears += cpu::gguf_native_kernel(static_cast<GgmlType>(type)) ? 1 : 0;
  return g;
}

class GgufPerplexity : public ::testing::TestWithParam<const char*> {};

TEST_P(GgufPerplexity, NativeBlocksGiveTheDequantizedPerplexity) {
  const std::string path = fixture(GetParam());
  INFERLAB_REQUIRE_FILE(path);
  const NllGap g = nll_gap(path, 256, 64, std::string(GetParam()).rfind("stories", 0) == 0);
  EXPECT_GT(g.native_linears, 0) << "the file has no tensor of a native type: the test would compare fp32 with fp32";
  EXPECT_NEAR(g.native_nll, g.fp32_nll, 1e-4);
  EXPECT_NEAR(g.int8_nll, g.fp32_nll, 2e-2);  // the activation quantisation's cost
  std::cout << "[ INFO     ] " << GetParam() << ": mean NLL fp32 " << g.fp32_nll << ", native - fp32 "
            << g.native_nll - g.fp32_nll << ", native int8 activations - fp32 " << g.int8_nll - g.fp32_nll << "\n";
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GgufPerplexity,
                         ::testing::Values("stories260K-Q8_0.gguf", "stories260K-Q4_0.gguf", "stories260K-Q4_1.gguf",
                                           "kq256-Q4_K.gguf", "kq256-Q5_K.gguf"),
                         [](const ::testing::TestParamInfo<const char*>& p) {
                           std::string s = p.param;
                           for (char& c : s)
                             if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
                           return s;
                         });

// With packed panels (int8 activations, VNNI) the linears read the fused RMSNorm's activation
// blocks and run wq/wk/wv and w1/w3 as groups: the fused model's NLL is the unfused one's
// exactly, on each packed block type.
TEST(GgufFused, PackedLinearsTakeTheFusedBlocksWithTheSameNll) {
  if (!cpu::gemm_gguf_available()) GTEST_SKIP() << "this build has neither AVX-512 VNNI nor AVX2: nothing is packed";
  // kq256-Q4_K / -Q5_K: Q4_K_M / Q5_K_M-like mixes (Q6_K for attn_v / ffn_down / output) on the panels.
  for (const char* name : {"stories260K-Q8_0.gguf", "stories260K-Q4_0.gguf", "stories260K-Q4_1.gguf", "kq256-Q4_K.gguf",
                           "kq256-Q5_K.gguf"}) {
    SCOPED_TRACE(name);
    INFERLAB_REQUIRE_FILE(fixture(name));
    LoadedModel m = load_model(fixture(name));
    Registry reg({testing::plugin_dir()});
    CpuDevice device(2);
    auto att = reg.create_attention("flash", reg.resolve(PluginKind::kAttention, "flash", {}, "t"), device);
    GgufQuantization int8(&m.weights, true);
    Model model(m.weights, int8, device);
    std::vector<int> tokens;
    Rng rng(4);
    for (int i = 0; i < 96; ++i) tokens.push_back(static_cast<int>(rng.uniform_int(0, m.weights.config.vocab_size)));
    const double unfused = evaluate_perplexity(model, *att, tokens, 48, 48).mean_nll;
    device.set_fuse(true);
    EXPECT_EQ(evaluate_perplexity(model, *att, tokens, 48, 48).mean_nll, unfused);
  }
}

// An untied model's embedding table is a linear of its own: under 'gguf' it keeps the file's
// token_embd blocks (not an fp32 copy), and a looked-up row is the loader's exact dequantisation.
TEST(GgufEmbedding, UntiedTableKeepsTheFileBlocksAndExactRows) {
  const std::string path = fixture("kq256-Q4_K.gguf");
  INFERLAB_REQUIRE_FILE(path);
  const LoadedModel m = load_model(path);
  ASSERT_FALSE(m.weights.config.tied_classifier);
  const GgufFile f = GgufFile::open(path);
  const GgufTensorInfo* embd = f.find_tensor("token_embd.weight");
  ASSERT_NE(embd, nullptr);
  ASSERT_TRUE(ggml_type_is_quantized(static_cast<GgmlType>(embd->type)));
  const int v = m.weights.config.vocab_size, d = m.weights.config.dim;
  GgufQuantization native(&m.weights, false);
  CpuDevice device(1);
  const Model model(m.weights, native, device);
  EXPECT_LE(model.embedding_bytes(), embd->bytes + embd->bytes / 8);  // the blocks (packing may pad)
  EXPECT_LT(model.embedding_bytes(), static_cast<std::uint64_t>(v) * d * sizeof(float) / 4);
  // With int8 activations on a VNNI build the Q4_K table is packed into gemm_gguf's panels: a row
  // unpacked from them is still the loader's exact dequantisation.
  // With fp32 activations the linears run the loaded blocks themselves: shared, not copied.
  {
    const auto wq = native.make_linear("layers.0.wq", {}, m.weights.config.dim, d);
    const auto* block_linear = dynamic_cast<const GgufBlockLinear*>(wq.get());
    ASSERT_NE(block_linear, nullptr);
    ASSERT_NE(m.weights.source_blocks("layers.0.wq"), nullptr);
    EXPECT_EQ(block_linear->blocks(), m.weights.source_blocks("layers.0.wq"));
  }
  // The table is held only as its blocks, and the strategy asks for no values.
  GgufQuantization packed(&m.weights, true);
  EXPECT_TRUE(m.weights.token_embedding.empty());
  const std::vector<float> exact = m.weights.matrix("embedding");
  for (Quantization* q : {static_cast<Quantization*>(&native), static_cast<Quantization*>(&packed)}) {
    EXPECT_FALSE(q->needs_values("embedding"));
    const auto table = q->make_linear("embedding", {}, v, d);
    std::vector<float> row(static_cast<std::size_t>(d));
    for (int t : {0, 1, v / 2, v - 1}) {
      table->dequantize_row(t, row.data());
      EXPECT_TRUE(std::equal(row.begin(), row.end(), exact.begin() + static_cast<std::ptrdiff_t>(t) * d)) << "row " << t;
    }
  }
}

TEST(GgufPerplexitySmolLM2, NativeQ4_1BlocksGiveTheDequantizedPerplexity) {
  const char* env = std::getenv("INFERLAB_MODELS");
  const std::string path = (env ? std::string(env) : testing::source_dir() + "/models") + "/SmolLM2-135M-Instruct.Q4_1.gguf";
  INFERLAB_REQUIRE_FILE(path);
  const NllGap g = nll_gap(path, 64, 32);
  EXPECT_GT(g.native_linears, 0);
  EXPECT_NEAR(g.native_nll, g.fp32_nll, 1e-4);
  EXPECT_NEAR(g.int8_nll, g.fp32_nll, 5e-2);
  std::cout << "[ INFO     ] SmolLM2 Q4_1: mean NLL fp32 " << g.fp32_nll << ", native - fp32 "
            << g.native_nll - g.fp32_nll << ", native int8 activations - fp32 " << g.int8_nll - g.fp32_nll << "\n";
}

// validate refuses the strategy on a model that is not a GGUF, naming the TOML line; on a GGUF
// an experiment with both activation paths runs every cell.
TEST(GgufExperiment, ValidateRefusesANonGgufModelAndAGgufOneRuns) {
  const std::string bin = testing::data_path("models/stories260K/stories260K.bin"), gguf = fixture("stories260K-Q4_0.gguf");
  INFERLAB_REQUIRE_FILE(bin);
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("inferlab_gguf_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto toml = [&](const std::string& name, const std::string& model) {
    std::ofstream(dir / name) << "[experiment]\nname = \"g\"\n[model]\npath = \"" << model << "\"\n"
                              << "[workload]\nnum_requests = 2\nprompt_len = 8\noutput_len = 4\n"
                              << "[[variant]]\nname = \"native\"\nquantization = \"gguf\"\n"
                              << "[[variant]]\nname = \"native_int8\"\n"
                              << "quantization = { name = \"gguf\", activations = \"int8\" }\n";
    return (dir / name).string();
  };
  const testing::CliResult refused = testing::run_inferlab("validate " + toml("bin.toml", bin), "", 60);
  EXPECT_EQ(refused.code, 1);
  EXPECT_NE(refused.err.find("bin.toml:"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("not a GGUF checkpoint"), std::string::npos) << refused.err;

  ExperimentSpec spec = load_experiment(toml("gguf.toml", gguf), {});
  Registry reg({testing::plugin_dir()});
  Plan plan = plan_experiment(spec, reg, experiment_model_config(spec.model));
  RunOptions ro;
  ro.out_root = dir.string();
  const RunOutcome outcome = run_plan(plan, reg, ro);
  EXPECT_EQ(outcome.rows, 3u);
  EXPECT_EQ(outcome.failed, 0u);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace inferlab::plugins
