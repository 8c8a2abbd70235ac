// The host side of flash's FlashDecoding path on CUDA (plugins/common/attention/decode_split.h),
// which needs no GPU: how many chunks a few-row sequence gets from its context and the SM count,
// that the chunks tile the causal prefix exactly once with disjoint partial states, and that
// `decode_split` is a CUDA switch (refused on the CPU, where it would change nothing). The
// kernels' results are checked on a GPU (tests/cuda_kernels/test_cuda_attention.cpp).
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "inferlab/error.h"
#include "inferlab/plugin/registry.h"
#include "plugins/common/attention/decode_split.h"
#include "test_support.h"

namespace inferlab::cuda {
namespace {

TEST(DecodeSplit, ChunksFillTheGpuWithinTheContext) {
  // Batch 1 of TinyLlama (4 kv heads) on 132 SMs: 4 blocks unsplit, 528 wanted.
  EXPECT_EQ(decode_splits(100000, 4, 132), kMaxSplits);     // 132 wanted, capped by kMaxSplits
  EXPECT_EQ(decode_splits(2048, 4, 132), 2048 / kMinSplitPositions);  // capped by the context
  EXPECT_EQ(decode_splits(64 * 100, 4, 132), 100);
  EXPECT_EQ(decode_splits(100000, 128, 132), 5);            // batch 32: ceil(528 / 128)
  EXPECT_EQ(decode_splits(100000, 16, 8), 2);               // ceil(32 / 16), a small GPU
  EXPECT_EQ(decode_splits(100000, 600, 132), 1);            // the unsplit batch already fills the GPU
  EXPECT_EQ(decode_splits(kMinSplitPositions * 2 - 1, 4, 132), 1);  // too short for two chunks
  EXPECT_EQ(decode_splits(kMinSplitPositions * 2, 4, 132), 2);
  EXPECT_EQ(decode_splits(0, 4, 132), 1);
  EXPECT_EQ(decode_splits(4096, 4, 0), 1);  // no SM count: never split
  // More SMs never means fewer chunks; a fuller batch never means more.
  for (int sms : {1, 8, 66, 132, 144})
    for (int base : {1, 4, 32, 128}) {
      EXPECT_LE(decode_splits(8192, base, sms), decode_splits(8192, base, sms + 1));
      EXPECT_GE(decode_splits(8192, base, sms), decode_splits(8192, base + 1, sms));
    }
}

// A batch of host arrays: n_q rows and ctx positions per sequence.
struct HostBatch {
  std::vector<int> query_start{0}, context_len, block_table;
  AttentionBatch view;
  HostBatch(const std::vector<std::pair<int, int>>& seqs, int n_heads, int n_kv_heads) {
    for (auto [n_q, ctx] : seqs) {
      query_start.push_back(query_start.back() + n_q);
      context_len.push_back(ctx);
    }
    block_table.assign(seqs.size(), 0);
    view.query_start = query_start;
    view.context_len = context_len;
    view.block_table = block_table;
    view.max_blocks = 1;
    view.n_heads = n_heads;
    view.n_kv_heads = n_kv_heads;
    view.head_dim = 64;
  }
};

// Every (row, head) of every sequence is covered over exactly its causal prefix: by one whole
// item, or by split items whose chunks tile [0, ctx) in order, whose partial states (per kv head)
// do not overlap, and which one merge names.
void expect_plan_covers(const TiledPlan& plan, const HostBatch& b, int query_rows) {
  const int group = b.view.n_heads / b.view.n_kv_heads;
  std::set<long long> vectors;  // partial-state vectors written
  for (const AttentionItem& it : plan.items) {
    ASSERT_LE(it.row_end - it.row_begin, plan.max_item_rows);
    ASSERT_LE(it.row_end - it.row_begin, query_rows);
    if (it.partial < 0) continue;
    for (int h = 0; h < b.view.n_kv_heads; ++h)
      for (int v = 0; v < (it.row_end - it.row_begin) * group; ++v)
        EXPECT_TRUE(vectors.insert(it.partial + static_cast<long long>(h) * (it.row_end - it.row_begin) * group + v).second)
            << "two items write partial vector " << it.partial;
  }
  EXPECT_EQ(static_cast<long long>(vectors.size()), plan.partial_vectors);
  for (int s = 0; s < b.view.n_seqs(); ++s) {
    const int n_q = b.query_start[s + 1] - b.query_start[s], ctx = b.context_len[s];
    for (int r = 0; r < n_q; r += query_rows) {
      const int r_end = std::min(r + query_rows, n_q);
      std::vector<AttentionItem> mine;
      for (const AttentionItem& it : plan.items)
        if (it.seq == s && it.row_begin == r) mine.push_back(it);
      ASSERT_FALSE(mine.empty()) << "seq " << s << " rows " << r;
      if (mine.size() == 1 && mine[0].partial < 0) {
        EXPECT_EQ(mine[0].row_end, r_end);
        EXPECT_EQ(mine[0].pos_begin, 0);
        EXPECT_EQ(mine[0].pos_end, ctx - n_q + r_end);
        continue;
      }
      const auto merge = std::find_if(plan.merges.begin(), plan.merges.end(),
                                      [&](const AttentionMerge& m) { return m.seq == s && m.row_begin == r; });
      ASSERT_NE(merge, plan.merges.end()) << "split seq " << s << " without a merge";
      EXPECT_EQ(merge->rows, r_end - r);
      ASSERT_EQ(merge->splits, static_cast<int>(mine.size()));
      int at = 0;
      for (std::size_t j = 0; j < mine.size(); ++j) {
        EXPECT_EQ(mine[j].pos_begin, at);
        EXPECT_LT(mine[j].pos_begin, mine[j].pos_end) << "empty chunk";
        // The merge finds chunk j's state at partial + j * n_kv_heads * rows * group.
        EXPECT_EQ(mine[j].partial, merge->partial + static_cast<long long>(j) * b.view.n_kv_heads * merge->rows * group);
        at = mine[j].pos_end;
      }
      EXPECT_EQ(at, ctx);
    }
  }
}

TEST(DecodeSplit, FlashPlanSplitsOnlyFewRowSequences) {
  // TinyLlama's heads (32 / 4): a decode row at 4096, a 3-row verify at 900, a 100-row prefill
  // chunk, a decode at 5 positions (too short to split), an empty sequence.
  const HostBatch b({{1, 4096}, {3, 900}, {100, 300}, {1, 5}, {0, 7}}, 32, 4);
  const int query_rows = 16;
  const TiledPlan plan = flash_plan(b.view, query_rows, true, 132);
  expect_plan_covers(plan, b, query_rows);
  // Unsplit: 1 + 1 + 7 + 1 items over 4 kv heads = 40 blocks; 528 wanted -> 14 chunks each,
  // capped by the context (900 / 64 = 14) and 1 for the 5-position sequence.
  ASSERT_EQ(plan.merges.size(), 2u);
  EXPECT_EQ(plan.merges[0].splits, 14);
  EXPECT_EQ(plan.merges[1].splits, 14);
  EXPECT_EQ(plan.items.size(), 14u + 14u + 7u + 1u);
  EXPECT_EQ(plan.max_item_rows, 16);

  const TiledPlan off = flash_plan(b.view, query_rows, false, 132);
  expect_plan_covers(off, b, query_rows);
  EXPECT_TRUE(off.merges.empty());
  EXPECT_EQ(off.partial_vectors, 0);
  EXPECT_EQ(off.items.size(), 1u + 1u + 7u + 1u);
}

TEST(DecodeSplit, BatchOneDecodeGetsManyBlocks) {
  // The case the split exists for: one sequence, 4 kv heads, 4 thread blocks unsplit.
  const HostBatch b({{1, 2048}}, 32, 4);
  const TiledPlan plan = flash_plan(b.view, 16, true, 132);
  expect_plan_covers(plan, b, 16);
  EXPECT_EQ(plan.items.size() * 4, 128u);  // 32 chunks x 4 kv heads
  EXPECT_EQ(plan.partial_vectors, 32LL * 4 * 8);
}

TEST(DecodeSplit, RefusesMoreSplitsThanPositions) {
  TiledPlan plan;
  try {
    add_row_block(plan, 0, 0, 1, 1, 3, 4, 4, 8);
    FAIL() << "4 chunks of 3 positions accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("4 splits of a context of 3 positions"), std::string::npos) << e.what();
  }
}

// decode_split as a user sets it: on by default, false refused on the CPU (it changes only the
// CUDA path) with the reason, accepted on CUDA where that is built in.
TEST(DecodeSplit, ParameterIsACudaSwitch) {
  Registry reg({testing::plugin_dir()});
  EXPECT_TRUE(reg.resolve(PluginKind::kAttention, "flash", {}, "test").get_bool("decode_split"));
  const Params off = reg.resolve(PluginKind::kAttention, "flash", {{"decode_split", false}}, "test");
  ModelConfig c;
  c.dim = 64;
  c.n_heads = 8;
  c.n_kv_heads = 2;
  const auto cpu = reg.check_support(PluginKind::kAttention, "flash", SupportQuery{c, DeviceKind::kCpu, KvDtype::kF32, off});
  ASSERT_EQ(cpu.size(), 1u);
  EXPECT_NE(cpu[0].find("decode_split = false changes only the CUDA kernels"), std::string::npos) << cpu[0];
#if INFERLAB_HAVE_CUDA
  EXPECT_TRUE(
      reg.check_support(PluginKind::kAttention, "flash", SupportQuery{c, DeviceKind::kCuda, KvDtype::kF32, off}).empty());
#endif
}

}  // namespace
}  // namespace inferlab::cuda
