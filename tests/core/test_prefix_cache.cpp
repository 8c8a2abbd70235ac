// Prefix caching: the KV cache's hash-chained block index (publish, acquire, eviction) and the
// engine using it — cached prefixes must never change tokens, only skip work.
#include <numeric>

#include <gtest/gtest.h>

#include "inferlab/engine/engine.h"
#include "inferlab/kv/kv_cache.h"
#include "kv_fixtures.h"
#include "inferlab/plugin/registry.h"
#include "inferlab/workload/workload.h"
#include "test_support.h"

namespace inferlab {
namespace {

ModelConfig tiny_model() {
  ModelConfig m = preset_config("stories260k");
  m.n_layers = 1;
  return m;
}

KvCacheConfig caching(int blocks, int block_size = 4) {
  KvCacheConfig c;
  c.block_size = block_size;
  c.num_blocks = blocks;
  c.prefix_caching = true;
  return c;
}

std::vector<int> seq_tokens(int n, int first = 10) {
  std::vector<int> t(static_cast<std::size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

// Writes a recognisable value into every slot of seq's first `n` positions (layer 0, K).
void fill(testing::PagedKv& kv, int seq, int n, float value) {
  for (int p = 0; p < n; ++p) kv.k_slot(0, kv.slot(seq, p))[0] = value + static_cast<float>(p);
}

TEST(PrefixCache, PublishedFullBlocksAreFoundAgain) {
  testing::PagedKv kv(tiny_model(), caching(16));
  auto tokens = seq_tokens(10);  // 2 full blocks of 4 + 2 tokens
  ASSERT_TRUE(kv.reserve(1, 10));
  fill(kv, 1, 10, 100.0f);
  kv.set_length(1, 10);
  kv.publish_prefix(1, tokens);

  EXPECT_EQ(kv.acquire_prefix(2, tokens, 9), 8);  // only full blocks, within the limit
  EXPECT_EQ(kv.block_table(2)[0], kv.block_table(1)[0]);
  EXPECT_EQ(kv.block_table(2)[1], kv.block_table(1)[1]);
  EXPECT_EQ(kv.length(2), 8);
  EXPECT_EQ(kv.layer(0).k_at(kv.slot(2, 5), 0)[0], 105.0f);  // the publisher's K/V
  EXPECT_EQ(kv.acquire_prefix(3, tokens, 7), 4);            // the limit cuts the second block
  auto other = tokens;
  other[5] = 999;  // differs inside block 1
  EXPECT_EQ(kv.acquire_prefix(4, other, 10), 4);
  other[0] = 999;  // differs in block 0: the chain breaks at once
  EXPECT_EQ(kv.acquire_prefix(5, other, 10), 0);
  EXPECT_FALSE(kv.has(5));
}

TEST(PrefixCache, FreedBlocksStayCachedUntilThePoolNeedsThem) {
  testing::PagedKv kv(tiny_model(), caching(4));
  auto a = seq_tokens(8);
  ASSERT_TRUE(kv.reserve(1, 8));
  kv.set_length(1, 8);
  kv.publish_prefix(1, a);
  kv.free(1);
  KvStats s = kv.stats();
  EXPECT_EQ(s.blocks_cached, 2);
  EXPECT_EQ(s.blocks_free, 4);  // cached blocks still count as allocatable
  EXPECT_EQ(s.blocks_reserved, 0);

  EXPECT_EQ(kv.acquire_prefix(2, a, 8), 8);  // a hit takes them out of the evictable list
  EXPECT_EQ(kv.stats().blocks_cached, 0);
  EXPECT_EQ(kv.stats().blocks_free, 2);
  kv.free(2);

  // A new sequence needing the whole pool evicts the cached blocks (oldest first).
  ASSERT_TRUE(kv.reserve(3, 16));
  EXPECT_EQ(kv.stats().blocks_cached, 0);
  EXPECT_EQ(kv.stats().blocks_free, 0);
  kv.free(3);
  EXPECT_EQ(kv.acquire_prefix(4, a, 8), 0);  // evicted: no longer found
}

TEST(PrefixCache, EvictsLeastRecentlyReleasedFirst) {
  testing::PagedKv kv(tiny_model(), caching(3));
  auto a = seq_tokens(4, 10), b = seq_tokens(4, 50);
  ASSERT_TRUE(kv.reserve(1, 4));
  kv.set_length(1, 4);
  kv.publish_prefix(1, a);
  ASSERT_TRUE(kv.reserve(2, 4));
  kv.set_length(2, 4);
  kv.publish_prefix(2, b);
  kv.free(1);  // a released first
  kv.free(2);
  ASSERT_TRUE(kv.reserve(3, 8));  // 1 free block + 1 eviction
  EXPECT_EQ(kv.acquire_prefix(4, a, 4), 0);
  EXPECT_EQ(kv.acquire_prefix(5, b, 4), 4);
}

TEST(PrefixCache, DisabledIsANoOp) {
  KvCacheConfig c = caching(8);
  c.prefix_caching = false;
  testing::PagedKv kv(tiny_model(), c);
  auto t = seq_tokens(8);
  ASSERT_TRUE(kv.reserve(1, 8));
  kv.set_length(1, 8);
  kv.publish_prefix(1, t);
  kv.free(1);
  EXPECT_EQ(kv.stats().blocks_cached, 0);
  EXPECT_EQ(kv.acquire_prefix(2, t, 8), 0);
}

TEST(PrefixCache, GrowingPastASharedPrefixAllocatesOnlyNewBlocks) {
  testing::PagedKv kv(tiny_model(), caching(16));
  auto t = seq_tokens(8);
  ASSERT_TRUE(kv.reserve(1, 8));
  fill(kv, 1, 8, 0.0f);
  kv.set_length(1, 8);
  kv.publish_prefix(1, t);
  ASSERT_EQ(kv.acquire_prefix(2, t, 8), 8);
  const int free_before = kv.stats().blocks_free;
  EXPECT_EQ(kv.blocks_needed(2, 12), 1);  // the shared full blocks are not copied
  ASSERT_TRUE(kv.reserve(2, 12));
  EXPECT_EQ(kv.stats().blocks_free, free_before - 1);
  EXPECT_EQ(kv.block_table(2)[0], kv.block_table(1)[0]);
  EXPECT_EQ(kv.block_table(2)[1], kv.block_table(1)[1]);
  for (int pos = 8; pos < 12; ++pos) kv.k_slot(0, kv.slot(2, pos))[0] = 500.0f;  // seq 2's own block
  kv.set_length(2, 12);
  EXPECT_EQ(kv.layer(0).k_at(kv.slot(1, 7), 0)[0], 7.0f);  // the shared prefix is untouched
  kv.truncate(2, 8, false);  // a rollback inside its own block releases only that block
  EXPECT_EQ(kv.stats().blocks_free, free_before);
}

struct EngineRun {
  RunResult result;
  long long prefill_tokens = 0;
};

EngineRun run_engine(const std::vector<Request>& reqs, bool prefix, int num_blocks, const std::string& decoding) {
  static Registry reg({testing::plugin_dir()});
  static ModelWeights w = random_weights(preset_config("stories260k"), 9);
  CpuDevice device(2);
  auto a = reg.create_attention("flash", reg.resolve(PluginKind::kAttention, "flash", {}, "t"), device);
  auto q = reg.create_quantization("none", reg.resolve(PluginKind::kQuantization, "none", {}, "t"), device);
  auto s = reg.create_scheduler("continuous", reg.resolve(PluginKind::kScheduling, "continuous",
                                                          {{"max_tokens", std::int64_t{64}}}, "t"), device);
  auto d = reg.create_decoder(decoding, reg.resolve(PluginKind::kDecoding, decoding, {}, "t"), device);
  Model model(w, *q, device);
  EngineOptions eo;
  eo.kv.block_size = 8;
  eo.kv.num_blocks = num_blocks;
  eo.kv.prefix_caching = prefix;
  double fake = 0;
  eo.clock = [&fake] { return fake += 0.001; };
  Engine engine(model, *a, *s, *d, eo);
  EngineRun r;
  r.result = engine.run(reqs);
  for (const auto& st : r.result.timeline.steps) r.prefill_tokens += st.prefill_tokens;
  return r;
}

std::vector<Request> shared_prefix_requests() {
  WorkloadSpec w;
  w.num_requests = 6;
  w.prompt_len.value = 50;
  w.output_len.value = 12;
  w.arrival = "poisson";
  w.rate = 20;
  w.shared_prefix = 40;
  w.seed = 3;
  return build_workload(w, 512);
}

TEST(PrefixCache, EngineSkipsCachedPrefillWithoutChangingTokens) {
  auto reqs = shared_prefix_requests();
  for (std::size_t i = 1; i < reqs.size(); ++i)
    ASSERT_TRUE(std::equal(reqs[i].prompt.begin(), reqs[i].prompt.begin() + 40, reqs[0].prompt.begin()));
  auto plain = run_engine(reqs, false, 0, "sampling");
  auto cached = run_engine(reqs, true, 0, "sampling");
  EXPECT_EQ(cached.result.outputs, plain.result.outputs);
  EXPECT_LT(cached.prefill_tokens, plain.prefill_tokens);
  int hits = 0;
  for (const auto& r : cached.result.timeline.requests) {
    EXPECT_EQ(r.cached_prompt_tokens % 8, 0);
    EXPECT_LE(r.cached_prompt_tokens, 40);
    hits += r.cached_prompt_tokens > 0;
  }
  EXPECT_GE(hits, 1);
  for (const auto& r : plain.result.timeline.requests) EXPECT_EQ(r.cached_prompt_tokens, 0);
  // Every prompt token is either computed or served from the cache, exactly once.
  long long cached_tokens = 0;
  for (const auto& r : cached.result.timeline.requests) cached_tokens += r.cached_prompt_tokens;
  EXPECT_EQ(cached.prefill_tokens + cached_tokens, plain.prefill_tokens);
}

TEST(PrefixCache, EngineUnderPressureAndWithSpeculationKeepsTokens) {
  auto reqs = shared_prefix_requests();
  auto plain = run_engine(reqs, false, 0, "sampling");
  auto tight = run_engine(reqs, true, 24, "sampling");  // 192 tokens: preemption and eviction
  EXPECT_EQ(tight.result.outputs, plain.result.outputs);
  auto spec = run_engine(reqs, true, 0, "prompt_lookup");
  EXPECT_EQ(spec.result.outputs, plain.result.outputs);
}

TEST(PrefixCache, SharedPrefixWorkloadIsDeterministicAndBounded) {
  WorkloadSpec w;
  w.num_requests = 3;
  w.prompt_len.value = 10;
  w.shared_prefix = 64;  // longer than the prompts: whole prompts are shared
  w.seed = 1;
  auto r = build_workload(w, 512);
  EXPECT_EQ(r[0].prompt, r[1].prompt);
  EXPECT_EQ(r[1].prompt, r[2].prompt);
  w.shared_prefix = 0;
  auto u = build_workload(w, 512);
  EXPECT_NE(u[0].prompt, u[1].prompt);
}

}  // namespace
}  // namespace inferlab
