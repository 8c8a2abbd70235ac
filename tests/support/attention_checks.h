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
// Expects `got` finite and within `tolerance` (max relative error) of `want`.
void expect_finite_and_close(const std::vector<float>& got, const std::vector<float>& want, double tolerance);

// The checks every CPU attention kernel's own tests make (the plugin's tests name them):
// scores in the hundreds ({200, 4}, {50, 1}, q_scale 80, head_dim 64) stay finite and within
// `tolerance` of the reference on 2 threads;
void expect_peaked_softmax_close(Attention& attention, double tolerance);
// mixed_step_shapes() gives the same bits on 1 and 3 threads;
void expect_same_result_for_any_thread_count(Attention& attention);
// a batch with no query rows writes nothing;
void expect_empty_batch_writes_nothing(Attention& attention);
// a context longer than its block table is an Error.
void expect_rejects_short_block_table(Attention& attention);

// The output of the naive plugin as a user gets it: loaded through the registry from the
// build's plugin directory (no plugin compiles another's source).
std::vector<float> registry_naive_output(const AttentionProblem& problem, Device& device);

}  // namespace inferlab::testing
