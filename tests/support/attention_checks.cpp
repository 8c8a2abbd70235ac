#include "attention_checks.h"

#include <gtest/gtest.h>

#include "inferlab/error.h"
#include "inferlab/plugin/registry.h"
#include "test_support.h"

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
  expect_finite_and_close(run_attention(attention, problem, device), reference_output(problem), tolerance);
}

void expect_finite_and_close(const std::vector<float>& got, const std::vector<float>& want, double tolerance) {
  EXPECT_EQ(count_non_finite(got), 0u);
  EXPECT_LT(max_relative_error(got, want), tolerance);
}

void expect_peaked_softmax_close(Attention& attention, double tolerance) {
  AttentionProblemSpec s;
  s.seqs = {{200, 4}, {50, 1}};
  s.q_scale = 80.0f;
  s.head_dim = 64;
  AttentionProblem problem(s);
  CpuDevice device(2);
  expect_finite_and_close(run_attention(attention, problem, device), reference_output(problem), tolerance);
}

void expect_same_result_for_any_thread_count(Attention& attention) {
  AttentionProblemSpec s;
  s.seqs = mixed_step_shapes();
  AttentionProblem problem(s);
  CpuDevice one(1), three(3);
  EXPECT_EQ(run_attention(attention, problem, one), run_attention(attention, problem, three));
}

void expect_empty_batch_writes_nothing(Attention& attention) {
  AttentionProblemSpec s;
  s.seqs = {{5, 0}};
  AttentionProblem problem(s);
  CpuDevice device(2);
  EXPECT_TRUE(run_attention(attention, problem, device).empty());
}

void expect_rejects_short_block_table(Attention& attention) {
  AttentionProblemSpec s;
  s.seqs = {{20, 1}};
  s.block_size = 8;
  AttentionProblem problem(s);
  AttentionBatch batch = problem.batch();
  const std::vector<int> lens = {40};  // needs 5 blocks, the table has 3
  batch.context_len = lens;
  CpuDevice device(1);
  std::vector<float> out(problem.out_size());
  EXPECT_THROW(attention.forward(batch, problem.kv(), problem.q(), out.data(), device), Error);
}

std::vector<float> registry_naive_output(const AttentionProblem& problem, Device& device) {
  Registry reg({plugin_dir()});
  auto naive = reg.create_attention("naive", reg.resolve(PluginKind::kAttention, "naive", {}, "test"), device);
  return run_attention(*naive, problem, device);
}

}  // namespace inferlab::testing
