// The whole model on the CUDA device against the CPU: stories260K greedy from BOS gives the
// CPU's tokens exactly; SmolLM2-135M's next-token distributions agree to KL(CPU || CUDA) < 1e-4
// over a prompt (and at SmolLM2's shapes with random weights, which needs no file). Attention comes from the registry's 'naive' plugin, which must list cuda;
// skipped (with the reason) without a GPU, without the models, or without a CUDA attention.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "inferlab/formats/checkpoint.h"
#include "inferlab/formats/formats.h"
#include "inferlab/model/model.h"
#include "inferlab/plugin/registry.h"
#include "inferlab/run/runner.h"
#include "model_fixtures.h"
#include "plugins/common/quantization/float_linear.h"
#include "test_support.h"

namespace inferlab {
namespace {

// The registry's naive attention on `device`, or a skip reason.
std::shared_ptr<Attention> cuda_attention(const Registry& registry, Device& device, std::string& skip) {
  const PluginDescriptor& d = registry.find(PluginKind::kAttention, "naive");
  if (d.devices.count(DeviceKind::kCuda) == 0) {
    skip = "attention 'naive' has no CUDA path in this build";
    return nullptr;
  }
  return registry.create_attention("naive", registry.resolve(PluginKind::kAttention, "naive", {}, "test"), device);
}

// max over rows of KL(softmax(p) || softmax(q)), rows of `vocab` logits, in double.
double max_next_token_kl(const std::vector<float>& p_logits, const std::vector<float>& q_logits, int vocab) {
  auto log_softmax = [vocab](const float* z) {
    const double m = *std::max_element(z, z + vocab);
    double s = 0;
    for (int i = 0; i < vocab; ++i) s += std::exp(z[i] - m);
    std::vector<double> out(static_cast<std::size_t>(vocab));
    for (int i = 0; i < vocab; ++i) out[static_cast<std::size_t>(i)] = z[i] - m - std::log(s);
    return out;
  };
  double worst = 0;
  for (std::size_t r = 0; r * vocab < p_logits.size(); ++r) {
    const auto lp = log_softmax(&p_logits[r * vocab]), lq = log_softmax(&q_logits[r * vocab]);
    double kl = 0;
    for (std::size_t i = 0; i < lp.size(); ++i) kl += std::exp(lp[i]) * (lp[i] - lq[i]);
    worst = std::max(worst, kl);
  }
  return worst;
}

TEST(CudaModel, Stories260kGreedyEqualsCpuTokens) {
  INFERLAB_REQUIRE_CUDA();
  const std::string path = testing::data_path("models/stories260K/stories260K.bin");
  INFERLAB_REQUIRE_FILE(path);
  const LoadedModel loaded = load_model(path);
  Registry registry(Registry::default_search_path());  // INFERLAB_PLUGIN_PATH, else beside the core (a packed build)
  auto gpu = make_device(DeviceKind::kCuda, 0);
  std::string skip;
  auto gpu_attention = cuda_attention(registry, *gpu, skip);
  if (!gpu_attention) GTEST_SKIP() << skip;

  CpuDevice cpu(2);
  testing::FloatQuantization cpu_quant;
  Model cpu_model(loaded.weights, cpu_quant, cpu);
  testing::RefAttention ref_attention;
  const std::vector<int> want = testing::generate_greedy(cpu_model, ref_attention, 1, 256);

  const auto gpu_quant = testing::none_quantization(*gpu);
  Model gpu_model(loaded.weights, *gpu_quant, *gpu);
  const std::vector<int> got = testing::generate_greedy(gpu_model, *gpu_attention, 1, 256);
  ASSERT_EQ(want.size(), 256u);
  EXPECT_EQ(got, want);
}

TEST(CudaModel, SmolLM2NextTokenKlAgainstCpuBelow1e4) {
  INFERLAB_REQUIRE_CUDA();
  const std::string path = testing::smollm2_path();
  INFERLAB_REQUIRE_FILE(path);
  Registry registry(Registry::default_search_path());  // INFERLAB_PLUGIN_PATH, else beside the core (a packed build)
  auto gpu = make_device(DeviceKind::kCuda, 0);
  std::string skip;
  auto gpu_attention = cuda_attention(registry, *gpu, skip);
  if (!gpu_attention) GTEST_SKIP() << skip;
  LoadedModel m = load_gguf(path);
  const std::vector<int> prompt =
      m.tokenizer->encode("The quick brown fox jumps over the lazy dog. Once upon a time, in a small village,", false);
  const int vocab = m.weights.config.vocab_size;

  CpuDevice cpu(2);
  testing::FloatQuantization cpu_quant;
  Model cpu_model(m.weights, cpu_quant, cpu);
  testing::RefAttention ref_attention;
  testing::SequenceRunner cpu_run(cpu_model, ref_attention, 16, 8);
  const std::vector<float> p_logits = cpu_run.feed_all_logits(prompt);

  const auto gpu_quant = testing::none_quantization(*gpu);
  Model gpu_model(m.weights, *gpu_quant, *gpu);
  testing::SequenceRunner gpu_run(gpu_model, *gpu_attention, 16, 8);
  const std::vector<float> q_logits = gpu_run.feed_all_logits(prompt);
  ASSERT_EQ(p_logits.size(), q_logits.size());

  const double worst = max_next_token_kl(p_logits, q_logits, vocab);
  RecordProperty("max_kl", std::to_string(worst));
  EXPECT_LT(worst, 1e-4);
}

// SmolLM2-135M's shapes (GQA 9/3 heads, half-style RoPE, 49152-word tied classifier) with seeded
// random weights and 4 layers, and a 40-token prompt spread over its vocabulary.
ModelWeights smollm2_shaped_weights() {
  ModelSpec spec;
  spec.preset = "smollm2-135m";
  spec.n_layers = 4;
  spec.seed = 7;
  return load_experiment_model(spec).weights;
}
std::vector<int> spread_prompt(int vocab) {
  std::vector<int> prompt(40);
  for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int>((i * 7919 + 13) % static_cast<std::size_t>(vocab));
  return prompt;
}

// The same check at SmolLM2-135M's shapes (GQA 9/3 heads, half-style RoPE, 49152-word tied
// classifier) with seeded random weights and 4 layers: needs no model file, so it also runs where
// the GGUF is not carried (the GPU machine of scripts/gpu_check.sh).
TEST(CudaModel, Smollm2ShapedRandomWeightsKlAgainstCpuBelow1e4) {
  INFERLAB_REQUIRE_CUDA();
  Registry registry(Registry::default_search_path());
  auto gpu = make_device(DeviceKind::kCuda, 0);
  std::string skip;
  auto gpu_attention = cuda_attention(registry, *gpu, skip);
  if (!gpu_attention) GTEST_SKIP() << skip;
  const ModelWeights weights = smollm2_shaped_weights();
  const int vocab = weights.config.vocab_size;
  const std::vector<int> prompt = spread_prompt(vocab);

  CpuDevice cpu(2);
  testing::FloatQuantization cpu_quant;
  Model cpu_model(weights, cpu_quant, cpu);
  testing::RefAttention ref_attention;
  testing::SequenceRunner cpu_run(cpu_model, ref_attention, 16, 8);
  const std::vector<float> p_logits = cpu_run.feed_all_logits(prompt);

  const auto gpu_quant = testing::none_quantization(*gpu);
  Model gpu_model(weights, *gpu_quant, *gpu);
  testing::SequenceRunner gpu_run(gpu_model, *gpu_attention, 16, 8);
  const std::vector<float> q_logits = gpu_run.feed_all_logits(prompt);
  ASSERT_EQ(p_logits.size(), q_logits.size());
  const double worst = max_next_token_kl(p_logits, q_logits, vocab);
  RecordProperty("max_kl", std::to_string(worst));
  EXPECT_LT(worst, 1e-4);
}

// f16 / bf16 KV on the GPU (written by kv_write_half, read natively by each CUDA attention)
// against the same format on the CPU (kv_quantize_row, the CPU naive plugin reading the widened
// values through k_row / v_row): next-token KL < 1e-4 at SmolLM2's shapes, as f32 KV. Each attention's logits also
// stay within KL 1e-3 of the f32-KV GPU run (the format's own cost, small at 4 layers).
TEST(CudaModel, HalfKvCacheKlAgainstCpuBelow1e4ForEveryCudaAttention) {
  INFERLAB_REQUIRE_CUDA();
  Registry registry(Registry::default_search_path());
  auto gpu = make_device(DeviceKind::kCuda, 0);
  const ModelWeights weights = smollm2_shaped_weights();
  const int vocab = weights.config.vocab_size;
  const std::vector<int> prompt = spread_prompt(vocab);
  CpuDevice cpu(2);
  testing::FloatQuantization cpu_quant;
  Model cpu_model(weights, cpu_quant, cpu);
  auto cpu_attention = registry.create_attention("naive", registry.resolve(PluginKind::kAttention, "naive", {}, "test"), cpu);
  const auto gpu_quant = testing::none_quantization(*gpu);
  Model gpu_model(weights, *gpu_quant, *gpu);
  for (const char* name : {"naive", "flash", "split_k"}) {
    auto attention = registry.create_attention(name, registry.resolve(PluginKind::kAttention, name, {}, "test"), *gpu);
    testing::SequenceRunner f32_run(gpu_model, *attention, 16, 8);
    std::vector<float> f32_logits = f32_run.feed_all_logits(prompt);
    for (int t : {5, 99}) {  // two decode steps after the prefill
      const std::vector<float>& l = f32_run.feed({t});
      f32_logits.insert(f32_logits.end(), l.begin(), l.end());
    }
    for (KvDtype dtype : {KvDtype::kF16, KvDtype::kBf16}) {
      SCOPED_TRACE(std::string(name) + ", " + kv_dtype_name(dtype) + " KV");
      testing::SequenceRunner cpu_run(cpu_model, *cpu_attention, 16, 8, KvFormat(dtype));
      testing::SequenceRunner gpu_run(gpu_model, *attention, 16, 8, KvFormat(dtype));
      std::vector<float> p = cpu_run.feed_all_logits(prompt), q = gpu_run.feed_all_logits(prompt);
      for (int t : {5, 99}) {
        const std::vector<float>& lp = cpu_run.feed({t});
        p.insert(p.end(), lp.begin(), lp.end());
        const std::vector<float>& lq = gpu_run.feed({t});
        q.insert(q.end(), lq.begin(), lq.end());
      }
      ASSERT_EQ(p.size(), q.size());
      EXPECT_LT(max_next_token_kl(p, q, vocab), 1e-4);
      EXPECT_LT(max_next_token_kl(f32_logits, q, vocab), 1e-3);
    }
  }
}

}  // namespace
}  // namespace inferlab
