// RadixAttention's Theorem 3.1 on the engine's prefix cache (see inferlab/repro/radix_order.h).
#include "inferlab/repro/radix_order.h"

#include <algorithm>
#include <numeric>

#include "inferlab/kv/block_manager.h"
#include "inferlab/error.h"
#include "inferlab/support/rng.h"

namespace inferlab {

long long prefix_cache_hits(const std::vector<std::vector<int>>& requests, std::span<const int> order, int cache_blocks,
                            int block_size) {
  KvCacheConfig kc;
  kc.block_size = block_size;
  kc.num_blocks = cache_blocks;
  kc.prefix_caching = true;
  BlockManager cache(kc);
  std::vector<BlockCopy> copies;
  long long hits = 0;
  for (int i : order) {
    const std::vector<int>& tokens = requests.at(static_cast<std::size_t>(i));
    const int n = static_cast<int>(tokens.size());
    hits += cache.acquire_prefix(i, tokens, n);
    if (!cache.reserve(i, n, copies))
      throw Error("prefix_cache_hits: request " + std::to_string(i) + " of " + std::to_string(n) +
                  " tokens does not fit in " + std::to_string(cache_blocks) + " blocks");
    cache.set_length(i, n);
    cache.publish_prefix(i, tokens);
    cache.free(i);
  }
  return hits;
}

std::vector<int> radix_dfs_order(const std::vector<std::vector<int>>& requests) {
  std::vector<int> order(requests.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) {
    return requests[static_cast<std::size_t>(a)] < requests[static_cast<std::size_t>(b)];
  });
  return order;
}

namespace {

std::vector<int> random_tokens(Rng& rng, int lo, int hi) {
  std::vector<int> t(static_cast<std::size_t>(rng.uniform_int(lo, hi + 1)));
  for (int& x : t) x = static_cast<int>(rng.uniform_int(3, 40));
  return t;
}

// Few-shot: system prompt + one of 2-3 example sets + a unique question. Multi-turn: 2-3
// conversations, each request one of them up to some turn.
std::vector<std::vector<int>> synthetic_batch(Rng& rng, bool multi_turn, int n) {
  std::vector<std::vector<int>> out;
  if (!multi_turn) {
    const std::vector<int> system = random_tokens(rng, 3, 8);
    std::vector<std::vector<int>> examples(static_cast<std::size_t>(rng.uniform_int(2, 4)));
    for (auto& e : examples) e = random_tokens(rng, 2, 6);
    for (int i = 0; i < n; ++i) {
      std::vector<int> r = system;
      const auto& e = examples[static_cast<std::size_t>(rng.uniform_int(0, static_cast<std::int64_t>(examples.size())))];
      r.insert(r.end(), e.begin(), e.end());
      const auto q = random_tokens(rng, 1, 4);
      r.insert(r.end(), q.begin(), q.end());
      out.push_back(std::move(r));
    }
    return out;
  }
  std::vector<std::vector<std::vector<int>>> conversations(static_cast<std::size_t>(rng.uniform_int(2, 4)));
  for (auto& c : conversations) {
    c.resize(static_cast<std::size_t>(rng.uniform_int(2, 5)));
    for (auto& turn : c) turn = random_tokens(rng, 1, 5);
  }
  for (int i = 0; i < n; ++i) {
    const auto& c = conversations[static_cast<std::size_t>(rng.uniform_int(0, static_cast<std::int64_t>(conversations.size())))];
    const auto turns = static_cast<std::size_t>(rng.uniform_int(1, static_cast<std::int64_t>(c.size()) + 1));
    std::vector<int> r;
    for (std::size_t t = 0; t < turns; ++t) r.insert(r.end(), c[t].begin(), c[t].end());
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

double radix_dfs_optimal_fraction(int trials, int n, int block_size, std::uint64_t seed) {
  check(trials >= 1 && n >= 1 && n <= 8 && block_size >= 1, "radix_dfs_optimal_fraction: trials >= 1, 1 <= n <= 8, block_size >= 1");
  Rng rng(seed);
  int optimal = 0;
  for (int t = 0; t < trials; ++t) {
    const auto requests = synthetic_batch(rng, t % 2 == 1, n);
    std::size_t longest = 0;
    for (const auto& r : requests) longest = std::max(longest, r.size());
    const int blocks = static_cast<int>((longest + static_cast<std::size_t>(block_size) - 1) / static_cast<std::size_t>(block_size));
    const long long dfs = prefix_cache_hits(requests, radix_dfs_order(requests), blocks, block_size);
    std::vector<int> order(requests.size());
    std::iota(order.begin(), order.end(), 0);
    long long best = 0;
    do best = std::max(best, prefix_cache_hits(requests, order, blocks, block_size));
    while (std::next_permutation(order.begin(), order.end()));
    optimal += dfs == best;
  }
  return static_cast<double>(optimal) / trials;
}

}  // namespace inferlab
