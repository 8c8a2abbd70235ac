// The model against the real stories260K checkpoint (golden greedy text as llama2.c run.c
// prints it), against a naive reference forward, and batched against token-by-token runs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "inferlab/formats/checkpoint.h"
#include "inferlab/error.h"
#include "inferlab/model/model.h"
#include "kernels/ref/ops.h"
#include "model_fixtures.h"
#include "plugins/common/decoding/sampling.h"
#include "test_support.h"

namespace inferlab {
namespace {

using testing::FloatQuantization;
using testing::RefAttention;
using testing::SequenceRunner;

std::string stories_path() { return testing::data_path("models/stories260K/stories260K.bin"); }

constexpr const char* kGoldenPrefix =
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the park. "
    "One day, she saw a big, red ball. She wanted to play with it, but it was too high.";

double max_abs_diff(const float* a, const float* b, std::size_t n) {
  double m = 0.0;
  for (std::size_t i = 0; i < n; ++i) m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  return m;
}

TEST(ModelGolden, Stories260kGreedyMatchesLlama2c) {
  INFERLAB_REQUIRE_FILE(stories_path());
  const LoadedModel loaded = load_model(stories_path());
  ASSERT_NE(loaded.tokenizer, nullptr);
  CpuDevice device(2);
  FloatQuantization quant;
  Model model(loaded.weights, quant, device);
  EXPECT_EQ(quant.linears_built(), 5 * 7 + 1);
  RefAttention attention;
  const std::vector<int> tokens = testing::generate_greedy(model, attention, 1, 256);
  const std::string text = loaded.tokenizer->decode(tokens);
  std::printf("[golden] %zu tokens, stopped by %s:\n%s\n", tokens.size(),
              tokens.size() + 1 < 256 ? "BOS" : "the 256-step limit", text.c_str());
  EXPECT_EQ(text.rfind(kGoldenPrefix, 0), 0u) << text;
  // run.c stops when the model emits BOS (id 1) or after 256 positions; greedy stories260K
  // never emits BOS, so all 256 steps print a token (the text ends mid-sentence).
  EXPECT_EQ(tokens.size(), 256u);
  EXPECT_NE(text.find("Lily's mom said, \"Lily, let's go to the park.\""), std::string::npos);
}

TEST(ModelGolden, WeightBytesCountLinearsAndNormsWithTheTiedEmbeddingOnce) {
  INFERLAB_REQUIRE_FILE(stories_path());
  const LoadedModel loaded = load_model(stories_path());
  CpuDevice device(2);
  FloatQuantization quant;
  Model model(loaded.weights, quant, device);
  // All parameters once: the tied embedding is the classifier linear (the lookup reads its rows).
  ASSERT_TRUE(loaded.weights.config.tied_classifier);
  EXPECT_EQ(model.weight_bytes(), 260032u * 4u);
}

TEST(ModelGolden, PrefillInOneBatchEqualsTokenByToken) {
  INFERLAB_REQUIRE_FILE(stories_path());
  const LoadedModel loaded = load_model(stories_path());
  CpuDevice device(2);
  FloatQuantization quant;
  Model model(loaded.weights, quant, device);
  RefAttention attention;
  const std::vector<int> prompt = loaded.tokenizer->encode("Once upon a time, there was a little dog who", true);
  ASSERT_GT(prompt.size(), 8u);
  const int vocab = model.config().vocab_size;

  SequenceRunner batched(model, attention, 4);  // small blocks: the prompt spans several
  const std::vector<float> all = batched.feed_all_logits(prompt);
  ASSERT_EQ(all.size(), prompt.size() * static_cast<std::size_t>(vocab));

  SequenceRunner stepped(model, attention, 4);
  for (std::size_t i = 0; i < prompt.size(); ++i) {
    const std::vector<float>& one = stepped.feed({prompt[i]});
    EXPECT_LT(max_abs_diff(one.data(), &all[i * static_cast<std::size_t>(vocab)], static_cast<std::size_t>(vocab)),
              1e-4)
        << "row " << i;
  }

  // Chunked prefill (3, then the rest) lands on the same last-row logits.
  SequenceRunner chunked(model, attention, 4);
  chunked.feed({prompt.begin(), prompt.begin() + 3});
  const std::vector<float> last = chunked.feed({prompt.begin() + 3, prompt.end()});
  EXPECT_LT(max_abs_diff(last.data(), &all[(prompt.size() - 1) * static_cast<std::size_t>(vocab)],
                         static_cast<std::size_t>(vocab)),
            1e-4);
}

TEST(ModelGolden, MixedBatchOfTwoSequencesEqualsSeparateRuns) {
  INFERLAB_REQUIRE_FILE(stories_path());
  const LoadedModel loaded = load_model(stories_path());
  CpuDevice device(2);
  FloatQuantization quant;
  Model model(loaded.weights, quant, device);
  RefAttention attention;
  const int vocab = model.config().vocab_size;
  const std::vector<int> a = loaded.tokenizer->encode("The cat sat", true);
  const std::vector<int> b = loaded.tokenizer->encode("Tom had a red car and", true);

  // Separate: a prefilled whole; b's last token decoded after the rest.
  SequenceRunner ra(model, attention, 4), rb(model, attention, 4);
  const std::vector<float> want_a = ra.feed(a);
  rb.feed({b.begin(), b.end() - 1});
  const std::vector<float> want_b = rb.feed({b.back()});

  // Together: seq 7 = b's prefix already cached, decodes 1 row; seq 3 prefills a in the same step.
  BlockManager kv(KvCacheConfig{4, 64, false});
  KvStorage storage(model.device(), model.config(), 64, 4);
  std::vector<BlockCopy> copies;
  std::vector<float> logits;
  StepBatch batch;
  const int nb = static_cast<int>(b.size());
  ASSERT_TRUE(kv.reserve(7, nb - 1, copies));
  batch.add_sequence(std::span<const int>(b).first(static_cast<std::size_t>(nb - 1)), 0, kv.block_table(7), 4);
  model.forward(batch, storage, attention, logits);
  EXPECT_TRUE(logits.empty());
  kv.set_length(7, nb - 1);

  ASSERT_TRUE(kv.reserve(7, nb, copies));
  ASSERT_TRUE(kv.reserve(3, static_cast<int>(a.size()), copies));
  EXPECT_TRUE(copies.empty());
  batch.clear();
  batch.add_sequence(std::span<const int>(b).last(1), nb - 1, kv.block_table(7), 4, 0, 1);
  batch.add_sequence(a, 0, kv.block_table(3), 4, static_cast<int>(a.size()) - 1, static_cast<int>(a.size()));
  EXPECT_EQ(batch.logit_rows, (std::vector<int>{0, batch.rows() - 1}));
  model.forward(batch, storage, attention, logits);
  ASSERT_EQ(logits.size(), 2u * static_cast<std::size_t>(vocab));
  EXPECT_LT(max_abs_diff(logits.data(), want_b.data(), static_cast<std::size_t>(vocab)), 1e-4);
  EXPECT_LT(max_abs_diff(&logits[static_cast<std::size_t>(vocab)], want_a.data(), static_cast<std::size_t>(vocab)),
            1e-4);
}

// A naive forward of the whole prompt (contiguous K/V, double softmax) using only kernels/ref.
// Returns logits [tokens, vocab].
std::vector<float> reference_forward(const ModelWeights& w, const std::vector<int>& tokens) {
  const ModelConfig& c = w.config;
  const int n = static_cast<int>(tokens.size()), d = c.dim, hd = c.head_dim(), kvd = c.kv_dim(), h = c.hidden_dim;
  const int group = c.n_heads / c.n_kv_heads;
  std::vector<float> x(static_cast<std::size_t>(n * d)), xn(x.size()), q(x.size()), att(x.size()), o(x.size());
  std::vector<float> k(static_cast<std::size_t>(n * kvd)), v(k.size());
  std::vector<float> g(static_cast<std::size_t>(n * h)), u(g.size());
  for (int t = 0; t < n; ++t)
    std::copy_n(&w.token_embedding[static_cast<std::size_t>(tokens[static_cast<std::size_t>(t)] * d)], d, &x[static_cast<std::size_t>(t * d)]);
  auto linear = [](const std::vector<float>& W, const float* in, float* out, int rows, int out_f, int in_f,
                   const std::vector<float>& bias) {
    ref::matmul(in, W.data(), out, rows, out_f, in_f);
    if (!bias.empty())
      for (int r = 0; r < rows; ++r)
        for (int i = 0; i < out_f; ++i) out[r * out_f + i] += bias[static_cast<std::size_t>(i)];
  };
  for (const LayerWeights& L : w.layers) {
    for (int t = 0; t < n; ++t) ref::rmsnorm(&xn[static_cast<std::size_t>(t * d)], &x[static_cast<std::size_t>(t * d)], L.attn_norm.data(), d, c.norm_eps);
    linear(L.wq, xn.data(), q.data(), n, d, d, L.bq);
    linear(L.wk, xn.data(), k.data(), n, kvd, d, L.bk);
    linear(L.wv, xn.data(), v.data(), n, kvd, d, L.bv);
    for (int t = 0; t < n; ++t) {
      ref::rope(&q[static_cast<std::size_t>(t * d)], c.n_heads, hd, t, c.rope_theta, c.rope_style);
      ref::rope(&k[static_cast<std::size_t>(t * kvd)], c.n_kv_heads, hd, t, c.rope_theta, c.rope_style);
    }
    for (int t = 0; t < n; ++t)
      for (int head = 0; head < c.n_heads; ++head) {
        const float* qh = &q[static_cast<std::size_t>(t * d + head * hd)];
        const int kvh = head / group;
        std::vector<float> s(static_cast<std::size_t>(t + 1));
        for (int j = 0; j <= t; ++j) {
          double dot = 0;
          for (int i = 0; i < hd; ++i) dot += static_cast<double>(qh[i]) * k[static_cast<std::size_t>(j * kvd + kvh * hd + i)];
          s[static_cast<std::size_t>(j)] = static_cast<float>(dot / std::sqrt(static_cast<double>(hd)));
        }
        ref::softmax(s.data(), t + 1);
        for (int i = 0; i < hd; ++i) {
          double acc = 0;
          for (int j = 0; j <= t; ++j) acc += static_cast<double>(s[static_cast<std::size_t>(j)]) * v[static_cast<std::size_t>(j * kvd + kvh * hd + i)];
          att[static_cast<std::size_t>(t * d + head * hd + i)] = static_cast<float>(acc);
        }
      }
    linear(L.wo, att.data(), o.data(), n, d, d, {});
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += o[i];
    for (int t = 0; t < n; ++t) ref::rmsnorm(&xn[static_cast<std::size_t>(t * d)], &x[static_cast<std::size_t>(t * d)], L.ffn_norm.data(), d, c.norm_eps);
    linear(L.w1, xn.data(), g.data(), n, h, d, {});
    linear(L.w3, xn.data(), u.data(), n, h, d, {});
    ref::swiglu(g.data(), u.data(), n * h);
    linear(L.w2, g.data(), o.data(), n, d, h, {});
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += o[i];
  }
  std::vector<float> logits(static_cast<std::size_t>(n * c.vocab_size));
  for (int t = 0; t < n; ++t) ref::rmsnorm(&xn[static_cast<std::size_t>(t * d)], &x[static_cast<std::size_t>(t * d)], w.final_norm.data(), d, c.norm_eps);
  ref::matmul(xn.data(), c.tied_classifier ? w.token_embedding.data() : w.classifier.data(), logits.data(), n,
              c.vocab_size, d);
  return logits;
}

TEST(Model, MatchesNaiveReferenceForwardOnEveryArchitectureOption) {
  ModelConfig c{.name = "tiny-gqa", .dim = 48, .hidden_dim = 72, .n_layers = 3, .n_heads = 6, .n_kv_heads = 2,
                .vocab_size = 97, .max_seq_len = 64};
  for (RopeStyle style : {RopeStyle::kInterleaved, RopeStyle::kHalf})
    for (bool extras : {false, true}) {  // extras: qkv bias, untied classifier, Llama-3 theta
      SCOPED_TRACE(std::string(style == RopeStyle::kHalf ? "half" : "interleaved") + (extras ? "+extras" : ""));
      c.rope_style = style;
      c.qkv_bias = extras;
      c.tied_classifier = !extras;
      c.rope_theta = extras ? 500000.0f : 10000.0f;
      const ModelWeights w = random_weights(c, 5);
      const std::vector<int> tokens = {1, 17, 42, 96, 0, 5, 5, 63, 88, 2, 30};
      const std::vector<float> want = reference_forward(w, tokens);
      CpuDevice device(2);
      FloatQuantization quant;
      Model model(w, quant, device);
      RefAttention attention;
      SequenceRunner runner(model, attention, 4);
      const std::vector<float> got = runner.feed_all_logits(tokens);
      ASSERT_EQ(got.size(), want.size());
      double scale = 0;
      for (float v : want) scale = std::max(scale, std::fabs(static_cast<double>(v)));
      EXPECT_GT(scale, 0.01);
      EXPECT_LT(max_abs_diff(got.data(), want.data(), got.size()), 1e-4 * std::max(1.0, scale));
    }
}

TEST(Model, RandomPresetGivesFiniteVariedLogits) {
  const ModelWeights w = random_weights(preset_config("stories15m"), 11);
  CpuDevice device(2);
  FloatQuantization quant;
  Model model(w, quant, device);
  RefAttention attention;
  SequenceRunner runner(model, attention);
  const std::vector<float> logits = runner.feed({1, 400, 9000, 31999});
  double s = 0, ss = 0;
  for (float v : logits) {
    ASSERT_TRUE(std::isfinite(v));
    s += v;
    ss += static_cast<double>(v) * v;
  }
  const double n = static_cast<double>(logits.size()), sd = std::sqrt(ss / n - (s / n) * (s / n));
  EXPECT_GT(sd, 0.05);  // not collapsed
  EXPECT_LT(sd, 10.0);  // not exploded
}

TEST(Model, RejectsBadTokensAndSlots) {
  ModelConfig c = preset_config("stories260k");
  c.n_layers = 1;
  const ModelWeights w = random_weights(c, 2);
  CpuDevice device(2);
  FloatQuantization quant;
  Model model(w, quant, device);
  RefAttention attention;
  KvStorage kv(device, c, 2, 16);
  const std::vector<int> table = {0};
  StepBatch batch;
  batch.add_sequence(std::vector<int>{512}, 0, table, 16, 0, 1);
  std::vector<float> logits;
  EXPECT_THROW(model.forward(batch, kv, attention, logits), Error);
  batch.tokens = {5};
  batch.slots = {32};
  EXPECT_THROW(model.forward(batch, kv, attention, logits), Error);
  batch.slots = {0};
  EXPECT_NO_THROW(model.forward(batch, kv, attention, logits));
  EXPECT_EQ(logits.size(), 512u);
}

}  // namespace
}  // namespace inferlab
