// SmolLM2-135M-Instruct (Q4_1 GGUF, fetched by scripts/fetch_smollm2.sh; skipped when absent):
// loads with the right shape and byte count, and greedy decoding writes sensible English.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>

#include <gtest/gtest.h>

#include "format_writers.h"
#include "inferlab/tokenizer/bpe_tokenizer.h"
#include "inferlab/formats/checkpoint.h"
#include "inferlab/error.h"
#include "inferlab/formats/formats.h"
#include "inferlab/support/log.h"
#include "inferlab/model/model.h"
#include "inferlab/results/quality.h"
#include "model_fixtures.h"
#include "test_support.h"

namespace inferlab {
namespace {

TEST(SmolLM2, Q4_1GgufLoads) {
  const std::string path = testing::smollm2_path();
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
  // Held as its Q4_1 blocks; dequantised, finite and not all zero.
  EXPECT_TRUE(m.weights.layers[0].wq.empty());
  double sum = 0.0;
  for (float x : m.weights.matrix("layers.0.wq")) {
    ASSERT_TRUE(std::isfinite(x));
    sum += std::fabs(x);
  }
  EXPECT_GT(sum, 0.0);
  ASSERT_NE(dynamic_cast<const ByteLevelBpeTokenizer*>(m.tokenizer.get()), nullptr);
}

// End to end through the loader's dequantisation and tokenizer: greedy decoding from SmolLM2
// (Q4_1 + Q8_0) writes sensible English.
TEST(SmolLM2, GreedyKnowsTheCapitalOfFrance) {
  const std::string path = testing::smollm2_path();
  INFERLAB_REQUIRE_FILE(path);
  LoadedModel m = load_gguf(path);
  testing::FloatQuantization quant;
  testing::RefAttention attention;
  CpuDevice device(2);
  Model model(m.weights, quant, device);
  m.weights = ModelWeights{};  // the Model holds its own copy
  testing::SequenceRunner runner(model, attention, 16, 8);
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

// The file says tokenizer.ggml.add_bos_token = false, as llama.cpp and HF read it: documents
// (perplexity, [quality], prompts) start with the text's first token, not <|im_start|>.
TEST(SmolLM2, FileConventionsLeaveOutBos) {
  const std::string path = testing::smollm2_path();
  INFERLAB_REQUIRE_FILE(path);
  const auto tok = load_model_tokenizer(path);
  EXPECT_FALSE(tok->conventions().add_bos);
  EXPECT_FALSE(tok->conventions().add_eos);
  const std::string text = "Once upon a time, 123 cats sat.";
  const std::vector<int> plain = tok->encode(text, false);
  EXPECT_EQ(tok->encode_document(text), plain);
  EXPECT_EQ(quality_tokens(text, tok.get(), 49152, 0), plain);
  EXPECT_EQ(quality_tokens(text, tok.get(), 49152, 0, true).front(), tok->bos_id());  // the override
  EXPECT_EQ(tok->decode(plain), text);
}

}  // namespace
}  // namespace inferlab
