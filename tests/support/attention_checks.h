// GoogleTest checks shared by the attention plugins' tests (kept apart from
// attention_fixtures, which the benchmarks compile without GoogleTest).
#pragma once
#include <cstdint>
#include <vector>

#include "attention_fixtures.h"

namespace inferlab::testing {
struct Heads {
  int n_heads;
  int n_kv_heads;
};

// A spec for `seqs` with head_dim 16, the given block size and head counts.
AttentionProblemSpec problem_spec(std::vector<SeqShape> seqs, int block_size, Heads heads, std::uint64_t seed);

// Runs `attention` on the problem on `threads` threads and expects finite output within
// `tolerance` (max relative error) of the double-precision reference.
void expect_attention_matches_reference(Attention& attention, const AttentionProblemSpec& spec, double tolerance,
                                        int threads = 2);

}  // namespace inferlab::testing
