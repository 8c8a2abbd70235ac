// The device-independent half of decode-step CUDA graphs (inferlab/device/step_graph.h,
// padded_decode_step in inferlab/engine/batch.h): bucket and width choice, the GraphCache's
// warm / capture / replay decisions, its invalidation when device memory is freed or the model,
// KV pool, attention or fuse flag change (graphs destroyed, not leaked), and that a padded decode
// step computes the unpadded step's logits and leaves the KV cache as the unpadded step does —
// checked on the CPU model, which runs the same padded batch a graph replays. The capture and
// replay themselves are tests/cuda/test_cuda_graphs.cpp (skipped without a GPU).
#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "inferlab/device/caching_allocator.h"
#include "inferlab/device/step_graph.h"
#include "inferlab/engine/batch.h"
#include "inferlab/error.h"
#include "inferlab/model/model.h"
#include "inferlab/model/weights.h"
#include "inferlab/results/metrics.h"
#include "model_fixtures.h"

namespace inferlab {
namespace {

TEST(StepGraph, BatchBucketIsTheNextPowerOfTwoUpToTheCap) {
  EXPECT_EQ(graph_batch_bucket(0), 0);
  EXPECT_EQ(graph_batch_bucket(-3), 0);
  const int want[] = {1, 2, 4, 4, 8, 8, 8, 8, 16};
  for (int n = 1; n <= 9; ++n) EXPECT_EQ(graph_batch_bucket(n), want[n - 1]) << n;
  EXPECT_EQ(graph_batch_bucket(33), 64);
  EXPECT_EQ(graph_batch_bucket(64), 64);
  EXPECT_EQ(graph_batch_bucket(kMaxGraphBatch), kMaxGraphBatch);
  EXPECT_EQ(graph_batch_bucket(kMaxGraphBatch + 1), 0);  // beyond the cap: eager
  EXPECT_EQ(graph_batch_bucket(5, 4), 0);
  EXPECT_EQ(graph_batch_bucket(3, 4), 4);
}

TEST(StepGraph, BlockWidthDoublesSoAGrowingContextRecapturesRarely) {
  EXPECT_EQ(graph_block_width(0), 1);
  EXPECT_EQ(graph_block_width(1), 1);
  EXPECT_EQ(graph_block_width(2), 2);
  EXPECT_EQ(graph_block_width(3), 4);
  EXPECT_EQ(graph_block_width(17), 32);
  int widths = 0, last = 0;
  for (int blocks = 1; blocks <= 256; ++blocks)
    if (graph_block_width(blocks) != last) ++widths, last = graph_block_width(blocks);
  EXPECT_EQ(widths, 9);  // 1, 2, 4, ..., 256
}

// A graph that counts its replays and its destruction.
struct Counts {
  int replays = 0, destroyed = 0;
};
class FakeGraph final : public StepGraph {
 public:
  explicit FakeGraph(Counts& c) : c_(c) {}
  ~FakeGraph() override { ++c_.destroyed; }
  void replay() override { ++c_.replays; }

 private:
  Counts& c_;
};

int model_a, model_b, kv_a, kv_b, attention_a;
GraphKey key(int batch, const void* kv = &kv_a, const void* model = &model_a, bool fuse = false) {
  return GraphKey{model, kv, &attention_a, fuse, batch, 4};
}

using Action = GraphCache::Action;

TEST(StepGraph, CacheWarmsThenCapturesThenReplays) {
  Counts c;  // before the cache: the graphs count their destruction into it
  GraphCache cache;
  EXPECT_EQ(cache.plan(key(1), 7), Action::kWarm);
  EXPECT_EQ(cache.plan(key(1), 7), Action::kWarm);  // nothing recorded yet: still a warm-up
  cache.warmed(key(1), 7);
  EXPECT_EQ(cache.plan(key(1), 7), Action::kCapture);
  cache.captured(key(1), std::make_unique<FakeGraph>(c), 7);
  EXPECT_EQ(cache.captures(), 1);
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(cache.plan(key(1), 7), Action::kReplay);
    cache.replay(key(1)).replay();
  }
  EXPECT_EQ(c.replays, 3);
  EXPECT_EQ(cache.replays(), 3);
  EXPECT_EQ(cache.size(), 1u);
  // Another bucket is its own graph; the first stays.
  EXPECT_EQ(cache.plan(key(2), 7), Action::kWarm);
  EXPECT_EQ(cache.plan(key(1), 7), Action::kReplay);
  GraphKey wider = key(1);
  wider.block_width = 8;
  EXPECT_EQ(cache.plan(wider, 7), Action::kWarm);
  EXPECT_EQ(c.destroyed, 0);
  EXPECT_THROW(cache.replay(key(4)), Error);
  // A step that ends with a token choice (and one with another choice) is its own graph: it
  // writes token ids where the other wrote logits. The logits graph stays.
  GraphKey argmax = key(1), hot = key(1);
  argmax.choice = {TokenChoice::Kind::kArgmax, 0.0};
  hot.choice = {TokenChoice::Kind::kSample, 0.8};
  EXPECT_EQ(cache.plan(argmax, 7), Action::kWarm);
  cache.warmed(argmax, 7);
  EXPECT_EQ(cache.plan(argmax, 7), Action::kCapture);
  cache.captured(argmax, std::make_unique<FakeGraph>(c), 7);
  EXPECT_EQ(cache.plan(hot, 7), Action::kWarm);
  EXPECT_EQ(cache.plan(argmax, 7), Action::kReplay);
  EXPECT_EQ(cache.plan(key(1), 7), Action::kReplay);
  EXPECT_EQ(c.destroyed, 0);
}

TEST(StepGraph, CacheDropsGraphsWhenDeviceMemoryWasFreed) {
  Counts c;  // before the cache: the graphs count their destruction into it
  GraphCache cache;
  for (int b : {1, 2}) {
    cache.warmed(key(b), 3);
    cache.captured(key(b), std::make_unique<FakeGraph>(c), 3);
  }
  ASSERT_EQ(cache.size(), 2u);
  // A free since the capture (a scratch buffer grown by a larger eager step): every graph may
  // address the freed block, so all go, destroyed, and the bucket warms up again.
  EXPECT_EQ(cache.plan(key(1), 4), Action::kWarm);
  EXPECT_EQ(c.destroyed, 2);
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.invalidations(), 2);
  // A warm-up at an older epoch does not make a capture safe either.
  cache.warmed(key(1), 4);
  EXPECT_EQ(cache.plan(key(1), 5), Action::kWarm);
}

// ... and of a pool of another KV format at the same address (its captured KV writes and
// attention kernels are another dtype's).
TEST(StepGraph, CacheDropsGraphsOfAnotherModelPoolAttentionOrFuse) {
  Counts c;
  const GraphKey owners[] = {key(1, &kv_b), key(1, &kv_a, &model_b), key(1, &kv_a, &model_a, true),
                             GraphKey{&model_a, &kv_a, &kv_b /* another attention */, false, 1, 4},
                             GraphKey{&model_a, &kv_a, &attention_a, false, 1, 4, KvFormat(KvDtype::kF16)},
                             GraphKey{&model_a, &kv_a, &attention_a, false, 1, 4, KvFormat(KvDtype::kBf16)}};
  for (const GraphKey& other : owners) {
    GraphCache cache;
    const int before = c.destroyed;
    cache.warmed(key(1), 1);
    cache.captured(key(1), std::make_unique<FakeGraph>(c), 1);
    EXPECT_EQ(cache.plan(other, 1), Action::kWarm);
    EXPECT_EQ(c.destroyed, before + 1);
    EXPECT_EQ(cache.size(), 0u);
  }
}

TEST(StepGraph, FailedCaptureRunsEagerlyUntilMemoryChanges) {
  GraphCache cache;
  cache.warmed(key(8), 2);
  cache.captured(key(8), nullptr, 2);
  EXPECT_EQ(cache.captures(), 0);
  EXPECT_EQ(cache.plan(key(8), 2), Action::kEager);
  EXPECT_EQ(cache.plan(key(8), 2), Action::kEager);
  EXPECT_EQ(cache.plan(key(8), 3), Action::kWarm);  // memory changed: worth another try
}

TEST(StepGraph, ClearDestroysEveryGraph) {
  Counts c;
  {
    GraphCache cache;
    cache.captured(key(1), std::make_unique<FakeGraph>(c), 0);
    cache.captured(key(2), std::make_unique<FakeGraph>(c), 0);
    cache.clear();
    EXPECT_EQ(c.destroyed, 2);
    cache.captured(key(4), std::make_unique<FakeGraph>(c), 0);
  }
  EXPECT_EQ(c.destroyed, 3);  // and the cache's destructor the rest
}

// The memory epoch the CUDA device reports is its pool's count of frees.
TEST(StepGraph, PoolCountsFreesAsTheMemoryEpoch) {
  std::vector<std::unique_ptr<char[]>> blocks;
  CachingAllocator pool([&](std::size_t n) { return (blocks.emplace_back(new char[n]), blocks.back().get()); },
                        [](void*) {});
  void* a = pool.allocate(100);
  void* b = pool.allocate(5000);
  EXPECT_EQ(pool.stats().frees, 0u);
  pool.deallocate(a);
  EXPECT_EQ(pool.stats().frees, 1u);
  EXPECT_FALSE(pool.deallocate(a));  // not handed out: no free
  EXPECT_EQ(pool.stats().frees, 1u);
  pool.deallocate(b);
  EXPECT_EQ(pool.stats().frees, 2u);
}

// Three sequences of 5, 2 and 7 tokens in blocks of 4 (sequence s owns blocks 4s .. 4s+3).
constexpr int kBlock = 4;
std::vector<int> table(int s) { return {4 * s, 4 * s + 1, 4 * s + 2, 4 * s + 3}; }
const int kLens[] = {5, 2, 7};

StepBatch decode_step(int step) {
  StepBatch b;
  for (int s = 0; s < 3; ++s) {
    const int pos = kLens[s] + step;
    const std::vector<int> t = table(s);
    b.add_sequence(std::vector<int>{(11 * s + 3 * step + 1) % 200}, pos, std::span<const int>(t.data(), pos / kBlock + 1),
                   kBlock, 0, 1);
  }
  return b;
}

TEST(StepGraph, DecodeStepDetection) {
  EXPECT_TRUE(is_decode_step(decode_step(0)));
  EXPECT_FALSE(is_decode_step(StepBatch{}));
  StepBatch prefill;
  const std::vector<int> t = table(0);
  prefill.add_sequence(std::vector<int>{1, 2}, 0, t, kBlock, 1, 2);
  EXPECT_FALSE(is_decode_step(prefill));  // two rows of one sequence
  StepBatch no_logits;
  no_logits.add_sequence(std::vector<int>{1}, 0, t, kBlock, 0, 0);
  EXPECT_FALSE(is_decode_step(no_logits));
  EXPECT_THROW(padded_decode_step(prefill, 4, 4), Error);
  EXPECT_THROW(padded_decode_step(decode_step(0), 2, 4), Error);  // 3 sequences do not fit 2
  EXPECT_THROW(padded_decode_step(decode_step(0), 4, 1), Error);  // 2 columns do not fit 1
}

TEST(StepGraph, PaddedStepRepeatsSequenceZeroAndWidensTheTable) {
  const StepBatch b = decode_step(0);
  const StepBatch p = padded_decode_step(b, 4, 4);
  ASSERT_EQ(p.rows(), 4);
  ASSERT_EQ(p.n_seqs(), 4);
  EXPECT_TRUE(is_decode_step(p));
  for (int s = 0; s < 3; ++s) {
    EXPECT_EQ(p.tokens[s], b.tokens[s]);
    EXPECT_EQ(p.slots[s], b.slots[s]);
    EXPECT_EQ(p.context_len[s], b.context_len[s]);
  }
  EXPECT_EQ(p.tokens[3], b.tokens[0]);
  EXPECT_EQ(p.positions[3], b.positions[0]);
  EXPECT_EQ(p.slots[3], b.slots[0]);
  EXPECT_EQ(p.context_len[3], b.context_len[0]);
  EXPECT_EQ(p.max_blocks, 4);
  const std::vector<int> row1 = {4, -1, -1, -1}, row3 = {0, 1, -1, -1};
  EXPECT_EQ(std::vector<int>(p.block_table.begin() + 4, p.block_table.begin() + 8), row1);
  EXPECT_EQ(std::vector<int>(p.block_table.begin() + 12, p.block_table.end()), row3);
}

// The CPU model runs prefill, then decode steps either as they are or padded as a graph replays
// them (4 sequences, 8 columns; the padded logits' extra row dropped). Same logits at every
// step: the padding computed nothing that reached the real rows or their K/V.
TEST(StepGraph, PaddedDecodeStepsGiveTheUnpaddedLogitsOnTheCpuModel) {
  const ModelWeights w = random_weights(preset_config("stories260k"), 3);
  const int vocab = w.config.vocab_size;
  auto run = [&](bool padded) {
    CpuDevice device(1);
    testing::FloatQuantization quant;
    Model model(w, quant, device);
    testing::RefAttention attention;
    KvStorage kv(device, w.config, 12, kBlock);
    StepBatch prefill;
    for (int s = 0; s < 3; ++s) {
      std::vector<int> prompt(static_cast<std::size_t>(kLens[s]));
      for (std::size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int>((7 * i + 13 * s + 2) % 200);
      const std::vector<int> t = table(s);
      prefill.add_sequence(prompt, 0, t, kBlock, kLens[s] - 1, kLens[s]);
    }
    std::vector<float> logits, all;
    model.forward(prefill, kv, attention, logits);
    for (int step = 0; step < 3; ++step) {
      const StepBatch b = decode_step(step);
      model.forward(padded ? padded_decode_step(b, 4, 8) : b, kv, attention, logits);
      all.insert(all.end(), logits.begin(), logits.begin() + 3 * vocab);
    }
    EXPECT_EQ(model.forward_stats().forwards, 4);
    EXPECT_GT(model.forward_stats().host_s, 0.0);
    EXPECT_EQ(model.forward_stats().graph_replays, 0);  // no graphs on the CPU
    return all;
  };
  const std::vector<float> plain = run(false), padded = run(true);
  ASSERT_EQ(plain.size(), padded.size());
  for (std::size_t i = 0; i < plain.size(); ++i) ASSERT_FLOAT_EQ(plain[i], padded[i]) << "logit " << i;
}

// The run's forward counters reach the metrics row: host ms per forward, captures, replays.
TEST(StepGraph, MetricsCarryGraphCountersAndHostTime) {
  RunTimeline run;
  run.forwards = 4;
  run.forward_host_s = 0.02;
  run.graph_captures = 3;
  run.graph_replays = 57;
  double host_ms = -1, captures = -1, replays = -1;
  for (const auto& [name, value] : compute_metrics(run, SloSpec{})) {
    if (name == "step_host_ms_mean") host_ms = value;
    if (name == "graph_captures") captures = value;
    if (name == "graph_replays") replays = value;
  }
  EXPECT_DOUBLE_EQ(host_ms, 5.0);
  EXPECT_EQ(captures, 3);
  EXPECT_EQ(replays, 57);
  for (const char* n : {"step_host_ms_mean", "graph_captures", "graph_replays"}) {
    const auto names = metric_names();
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  }
}

TEST(StepGraph, CpuDeviceRefusesGraphs) {
  CpuDevice device(1);
  EXPECT_FALSE(device.cuda_graphs());
  try {
    device.set_cuda_graphs(true);
    FAIL() << "set_cuda_graphs(true) accepted on the CPU";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cuda_graphs is cuda-only"), std::string::npos) << e.what();
  }
  device.set_cuda_graphs(false);
  EXPECT_THROW(device.begin_capture(), Error);
  EXPECT_EQ(device.memory_epoch(), 0u);
}

}  // namespace
}  // namespace inferlab
