// The model's fused path ([device] fuse = true, Device::set_fuse) against the unfused one, and
// the tied embedding read from the classifier's rows (stored once). Both must leave results
// unchanged: logits bit for bit, greedy tokens equal.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "inferlab/error.h"
#include "inferlab/model/model.h"
#include "inferlab/model/weights.h"
#include "inferlab/plugin/registry.h"
#include "model_fixtures.h"
#include "test_support.h"
#include "plugins/common/quantization/int4_linear.h"

namespace inferlab {
namespace {

using testing::FloatQuantization;
using testing::RefAttention;
using testing::SequenceRunner;

// int4 groups of 32 with int8 activation blocks (W4A8): the linears that take the fused
// RMSNorm/SwiGLU quantisation (Linear::reads_act_blocks).
class Int4ActQuantization final : public Quantization {
 public:
  using Quantization::make_linear;
  std::unique_ptr<Linear> make_linear(const std::string&, std::vector<float> weight, int out, int in) override {
    auto linear = std::make_unique<Int4Linear>(weight, out, in, 32, false);
    linear->set_activations(Int4Activations::kInt8);
    return linear;
  }
};

// Logits of a 150-token prefill (enough rows that the elementwise ops split over the pool), then
// 6 single-token decode steps, each appended.
std::vector<float> run(Model& model, const KvFormat& format = {}, Attention* reader = nullptr) {
  RefAttention ref;  // reads f32 KV only
  Attention& attention = reader != nullptr ? *reader : ref;
  SequenceRunner runner(model, attention, 16, 0, format);
  std::vector<int> prompt(150);
  for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int>((37 * i + 5) % 500);
  std::vector<float> all = runner.feed_all_logits(prompt);
  for (int t : {3, 17, 60, 2, 11, 250}) {
    const std::vector<float>& l = runner.feed({t});
    all.insert(all.end(), l.begin(), l.end());
  }
  return all;
}

void expect_same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i)
    ASSERT_EQ(std::memcmp(&a[i], &b[i], sizeof(float)), 0) << "logit " << i << ": " << a[i] << " vs " << b[i];
}

// Counts the pool's dispatches of one whole run: the fused path must issue fewer (that is its
// point), with the same logits.
TEST(ModelFuse, FusedForwardGivesTheUnfusedLogitsWithFewerDispatches) {
  ModelConfig c = preset_config("stories260k");
  c.qkv_bias = true;  // the bias adds sit between the linears and the fused RoPE + KV write
  const ModelWeights w = random_weights(c, 5);
  FloatQuantization f32;
  Int4ActQuantization w4a8;
  for (Quantization* quant : std::initializer_list<Quantization*>{&f32, &w4a8})
    for (int threads : {1, 2}) {
      SCOPED_TRACE(std::string(quant == &f32 ? "fp32" : "int4 + int8 activations") + ", " + std::to_string(threads) +
                   " threads");
      CpuDevice device(threads);
      device.set_fuse(false);  // a CPU device starts fused
      Model model(w, *quant, device);
      const std::uint64_t d0 = device.pool().dispatches();
      const std::vector<float> unfused = run(model);
      const std::uint64_t d1 = device.pool().dispatches();
      device.set_fuse(true);
      const std::vector<float> fused = run(model);
      const std::uint64_t d2 = device.pool().dispatches();
      expect_same_bits(fused, unfused);
      if (threads > 1) {
        EXPECT_LT(d2 - d1, d1 - d0) << "the fused run dispatched as often as the unfused one";
      }
    }
}

// f16 / bf16 KV: the fused RoPE + KV write (ComputeDevice::rope_kv_write_half; on the CPU rope
// then kv_write_half) stores what the unfused path stores, and the logits really depend on the
// format: they move from the f32-KV ones, by less than int8 per token-head moves them.
TEST(ModelFuse, HalfKvGivesTheUnfusedLogitsFused) {
  ModelConfig c = preset_config("stories260k");
  const ModelWeights w = random_weights(c, 5);
  FloatQuantization f32;
  CpuDevice device(2);
  Model model(w, f32, device);
  Registry registry({testing::plugin_dir()});
  auto naive = registry.create_attention("naive", registry.resolve(PluginKind::kAttention, "naive", {}, "t"), device);
  const auto max_diff = [](const std::vector<float>& a, const std::vector<float>& b) {
    double m = 0;
    for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
    return m;
  };
  const std::vector<float> f32_kv = run(model, {}, naive.get());
  KvFormat int8(KvDtype::kInt8);
  int8.group_size = 0;
  const double int8_moved = max_diff(run(model, int8, naive.get()), f32_kv);
  for (KvDtype dtype : {KvDtype::kF16, KvDtype::kBf16}) {
    SCOPED_TRACE(kv_dtype_name(dtype));
    device.set_fuse(false);
    const std::vector<float> unfused = run(model, KvFormat(dtype), naive.get());
    device.set_fuse(true);
    const std::vector<float> fused = run(model, KvFormat(dtype), naive.get());
    expect_same_bits(fused, unfused);
    const double moved = max_diff(fused, f32_kv);
    EXPECT_GT(moved, 0.0);
    EXPECT_LT(moved, int8_moved);
  }
}

// A tied classifier is the embedding: the model stores no table of its own and looks tokens up
// in the classifier's rows. An untied model stores its table once too, as a linear of the same
// quantization (the lookup dequantises rows): given exactly the rows the tied model reads, fp32
// gives the same bits; int4 re-quantises those rows (codes may move by one step), so the logits
// agree closely; the untied model is larger by the table's quantised bytes, not by an fp32 copy.
TEST(ModelFuse, TiedEmbeddingReadsTheClassifierRows) {
  const ModelConfig c = preset_config("stories260k");
  ASSERT_TRUE(c.tied_classifier);
  const ModelWeights tied = random_weights(c, 6);
  FloatQuantization f32;
  Int4ActQuantization w4a8;
  for (Quantization* quant : std::initializer_list<Quantization*>{&f32, &w4a8}) {
    SCOPED_TRACE(quant == &f32 ? "fp32" : "int4");
    ModelWeights untied = tied;
    untied.config.tied_classifier = false;
    untied.classifier = tied.token_embedding;
    // The table the tied model reads: the classifier's stored rows, dequantised.
    const std::unique_ptr<Linear> classifier = quant->make_linear("classifier", tied.token_embedding, c.vocab_size, c.dim);
    for (int t = 0; t < c.vocab_size; ++t)
      classifier->dequantize_row(t, untied.token_embedding.data() + static_cast<std::size_t>(t) * c.dim);
    CpuDevice device(2);
    Model a(tied, *quant, device), b(untied, *quant, device);
    const std::vector<float> la = run(a), lb = run(b);
    if (quant == &f32) {
      expect_same_bits(la, lb);
    } else {
      ASSERT_EQ(la.size(), lb.size());
      double worst = 0;
      for (std::size_t i = 0; i < la.size(); ++i) worst = std::max(worst, std::fabs(double{la[i]} - lb[i]));
      EXPECT_LT(worst, 0.05);
    }
    EXPECT_EQ(b.embedding_bytes(), classifier->weight_bytes());
    EXPECT_EQ(b.weight_bytes() - a.weight_bytes(), classifier->weight_bytes());
    EXPECT_EQ(a.embedding_bytes(), 0u);
  }
}

// The compute devices (CPU here; CUDA in tests/cuda/test_cuda_fused.cpp) take fuse; a simulated
// device has no ops to fuse.
TEST(ModelFuse, FuseNeedsADeviceThatRunsOps) {
  CpuDevice cpu(1);
  EXPECT_TRUE(cpu.fuse()) << "a CPU device runs the fused ops unless told otherwise";
  cpu.set_fuse(false);
  EXPECT_FALSE(cpu.fuse());
  cpu.set_fuse(true);
  EXPECT_TRUE(cpu.fuse());
  // A simulated device runs no ops at all, fused or not: asking for them names who asked.
  std::unique_ptr<Device> sim = make_device(DeviceKind::kSim, 0);
  try {
    compute_device(*sim, "[device] fuse");
    ADD_FAILURE() << "a simulated device has no ops";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[device] fuse runs the model's ops, which device 'sim' has none of"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace inferlab
