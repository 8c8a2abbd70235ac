// testing::PagedKv and BlockPool: block accounting, copy on write, truncation, slot mapping.
#include "inferlab/kv/kv_cache.h"
#include "kv_fixtures.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "inferlab/error.h"
#include "inferlab/support/rng.h"

namespace inferlab {
namespace {

// 2 layers, 2 kv heads of dim 4: kv_dim 8.
ModelConfig tiny_model() {
  ModelConfig m{.name = "tiny", .dim = 16, .hidden_dim = 32, .n_layers = 2, .n_heads = 4, .n_kv_heads = 2,
                .vocab_size = 32, .max_seq_len = 64};
  return m;
}

KvCacheConfig cfg(int block_size, int num_blocks) {
  KvCacheConfig c;
  c.block_size = block_size;
  c.num_blocks = num_blocks;
  return c;
}

// Writes a recognisable value to every float of positions [from, to) of seq, all layers.
void write_tokens(testing::PagedKv& kv, int seq, int from, int to, float base) {
  const int kv_dim = 8;
  for (int l = 0; l < 2; ++l)
    for (int p = from; p < to; ++p) {
      const int slot = kv.slot(seq, p);
      for (int c = 0; c < kv_dim; ++c) {
        kv.k_slot(l, slot)[c] = base + 100.0f * static_cast<float>(l) + static_cast<float>(p) + 0.01f * static_cast<float>(c);
        kv.v_slot(l, slot)[c] = -(base + 100.0f * static_cast<float>(l) + static_cast<float>(p) + 0.01f * static_cast<float>(c));
      }
    }
}

float k_value(const testing::PagedKv& kv, int seq, int layer, int pos, int c) {
  const KvLayerView view = kv.layer(layer);
  return view.k_at(kv.slot(seq, pos), 0)[c];
}

TEST(BlockPool, HandsOutLowestIdsAndCountsReferences) {
  BlockPool pool(4);
  EXPECT_EQ(pool.total(), 4);
  EXPECT_EQ(pool.allocate(), 0);
  EXPECT_EQ(pool.allocate(), 1);
  EXPECT_EQ(pool.allocate(), 2);
  EXPECT_EQ(pool.free_count(), 1);
  pool.release(1);
  pool.release(0);
  EXPECT_EQ(pool.allocate(), 0);  // lowest first, not last released
  pool.retain(2);
  EXPECT_EQ(pool.ref_count(2), 2);
  pool.release(2);
  EXPECT_EQ(pool.ref_count(2), 1);
  EXPECT_EQ(pool.free_count(), 2);
  EXPECT_EQ(pool.allocate(), 1);
  EXPECT_EQ(pool.allocate(), 3);
  EXPECT_EQ(pool.allocate(), -1);
  EXPECT_THROW(pool.release(7), Error);
  pool.release(3);
  EXPECT_THROW(pool.release(3), Error);
  EXPECT_THROW(pool.retain(3), Error);
}

TEST(KvCache, RejectsBadConfig) {
  EXPECT_THROW(testing::PagedKv(tiny_model(), cfg(16, 0)), Error);
  EXPECT_THROW(testing::PagedKv(tiny_model(), cfg(0, 8)), Error);
  ModelConfig empty;
  EXPECT_THROW(testing::PagedKv(empty, cfg(16, 8)), Error);
}

TEST(KvCache, AccountsReservedUsedFreeAndPeak) {
  testing::PagedKv kv(tiny_model(), cfg(4, 10));
  EXPECT_EQ(kv.bytes(), 2ull * 2 * 10 * 4 * 8 * sizeof(float));
  EXPECT_EQ(kv.blocks_needed(1, 9), 3);
  ASSERT_TRUE(kv.reserve(1, 9));
  EXPECT_EQ(kv.capacity(1), 12);
  EXPECT_EQ(kv.length(1), 0);
  KvStats s = kv.stats();
  EXPECT_EQ(s.blocks_total, 10);
  EXPECT_EQ(s.blocks_reserved, 3);
  EXPECT_EQ(s.blocks_used, 0);
  EXPECT_EQ(s.blocks_free, 7);
  EXPECT_EQ(s.tokens_stored, 0);

  kv.set_length(1, 5);
  s = kv.stats();
  EXPECT_EQ(s.blocks_used, 2);
  EXPECT_EQ(s.tokens_stored, 5);
  EXPECT_EQ(kv.blocks_needed(1, 12), 0);
  EXPECT_EQ(kv.blocks_needed(1, 13), 1);

  ASSERT_TRUE(kv.reserve(2, 16));
  EXPECT_EQ(kv.peak_blocks_reserved(), 7);
  kv.free(2);
  s = kv.stats();
  EXPECT_EQ(s.blocks_reserved, 3);
  EXPECT_EQ(s.blocks_free, 7);
  EXPECT_EQ(kv.peak_blocks_reserved(), 7);  // peak survives the free
  EXPECT_FALSE(kv.has(2));
}

TEST(KvCache, ReserveIsAllOrNothingWhenThePoolIsShort) {
  testing::PagedKv kv(tiny_model(), cfg(4, 5));
  ASSERT_TRUE(kv.reserve(1, 12));  // 3 blocks
  kv.set_length(1, 12);
  EXPECT_EQ(kv.blocks_needed(1, 24), 3);
  EXPECT_FALSE(kv.can_allocate(3));
  EXPECT_FALSE(kv.reserve(1, 24));
  EXPECT_EQ(kv.capacity(1), 12);
  EXPECT_EQ(kv.stats().blocks_free, 2);
  EXPECT_FALSE(kv.reserve(2, 9));  // needs 3, 2 free: the seq is not even created
  EXPECT_FALSE(kv.has(2));
  EXPECT_TRUE(kv.reserve(2, 8));
  EXPECT_EQ(kv.stats().blocks_free, 0);
  EXPECT_EQ(kv.block_table(1).size(), 3u);
  EXPECT_EQ(kv.block_table(2)[0], 3);
  EXPECT_EQ(kv.block_table(2)[1], 4);
}

TEST(KvCache, ForkSharesBlocksAndCopyOnWriteKeepsTheSourceIntact) {
  testing::PagedKv kv(tiny_model(), cfg(4, 8));
  ASSERT_TRUE(kv.reserve(1, 6));
  write_tokens(kv, 1, 0, 6, 1000.0f);
  kv.set_length(1, 6);

  kv.fork(1, 2);
  EXPECT_EQ(kv.length(2), 6);
  EXPECT_EQ(kv.block_table(2)[0], kv.block_table(1)[0]);
  EXPECT_EQ(kv.block_table(2)[1], kv.block_table(1)[1]);
  KvStats s = kv.stats();
  EXPECT_EQ(s.blocks_reserved, 2);   // shared blocks counted once
  EXPECT_EQ(s.tokens_stored, 6);
  EXPECT_THROW(kv.fork(1, 2), Error);
  EXPECT_THROW(kv.fork(9, 3), Error);

  // Writing positions [6, 10) of seq 2: block 1 (shared, partially filled) must be copied,
  // and one new block appended.
  EXPECT_EQ(kv.blocks_needed(2, 10), 2);
  ASSERT_TRUE(kv.reserve(2, 10));
  EXPECT_EQ(kv.block_table(2)[0], kv.block_table(1)[0]);  // untouched block stays shared
  EXPECT_NE(kv.block_table(2)[1], kv.block_table(1)[1]);
  // The copy carries the shared prefix of the block, all layers.
  for (int l = 0; l < 2; ++l)
    for (int p = 0; p < 6; ++p) EXPECT_EQ(k_value(kv, 2, l, p, 3), k_value(kv, 1, l, p, 3));
  write_tokens(kv, 2, 6, 10, 5000.0f);
  kv.set_length(2, 10);
  // Source untouched: its positions 4, 5 still hold the original values, V too.
  EXPECT_FLOAT_EQ(k_value(kv, 1, 1, 5, 2), 1000.0f + 100.0f + 5.0f + 0.02f);
  EXPECT_FLOAT_EQ(kv.layer(0).v_at(kv.slot(1, 4), 1)[0], -(1000.0f + 4.0f + 0.04f));
  EXPECT_FLOAT_EQ(k_value(kv, 2, 0, 7, 0), 5000.0f + 7.0f);

  s = kv.stats();
  EXPECT_EQ(s.blocks_reserved, 4);
  EXPECT_EQ(s.tokens_stored, 4 + 2 + 4 + 2);  // shared block 0 once, plus 2 + (2 + 4)
  EXPECT_EQ(s.tokens_stored, 12);

  kv.free(1);
  EXPECT_EQ(kv.stats().blocks_reserved, 3);
  EXPECT_EQ(kv.blocks_needed(2, 12), 0);  // block 0 now private again
  kv.free(2);
  EXPECT_EQ(kv.stats().blocks_free, 8);
}

TEST(KvCache, TruncateKeepsOrReleasesCapacity) {
  testing::PagedKv kv(tiny_model(), cfg(4, 8));
  ASSERT_TRUE(kv.reserve(1, 14));
  kv.set_length(1, 14);
  kv.truncate(1, 9, /*keep_capacity=*/true);
  EXPECT_EQ(kv.length(1), 9);
  EXPECT_EQ(kv.capacity(1), 16);
  EXPECT_EQ(kv.stats().blocks_reserved, 4);
  EXPECT_EQ(kv.stats().blocks_used, 3);
  kv.truncate(1, 5, /*keep_capacity=*/false);
  EXPECT_EQ(kv.length(1), 5);
  EXPECT_EQ(kv.capacity(1), 8);
  EXPECT_EQ(kv.stats().blocks_reserved, 2);
  EXPECT_THROW(kv.truncate(1, 6, false), Error);
  kv.truncate(1, 0, false);
  EXPECT_EQ(kv.capacity(1), 0);
  EXPECT_EQ(kv.stats().blocks_free, 8);
  EXPECT_TRUE(kv.has(1));
}

TEST(KvCache, FreeReturnsEverything) {
  testing::PagedKv kv(tiny_model(), cfg(3, 12));
  for (int seq = 0; seq < 4; ++seq) {
    ASSERT_TRUE(kv.reserve(seq, 3 * seq + 2));
    kv.set_length(seq, 3 * seq + 1);
  }
  kv.fork(3, 7);
  ASSERT_TRUE(kv.reserve(7, 12));
  EXPECT_GT(kv.stats().blocks_reserved, 0);
  for (int seq : {0, 1, 2, 3, 7}) kv.free(seq);
  const KvStats s = kv.stats();
  EXPECT_EQ(s.blocks_free, 12);
  EXPECT_EQ(s.blocks_reserved, 0);
  EXPECT_EQ(s.blocks_used, 0);
  EXPECT_EQ(s.tokens_stored, 0);
  EXPECT_THROW(kv.free(0), Error);
}

TEST(KvCache, OneBlockPerSequenceWhenBlockCoversMaxLength) {
  // Contiguous-style: block_size >= the longest sequence, reservation up front.
  testing::PagedKv kv(tiny_model(), cfg(64, 3));
  for (int seq = 0; seq < 3; ++seq) {
    ASSERT_TRUE(kv.reserve(seq, 64));
    EXPECT_EQ(kv.block_table(seq).size(), 1u);
    EXPECT_EQ(kv.block_table(seq)[0], seq);
  }
  EXPECT_FALSE(kv.reserve(3, 1));
  for (int seq = 0; seq < 3; ++seq) {
    kv.set_length(seq, 10 + seq);
    EXPECT_TRUE(kv.reserve(seq, 64));  // growth within the block needs nothing
  }
  EXPECT_EQ(kv.stats().blocks_used, 3);
  EXPECT_EQ(kv.peak_blocks_reserved(), 3);
}

TEST(KvCache, SlotMappingFollowsTheBlockTable) {
  testing::PagedKv kv(tiny_model(), cfg(4, 8));
  ASSERT_TRUE(kv.reserve(1, 4));  // block 0
  ASSERT_TRUE(kv.reserve(2, 4));  // block 1
  ASSERT_TRUE(kv.reserve(1, 8));  // block 2
  EXPECT_EQ(kv.slot(1, 0), 0);
  EXPECT_EQ(kv.slot(1, 3), 3);
  EXPECT_EQ(kv.slot(1, 4), 8);
  EXPECT_EQ(kv.slot(1, 7), 11);
  EXPECT_EQ(kv.slot(2, 2), 6);
  EXPECT_THROW(kv.slot(1, 8), Error);
  EXPECT_THROW(kv.slot(1, -1), Error);
  EXPECT_THROW(kv.slot(5, 0), Error);
  // k_slot writes land where layer views read.
  kv.k_slot(1, kv.slot(1, 5))[8 - 1] = 42.0f;
  EXPECT_EQ(kv.layer(1).k_at(kv.slot(1, 5), 1)[3], 42.0f);
  EXPECT_EQ(kv.layer(1).block_size, 4);
  EXPECT_EQ(kv.layer(1).n_kv_heads, 2);
  EXPECT_EQ(kv.layer(1).head_dim, 4);
  EXPECT_THROW(kv.layer(2), Error);
}

TEST(KvCache, InvalidUseThrows) {
  testing::PagedKv kv(tiny_model(), cfg(4, 4));
  EXPECT_THROW(kv.set_length(1, 1), Error);
  EXPECT_THROW(kv.length(1), Error);
  EXPECT_THROW(kv.block_table(1), Error);
  EXPECT_THROW(kv.truncate(1, 0, true), Error);
  ASSERT_TRUE(kv.reserve(1, 3));
  EXPECT_THROW(kv.set_length(1, 5), Error);
  EXPECT_THROW(kv.blocks_needed(1, -1), Error);
  EXPECT_STREQ(kv_dtype_name(KvDtype::kF32), "f32");
}

}  // namespace
}  // namespace inferlab

namespace inferlab {
namespace {

// stats() is kept up to date by every operation instead of scanning the pool each step; a long
// random sequence of operations (reserve, write, roll back, fork, free, prefix reuse) must give
// exactly what a full scan of the block tables gives after every operation.
KvStats scanned_stats(const BlockManager& kv, const std::vector<int>& live, int blocks_total) {
  KvStats s;
  s.blocks_total = blocks_total;
  std::vector<int> valid(static_cast<std::size_t>(blocks_total), 0);
  for (int seq : live) {
    const auto table = kv.block_table(seq);
    const int len = kv.length(seq), bs = kv.block_size();
    for (int b = 0; b * bs < len; ++b) {
      int& v = valid[static_cast<std::size_t>(table[static_cast<std::size_t>(b)])];
      v = std::max(v, std::min(bs, len - b * bs));
    }
  }
  for (int v : valid) {
    s.blocks_used += v > 0;
    s.tokens_stored += v;
  }
  return s;
}

TEST(BlockManager, IncrementalStatsEqualAFullScan) {
  KvCacheConfig c;
  c.block_size = 4;
  c.num_blocks = 40;
  c.prefix_caching = true;
  BlockManager kv(c);
  Rng rng(17);
  std::vector<int> live, forked;  // forked: shares blocks with another sequence (never truncated)
  std::vector<std::vector<int>> tokens(1000);
  std::vector<BlockCopy> copies;
  int next_id = 0;
  for (int op = 0; op < 3000; ++op) {
    const int kind = static_cast<int>(rng.uniform_int(0, 6));
    if (kind == 0 || live.empty()) {  // a new sequence, maybe from a cached prefix
      const int id = next_id++ % 1000;
      if (kv.has(id)) continue;
      tokens[static_cast<std::size_t>(id)].assign(static_cast<std::size_t>(rng.uniform_int(1, 20)), 0);
      for (std::size_t i = 0; i < tokens[static_cast<std::size_t>(id)].size(); ++i)
        tokens[static_cast<std::size_t>(id)][i] = static_cast<int>(i < 8 ? i : rng.uniform_int(0, 3));
      const auto& t = tokens[static_cast<std::size_t>(id)];
      kv.acquire_prefix(id, t, static_cast<int>(t.size()) - 1);
      if (!kv.reserve(id, static_cast<int>(t.size()), copies)) {
        if (kv.has(id)) kv.free(id);
        continue;
      }
      kv.set_length(id, static_cast<int>(t.size()));
      kv.publish_prefix(id, t);
      live.push_back(id);
    } else {
      const std::size_t pick = static_cast<std::size_t>(rng.uniform_int(0, static_cast<std::int64_t>(live.size())));
      const int id = live[pick];
      const bool shared = std::find(forked.begin(), forked.end(), id) != forked.end();
      auto& t = tokens[static_cast<std::size_t>(id)];
      if (kind == 1 || kind == 2) {  // grow by a few tokens (copy on write when shared)
        const int grow = static_cast<int>(rng.uniform_int(1, 6));
        if (!kv.reserve(id, kv.length(id) + grow, copies)) continue;
        for (int i = 0; i < grow; ++i) t.push_back(static_cast<int>(rng.uniform_int(0, 3)));
        kv.set_length(id, static_cast<int>(t.size()));
        kv.publish_prefix(id, t);
      } else if (kind == 3 && !shared && kv.length(id) > 1) {  // roll back rejected drafts
        const int to = static_cast<int>(rng.uniform_int(1, kv.length(id)));
        kv.truncate(id, to, rng.uniform() < 0.5);
        t.resize(static_cast<std::size_t>(to));
      } else if (kind == 4) {  // fork (beam search style)
        const int dst = next_id++ % 1000;
        if (kv.has(dst)) continue;
        kv.fork(id, dst);
        tokens[static_cast<std::size_t>(dst)] = t;
        live.push_back(dst);
        forked.push_back(dst);
        forked.push_back(id);
      } else {
        kv.free(id);
        live.erase(live.begin() + static_cast<std::ptrdiff_t>(pick));
      }
    }
    const KvStats want = scanned_stats(kv, live, c.num_blocks), got = kv.stats();
    ASSERT_EQ(got.blocks_used, want.blocks_used) << "after op " << op;
    ASSERT_EQ(got.tokens_stored, want.tokens_stored) << "after op " << op;
    ASSERT_EQ(got.blocks_reserved + got.blocks_free, c.num_blocks) << "after op " << op;
  }
}

}  // namespace
}  // namespace inferlab
