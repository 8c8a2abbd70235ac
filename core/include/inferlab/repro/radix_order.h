// RadixAttention's scheduling theorem (Zheng et al., "SGLang: Efficient Execution of Structured
// Language Model Programs", 2024, Theorem 3.1): for a batch of requests and a prefix cache at
// least as large as the longest request, visiting the requests' radix tree depth-first reaches
// the optimal cache hit rate. Checked on the engine's own prefix cache (BlockManager with
// prefix caching: hash-chained full blocks, least recently released evicted first) against every
// order of small synthetic batches (`inferlab reproduce`, experiments/repro/radix_dfs_order.toml).
#pragma once
#include <cstdint>
#include <span>
#include <vector>

namespace inferlab {

// Prompt tokens served from the cache when `requests` run one after another in `order`, each
// taking the cached blocks of its longest cached prefix, computing (reserving) the rest,
// publishing its blocks and finishing, through a BlockManager of `cache_blocks` blocks of
// `block_size` tokens. Error when a request does not fit in the cache.
long long prefix_cache_hits(const std::vector<std::vector<int>>& requests, std::span<const int> order, int cache_blocks,
                            int block_size);

// A depth-first order of the requests' radix tree: the token sequences sorted
// lexicographically (siblings in token order, a request before those it is a prefix of).
std::vector<int> radix_dfs_order(const std::vector<std::vector<int>>& requests);

// Over `trials` seeded synthetic batches of `n` requests (half few-shot: a shared system prompt,
// one of a few example sets, a unique question; half multi-turn: conversations at different
// turns), the fraction where the depth-first order's hits equal the best over all n! orders,
// with a cache of exactly the longest request (block_size-token blocks).
double radix_dfs_optimal_fraction(int trials, int n, int block_size, std::uint64_t seed);

}  // namespace inferlab
