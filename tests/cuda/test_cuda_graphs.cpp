// Decode steps under CUDA graphs ([device] cuda_graphs = true) against the same steps run
// eagerly: the same logits (argmax identical, values within cuBLAS's batch-size-dependent
// rounding), graphs captured per bucket and replayed as contexts grow, recaptured after device
// memory is freed, and a step whose capture cannot work (an attention that downloads) run
// eagerly with the right logits. Skipped, with the reason, without a GPU or a CUDA 'flash'.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "inferlab/device/cuda_device.h"
#include "inferlab/model/model.h"
#include "inferlab/model/weights.h"
#include "inferlab/plugin/registry.h"
#include "model_fixtures.h"
#include "test_support.h"

namespace inferlab {
namespace {

std::shared_ptr<Attention> flash_on(const Registry& registry, Device& device, std::string& skip) {
  const PluginDescriptor& d = registry.find(PluginKind::kAttention, "flash");
  if (d.devices.count(DeviceKind::kCuda) == 0) {
    skip = "attention 'flash' has no CUDA path in this build";
    return nullptr;
  }
  return registry.create_attention("flash", registry.resolve(PluginKind::kAttention, "flash", {}, "test"), device);
}

// An attention that downloads a value inside its forward (as a strategy planning from device
// data would) while claiming it can be captured: the capture must fail cleanly.
class DownloadingAttention final : public Attention {
 public:
  explicit DownloadingAttention(std::shared_ptr<Attention> inner) : inner_(std::move(inner)) {}
  bool graph_capturable() const override { return true; }
  void forward(const AttentionBatch& batch, const KvLayerView& kv, const float* q, float* out,
               Device& device) override {
    int first = 0;
    device.copy_to_host(&first, batch.context_len.data(), sizeof(int));
    inner_->forward(batch, kv, q, out, device);
  }

 private:
  std::shared_ptr<Attention> inner_;
};

constexpr int kBlock = 16, kSeqs = 3, kBlocksPerSeq = 16;
const int kPrompt[kSeqs] = {20, 5, 33};

// Prefill of 3 sequences, then `steps` decode steps of `active` of them (sequence s owns blocks
// 16s .. 16s+15); the logits of every decode step's rows. The contexts cross block boundaries,
// so the block-table width bucket changes (1 -> 2 -> 4) and graphs are recaptured for it.
std::vector<float> run(Model& model, Attention& attention, int steps, int active, bool free_midway = false) {
  ComputeDevice& device = model.device();
  KvStorage kv(device, model.config(), kSeqs * kBlocksPerSeq, kBlock);
  const int vocab = model.config().vocab_size;
  std::vector<int> len(kPrompt, kPrompt + kSeqs);
  auto table = [](int s, int positions) {
    std::vector<int> t;
    for (int b = 0; b * kBlock < positions; ++b) t.push_back(kBlocksPerSeq * s + b);
    return t;
  };
  StepBatch prefill;
  for (int s = 0; s < kSeqs; ++s) {
    std::vector<int> prompt(static_cast<std::size_t>(len[s]));
    for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int>((31 * i + 7 * s + 1) % 250);
    prefill.add_sequence(prompt, 0, table(s, len[s]), kBlock, len[s] - 1, len[s]);
  }
  std::vector<float> logits, all;
  model.forward(prefill, kv, attention, logits);
  for (int step = 0; step < steps; ++step) {
    if (free_midway && step == steps / 2) {
      Buffer freed(device, 4096);  // allocated and freed: the epoch moves
    }
    StepBatch b;
    for (int s = 0; s < active; ++s) {
      b.add_sequence(std::vector<int>{(13 * step + 5 * s + 3) % 250}, len[s], table(s, len[s] + 1), kBlock, 0, 1);
      ++len[s];
    }
    model.forward(b, kv, attention, logits);
    all.insert(all.end(), logits.begin(), logits.begin() + static_cast<std::ptrdiff_t>(active) * vocab);
  }
  return all;
}

void expect_same_logits(const std::vector<float>& eager, const std::vector<float>& graphs, int vocab) {
  ASSERT_EQ(eager.size(), graphs.size());
  for (std::size_t r = 0; r * static_cast<std::size_t>(vocab) < eager.size(); ++r) {
    const auto e = eager.begin() + static_cast<std::ptrdiff_t>(r * vocab), g = graphs.begin() + static_cast<std::ptrdiff_t>(r * vocab);
    EXPECT_EQ(std::max_element(e, e + vocab) - e, std::max_element(g, g + vocab) - g) << "row " << r;
    for (int i = 0; i < vocab; ++i) ASSERT_NEAR(e[i], g[i], 1e-3f) << "row " << r << " logit " << i;
  }
}

struct Fixture {
  Registry registry{Registry::default_search_path()};
  ModelWeights weights = random_weights(preset_config("stories260k"), 11);
};

TEST(CudaGraphs, DecodeStepsReplayWithTheEagerLogits) {
  INFERLAB_REQUIRE_CUDA();
  Fixture f;
  for (int active : {1, 3}) {
    SCOPED_TRACE(std::to_string(active) + " sequences");
    auto eager_dev = make_device(DeviceKind::kCuda, 0);
    auto graph_dev = make_device(DeviceKind::kCuda, 0);
    std::string skip;
    auto eager_att = flash_on(f.registry, *eager_dev, skip);
    if (!eager_att) GTEST_SKIP() << skip;
    auto graph_att = flash_on(f.registry, *graph_dev, skip);
    compute_device(*graph_dev, "test").set_cuda_graphs(true);
    auto q1 = testing::none_quantization(*eager_dev), q2 = testing::none_quantization(*graph_dev);
    Model eager(f.weights, *q1, *eager_dev), graphs(f.weights, *q2, *graph_dev);
    const int steps = 40;
    const std::vector<float> want = run(eager, *eager_att, steps, active);
    const std::vector<float> got = run(graphs, *graph_att, steps, active);
    expect_same_logits(want, got, f.weights.config.vocab_size);
    const Model::ForwardStats st = graphs.forward_stats();
    // Widths 1 (a 5-token prompt), 2 and 4 at most: a few captures, the rest replays.
    EXPECT_GE(st.graph_captures, 1);
    EXPECT_LE(st.graph_captures, 3);
    EXPECT_GE(st.graph_replays, steps - 2 * st.graph_captures);
    EXPECT_EQ(eager.forward_stats().graph_replays, 0);
  }
}

TEST(CudaGraphs, FreedDeviceMemoryForcesARecapture) {
  INFERLAB_REQUIRE_CUDA();
  Fixture f;
  auto dev = make_device(DeviceKind::kCuda, 0);
  std::string skip;
  auto att = flash_on(f.registry, *dev, skip);
  if (!att) GTEST_SKIP() << skip;
  ComputeDevice& cd = compute_device(*dev, "test");
  cd.set_cuda_graphs(true);
  auto quant = testing::none_quantization(*dev);
  Model model(f.weights, *quant, *dev);
  const std::uint64_t epoch0 = cd.memory_epoch();
  { Buffer b(*dev, 1024); }
  EXPECT_EQ(cd.memory_epoch(), epoch0 + 1);
  // Short enough that the width stays 2 for sequence 0 (20 -> 28 tokens): one capture without
  // the free, two with it.
  run(model, *att, 8, 1, false);
  const long long once = model.forward_stats().graph_captures;
  run(model, *att, 8, 1, true);
  EXPECT_GT(model.forward_stats().graph_captures - once, once);
}

TEST(CudaGraphs, ACaptureThatWaitsForTheGpuRunsEagerly) {
  INFERLAB_REQUIRE_CUDA();
  Fixture f;
  auto eager_dev = make_device(DeviceKind::kCuda, 0), graph_dev = make_device(DeviceKind::kCuda, 0);
  std::string skip;
  auto eager_att = flash_on(f.registry, *eager_dev, skip);
  if (!eager_att) GTEST_SKIP() << skip;
  DownloadingAttention graph_att(flash_on(f.registry, *graph_dev, skip));
  compute_device(*graph_dev, "test").set_cuda_graphs(true);
  auto q1 = testing::none_quantization(*eager_dev), q2 = testing::none_quantization(*graph_dev);
  Model eager(f.weights, *q1, *eager_dev), graphs(f.weights, *q2, *graph_dev);
  const std::vector<float> want = run(eager, *eager_att, 6, 2);
  const std::vector<float> got = run(graphs, graph_att, 6, 2);
  expect_same_logits(want, got, f.weights.config.vocab_size);
  EXPECT_EQ(graphs.forward_stats().graph_captures, 0);
  EXPECT_EQ(graphs.forward_stats().graph_replays, 0);
}

}  // namespace
}  // namespace inferlab
