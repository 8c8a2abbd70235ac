// Naive attention against the double-precision reference (kernels/ref/attention) over
// awkward shapes: 1, 3, 129 query rows, partial blocks, block sizes 1/3/16, GQA, mixed
// prefill/decode/verify batches and shuffled block tables. Loads nothing from the registry.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "attention_checks.h"
#include "naive_attention.h"

namespace inferlab::testing {
namespace {

constexpr double kTolerance = 1e-5;
// Scores reach ~150 in the peaked test; a float score carries an absolute error of about
// |score| * 1e-7 * (summation length), and exp turns it into the same relative weight error,
// so no float kernel meets 1e-5 there. That test is about overflow, not precision.
constexpr double kPeakedTolerance = 1e-4;

class NaiveAttentionShapes : public ::testing::TestWithParam<std::tuple<int, Heads>> {
 protected:
  AttentionProblemSpec spec(std::vector<SeqShape> seqs, std::uint64_t seed) const {
    return problem_spec(std::move(seqs), std::get<0>(GetParam()), std::get<1>(GetParam()), seed);
  }
  static void expect_matches_reference(const AttentionProblemSpec& s) {
    plugins::NaiveAttention naive;
    expect_attention_matches_reference(naive, s, kTolerance);
  }
};

TEST_P(NaiveAttentionShapes, SingleDecodeRow) {
  expect_matches_reference(spec({{1, 1}}, 1));
  expect_matches_reference(spec({{37, 1}}, 2));
}

TEST_P(NaiveAttentionShapes, ThreeRowChunkAndWholePrefill) {
  expect_matches_reference(spec({{3, 3}}, 3));
  expect_matches_reference(spec({{129, 129}}, 4));
}

TEST_P(NaiveAttentionShapes, MixedPrefillDecodeAndVerifyBatch) {
  expect_matches_reference(spec(mixed_step_shapes(), 5));
}

INSTANTIATE_TEST_SUITE_P(
    BlocksAndGqa, NaiveAttentionShapes,
    ::testing::Combine(::testing::Values(1, 3, 16),
                       ::testing::Values(Heads{8, 2}, Heads{9, 3}, Heads{4, 4})),
    [](const auto& info) {
      const Heads h = std::get<1>(info.param);
      return "bs" + std::to_string(std::get<0>(info.param)) + "_h" + std::to_string(h.n_heads) +
             "_kv" + std::to_string(h.n_kv_heads);
    });

TEST(NaiveAttention, PeakedSoftmaxDoesNotOverflow) {
  // Scores in the hundreds: exp without max subtraction would overflow float.
  plugins::NaiveAttention naive;
  expect_peaked_softmax_close(naive, kPeakedTolerance);
}

TEST(NaiveAttention, SameResultForAnyThreadCount) {
  plugins::NaiveAttention naive;
  expect_same_result_for_any_thread_count(naive);
}

TEST(NaiveAttention, SingleTokenContextCopiesItsValue) {
  // One visible position: the softmax weight is exactly 1, so out == V of that position.
  AttentionProblemSpec s;
  s.seqs = {{1, 1}};
  s.n_heads = 4;
  s.n_kv_heads = 2;
  s.head_dim = 8;
  AttentionProblem problem(s);
  plugins::NaiveAttention naive;
  CpuDevice device(1);
  const std::vector<float> out = run_attention(naive, problem, device);
  const KvLayerView kv = problem.kv();
  const int slot = problem.batch().table(0)[0] * s.block_size;
  for (int h = 0; h < 4; ++h)
    for (int c = 0; c < 8; ++c) EXPECT_FLOAT_EQ(out[h * 8 + c], kv.v_at(slot, h / 2)[c]);
}

TEST(NaiveAttention, EmptyBatchWritesNothing) {
  plugins::NaiveAttention naive;
  expect_empty_batch_writes_nothing(naive);
}

TEST(NaiveAttention, RejectsShortBlockTable) {
  plugins::NaiveAttention naive;
  expect_rejects_short_block_table(naive);
}

}  // namespace
}  // namespace inferlab::testing
