// RadixAttention's Theorem 3.1 on the engine's prefix cache: a hand example where the order
// matters, and the seeded property check of experiments/repro/radix_dfs_order.toml.
#include <gtest/gtest.h>

#include "inferlab/error.h"
#include "inferlab/repro/radix_order.h"

namespace inferlab {
namespace {

TEST(RadixOrder, DepthFirstBeatsAnInterleavedOrderOnAHandExample) {
  // Radix tree r(3) -> {x(5) -> {y(6), z(7)}, w(4)}; a cache of 3 one-token blocks.
  const std::vector<std::vector<int>> requests = {{3, 5, 6}, {3, 4}, {3, 5, 7}};
  const std::vector<int> dfs = radix_dfs_order(requests);
  EXPECT_EQ(dfs, (std::vector<int>{1, 0, 2}));  // [3 4], [3 5 6], [3 5 7]
  // DFS: r hit for [3 5 6], r and x for [3 5 7]. Interleaved: [3 4] evicts x between the two.
  EXPECT_EQ(prefix_cache_hits(requests, dfs, 3, 1), 3);
  const std::vector<int> interleaved = {0, 1, 2};
  EXPECT_EQ(prefix_cache_hits(requests, interleaved, 3, 1), 2);
  EXPECT_THROW(prefix_cache_hits(requests, dfs, 2, 1), Error);  // a request longer than the cache
}

TEST(RadixOrder, DepthFirstIsOptimalOnSyntheticBatches) {
  EXPECT_EQ(radix_dfs_optimal_fraction(20, 6, 1, 3), 1.0);
  EXPECT_EQ(radix_dfs_optimal_fraction(10, 5, 2, 4), 1.0);  // two-token blocks
}

}  // namespace
}  // namespace inferlab
