// Flash attention against the double-precision reference (kernels/ref/attention) and against
// naive attention, over awkward shapes: 1, 3, 129 query rows, partial blocks, block sizes
// 1/3/16, tiles that do and do not divide blocks, GQA, mixed prefill/decode/verify batches,
// shuffled block tables. Loads nothing from the registry.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "attention_checks.h"
#include "flash_attention.h"
#include "inferlab/error.h"
#include "inferlab/registry.h"
#include "test_support.h"

namespace inferlab::testing {
namespace {

constexpr double kTolerance = 1e-5;
// Scores reach ~150 in the peaked test; a float score carries an absolute error of about
// |score| * 1e-7 * (summation length), and exp turns it into the same relative weight error,
// so no float kernel meets 1e-5 there. That test is about overflow, not precision.
constexpr double kPeakedTolerance = 1e-4;

// (block_size, heads, tile, query_rows)
class FlashAttentionShapes
    : public ::testing::TestWithParam<std::tuple<int, Heads, int, int>> {
 protected:
  AttentionProblemSpec spec(std::vector<SeqShape> seqs, std::uint64_t seed) const {
    return problem_spec(std::move(seqs), std::get<0>(GetParam()), std::get<1>(GetParam()), seed);
  }
  void expect_matches_reference(const AttentionProblemSpec& s) const {
    plugins::FlashAttention flash(std::get<2>(GetParam()), std::get<3>(GetParam()));
    expect_attention_matches_reference(flash, s, kTolerance);
  }
};

TEST_P(FlashAttentionShapes, SingleDecodeRow) {
  expect_matches_reference(spec({{1, 1}}, 1));
  expect_matches_reference(spec({{37, 1}}, 2));
}

TEST_P(FlashAttentionShapes, ThreeRowChunkAndWholePrefill) {
  expect_matches_reference(spec({{3, 3}}, 3));
  expect_matches_reference(spec({{129, 129}}, 4));
}

TEST_P(FlashAttentionShapes, MixedPrefillDecodeAndVerifyBatch) {
  expect_matches_reference(spec(mixed_step_shapes(), 5));
}

INSTANTIATE_TEST_SUITE_P(
    BlocksGqaTiles, FlashAttentionShapes,
    ::testing::Combine(::testing::Values(1, 3, 16), ::testing::Values(Heads{8, 2}, Heads{9, 3}),
                       ::testing::Values(1, 7, 64), ::testing::Values(3, 16)),
    [](const auto& info) {
      const Heads h = std::get<1>(info.param);
      return "bs" + std::to_string(std::get<0>(info.param)) + "_h" + std::to_string(h.n_heads) +
             "_kv" + std::to_string(h.n_kv_heads) + "_tile" +
             std::to_string(std::get<2>(info.param)) + "_qr" +
             std::to_string(std::get<3>(info.param));
    });

TEST(FlashAttention, AgreesWithNaiveOnLongContexts) {
  AttentionProblemSpec s;
  s.seqs = {{2000, 5}, {1500, 1}, {700, 64}, {33, 33}};
  s.n_heads = 8;
  s.n_kv_heads = 4;
  s.head_dim = 64;
  s.block_size = 16;
  AttentionProblem problem(s);
  plugins::FlashAttention flash;
  CpuDevice device(2);
  // naive as a user gets it: loaded through the registry (no plugin compiles another's source).
  Registry reg({testing::plugin_dir()});
  auto naive = reg.create_attention("naive", reg.resolve(PluginKind::kAttention, "naive", {}, "test"), device);
  const std::vector<float> f = run_attention(flash, problem, device);
  const std::vector<float> n = run_attention(*naive, problem, device);
  EXPECT_EQ(count_non_finite(f), 0u);
  EXPECT_LT(max_relative_error(f, n), kTolerance);
  EXPECT_LT(max_relative_error(f, reference_output(problem)), kTolerance);
}

TEST(FlashAttention, PeakedSoftmaxRescalesWithoutOverflow) {
  // Scores in the hundreds, the max moving between tiles: exercises the running-max rescale.
  AttentionProblemSpec s;
  s.seqs = {{200, 4}, {50, 1}};
  s.q_scale = 80.0f;
  s.head_dim = 64;
  AttentionProblem problem(s);
  plugins::FlashAttention flash(8, 2);
  CpuDevice device(2);
  const std::vector<float> got = run_attention(flash, problem, device);
  EXPECT_EQ(count_non_finite(got), 0u);
  EXPECT_LT(max_relative_error(got, reference_output(problem)), kPeakedTolerance);
}

TEST(FlashAttention, TileLargerThanContext) {
  AttentionProblemSpec s;
  s.seqs = {{10, 2}, {5, 5}};
  AttentionProblem problem(s);
  plugins::FlashAttention flash(4096, 1024);
  CpuDevice device(2);
  EXPECT_LT(max_relative_error(run_attention(flash, problem, device), reference_output(problem)),
            kTolerance);
}

TEST(FlashAttention, SameResultForAnyThreadCount) {
  AttentionProblemSpec s;
  s.seqs = mixed_step_shapes();
  AttentionProblem problem(s);
  plugins::FlashAttention flash(16, 4);
  CpuDevice one(1), three(3);
  EXPECT_EQ(run_attention(flash, problem, one), run_attention(flash, problem, three));
}

TEST(FlashAttention, RejectsOutOfRangeParameters) {
  EXPECT_THROW(plugins::FlashAttention(0, 16), Error);
  EXPECT_THROW(plugins::FlashAttention(4097, 16), Error);
  EXPECT_THROW(plugins::FlashAttention(64, 0), Error);
  EXPECT_EQ(plugins::FlashAttention().tile(), plugins::FlashAttention::kDefaultTile);
}

TEST(FlashAttention, EmptyBatchWritesNothing) {
  AttentionProblemSpec s;
  s.seqs = {{5, 0}};
  AttentionProblem problem(s);
  plugins::FlashAttention flash;
  CpuDevice device(2);
  EXPECT_TRUE(run_attention(flash, problem, device).empty());
}

TEST(FlashAttention, RejectsShortBlockTable) {
  AttentionProblemSpec s;
  s.seqs = {{20, 1}};
  s.block_size = 8;
  AttentionProblem problem(s);
  AttentionBatch batch = problem.batch();
  const std::vector<int> lens = {40};  // needs 5 blocks, table has 3
  batch.context_len = lens;
  plugins::FlashAttention flash;
  CpuDevice device(1);
  std::vector<float> out(problem.out_size());
  EXPECT_THROW(flash.forward(batch, problem.kv(), problem.q(), out.data(), device), Error);
}

}  // namespace
}  // namespace inferlab::testing
