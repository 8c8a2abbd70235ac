#include "attention_checks.h"

#include <gtest/gtest.h>

namespace inferlab::testing {

AttentionProblemSpec problem_spec(std::vector<SeqShape> seqs, int block_size, Heads heads, std::uint64_t seed) {
  AttentionProblemSpec s;
  s.seqs = std::move(seqs);
  s.block_size = block_size;
  s.n_heads = heads.n_heads;
  s.n_kv_heads = heads.n_kv_heads;
  s.head_dim = 16;
  s.seed = seed;
  return s;
}

void expect_attention_matches_reference(Attention& attention, const AttentionProblemSpec& spec, double tolerance,
                                        int threads) {
  AttentionProblem problem(spec);
  CpuDevice device(threads);
  const std::vector<float> got = run_attention(attention, problem, device);
  EXPECT_EQ(count_non_finite(got), 0u);
  EXPECT_LT(max_relative_error(got, reference_output(problem)), tolerance);
}

}  // namespace inferlab::testing
