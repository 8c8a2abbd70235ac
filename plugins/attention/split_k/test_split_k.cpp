// Split-K attention against the double-precision reference (kernels/ref/attention) and against
// naive attention: 1, 3 and 129 query rows, contexts 1, 17, 1000 and 5000, block sizes 1/3/16,
// GQA 8/2 and 9/3, mixed prefill/decode/verify batches, forced splits 1, 2, 7, 64 (more splits
// than tokens included) and auto; the split plan each parameter produces; thread counts 1 and 2.
// Loads nothing from the registry.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "attention_checks.h"
#include "inferlab/error.h"
#include "partial_attention.h"
#include "split_k_attention.h"

namespace inferlab::testing {
namespace {

using plugins::SplitKAttention;

constexpr double kTolerance = 1e-5;
// Scores near 150 (peaked test): float scores carry ~|score| * 1e-7 absolute error per term,
// which exp turns into relative weight error; that test is about the merge's rescale, not
// precision.
constexpr double kPeakedTolerance = 1e-4;

// A batch whose every kind of row takes a different path: long decode, verify, whole prefill,
// a prefill chunk mid-sequence, a one-token context, a context shorter than most split counts.
std::vector<SeqShape> mixed_long_shapes() {
  return {{5000, 1}, {1000, 3}, {129, 129}, {17, 1}, {1, 1}, {600, 40}, {17, 3}};
}

// (block_size, heads, splits)
class SplitKShapes : public ::testing::TestWithParam<std::tuple<int, Heads, int>> {
 protected:
  AttentionProblemSpec spec(std::vector<SeqShape> seqs, std::uint64_t seed) const {
    return problem_spec(std::move(seqs), std::get<0>(GetParam()), std::get<1>(GetParam()), seed);
  }
  void expect_matches_reference(const AttentionProblemSpec& s, int threads = 2) const {
    SplitKAttention attention(std::get<2>(GetParam()));
    expect_attention_matches_reference(attention, s, kTolerance, threads);
  }
};

TEST_P(SplitKShapes, SingleDecodeRowAtEveryContext) {
  for (int ctx : {1, 17, 1000, 5000}) {
    SCOPED_TRACE("context " + std::to_string(ctx));
    expect_matches_reference(spec({{ctx, 1}}, static_cast<std::uint64_t>(ctx)));
  }
}

TEST_P(SplitKShapes, ThreeRowVerifyAtEveryContext) {
  // Earlier rows of a verify chunk do not see the last chunks' positions.
  for (int ctx : {3, 17, 1000, 5000}) {
    SCOPED_TRACE("context " + std::to_string(ctx));
    expect_matches_reference(spec({{ctx, 3}}, 100 + static_cast<std::uint64_t>(ctx)));
  }
}

TEST_P(SplitKShapes, PrefillRowsTakeTheTiledPath) {
  expect_matches_reference(spec({{129, 129}}, 7));
  expect_matches_reference(spec({{1000, 129}}, 8));
}

TEST_P(SplitKShapes, MixedPrefillDecodeAndVerifyBatches) {
  expect_matches_reference(spec(mixed_step_shapes(), 9));
  expect_matches_reference(spec(mixed_long_shapes(), 10), 1);
  expect_matches_reference(spec(mixed_long_shapes(), 11), 2);
}

INSTANTIATE_TEST_SUITE_P(
    BlocksGqaSplits, SplitKShapes,
    ::testing::Combine(::testing::Values(1, 3, 16), ::testing::Values(Heads{8, 2}, Heads{9, 3}),
                       ::testing::Values(0, 1, 2, 7, 64)),
    [](const auto& info) {
      const Heads h = std::get<1>(info.param);
      return "bs" + std::to_string(std::get<0>(info.param)) + "_h" + std::to_string(h.n_heads) +
             "_kv" + std::to_string(h.n_kv_heads) + "_splits" +
             std::to_string(std::get<2>(info.param));
    });

// A batch of the given shapes for plan() only (plan reads rows, contexts and n_kv_heads).
struct PlanBatch {
  std::vector<int> query_start{0};
  std::vector<int> context_len;
  AttentionBatch batch;
  PlanBatch(const std::vector<SeqShape>& seqs, int n_kv_heads) {
    for (const SeqShape& s : seqs) {
      query_start.push_back(query_start.back() + s.query_rows);
      context_len.push_back(s.context_len);
    }
    batch.query_start = query_start;
    batch.context_len = context_len;
    batch.n_heads = 8;
    batch.n_kv_heads = n_kv_heads;
  }
};

TEST(SplitKAttention, ForcedSplitsAreCappedByContextOnly) {
  const PlanBatch b({{5000, 1}, {1000, 3}, {5, 1}, {1, 1}, {129, 129}, {9, 0}}, 2);
  EXPECT_EQ(SplitKAttention(7).plan(b.batch, 2), (std::vector<int>{7, 7, 5, 1, 0, 0}));
  EXPECT_EQ(SplitKAttention(64).plan(b.batch, 1), (std::vector<int>{64, 64, 5, 1, 0, 0}));
  // min_split_tokens does not cap forced splits.
  EXPECT_EQ(SplitKAttention(64, 4096).plan(b.batch, 1), (std::vector<int>{64, 64, 5, 1, 0, 0}));
}

TEST(SplitKAttention, AutoSplitsFillFourItemsPerThread) {
  // 1 sequence x 2 kv heads: 4*threads items need 2*threads splits.
  const PlanBatch one({{5000, 1}}, 2);
  const SplitKAttention automatic;
  EXPECT_EQ(automatic.plan(one.batch, 1), (std::vector<int>{2}));
  EXPECT_EQ(automatic.plan(one.batch, 2), (std::vector<int>{4}));
  EXPECT_EQ(automatic.plan(one.batch, 8), (std::vector<int>{16}));
  // 8 sequences x 4 kv heads = 32 items >= 4 * 8 threads: no splitting needed.
  const PlanBatch eight(std::vector<SeqShape>(8, {5000, 1}), 4);
  EXPECT_EQ(automatic.plan(eight.batch, 8), std::vector<int>(8, 1));
  EXPECT_EQ(automatic.plan(eight.batch, 16), std::vector<int>(8, 2));
}

TEST(SplitKAttention, MinSplitTokensBoundsAutoChunks) {
  const PlanBatch b({{1000, 1}, {300, 2}, {100, 1}}, 1);
  // threads 8: 3 seqs x 1 kv head want ceil(32 / 3) = 11 splits each.
  EXPECT_EQ(SplitKAttention(0, 256).plan(b.batch, 8), (std::vector<int>{3, 1, 1}));
  EXPECT_EQ(SplitKAttention(0, 100).plan(b.batch, 8), (std::vector<int>{10, 3, 1}));
  EXPECT_EQ(SplitKAttention(0, 1).plan(b.batch, 8), (std::vector<int>{11, 11, 11}));
}

TEST(SplitKAttention, MaxQueryRowsChoosesBetweenSplitAndTiledPaths) {
  const PlanBatch b({{1000, 1}, {1000, 3}, {1000, 5}, {1000, 129}}, 2);
  EXPECT_EQ(SplitKAttention(7, 256, 1).plan(b.batch, 2), (std::vector<int>{7, 0, 0, 0}));
  EXPECT_EQ(SplitKAttention(7, 256, 4).plan(b.batch, 2), (std::vector<int>{7, 7, 0, 0}));
  EXPECT_EQ(SplitKAttention(7, 256, 129).plan(b.batch, 2), (std::vector<int>{7, 7, 7, 7}));
}

// Every parameter value above also computes the right attention, on the batch of those tests.
TEST(SplitKAttention, EveryParameterSettingMatchesTheReference) {
  AttentionProblemSpec s;
  s.seqs = {{1000, 1}, {1000, 3}, {1000, 5}, {300, 2}, {100, 1}};
  s.n_heads = 8;
  s.n_kv_heads = 2;
  s.head_dim = 32;
  s.block_size = 16;
  AttentionProblem problem(s);
  const std::vector<float> want = reference_output(problem);
  for (const auto& [splits, min_tokens, max_rows] :
       std::vector<std::tuple<int, int, int>>{{0, 256, 4}, {0, 100, 4}, {0, 1, 4}, {7, 256, 1},
                                              {7, 256, 129}, {64, 4096, 4}, {1, 256, 4}}) {
    SCOPED_TRACE(std::to_string(splits) + "/" + std::to_string(min_tokens) + "/" +
                 std::to_string(max_rows));
    SplitKAttention attention(splits, min_tokens, max_rows);
    for (int threads : {1, 2}) {
      CpuDevice device(threads);
      expect_finite_and_close(run_attention(attention, problem, device), want, kTolerance);
    }
  }
}

TEST(SplitKAttention, AgreesWithNaiveOnLongContexts) {
  AttentionProblemSpec s;
  s.seqs = {{5000, 1}, {4000, 3}, {2000, 5}, {700, 64}, {33, 33}, {16000, 1}};
  s.n_heads = 8;
  s.n_kv_heads = 4;
  s.head_dim = 64;
  s.block_size = 16;
  AttentionProblem problem(s);
  const std::vector<float> want = reference_output(problem);
  for (int threads : {1, 2}) {
    CpuDevice device(threads);
    const std::vector<float> n = registry_naive_output(problem, device);
    for (int splits : {0, 2, 7, 64}) {
      SCOPED_TRACE("threads " + std::to_string(threads) + " splits " + std::to_string(splits));
      SplitKAttention attention(splits);
      const std::vector<float> got = run_attention(attention, problem, device);
      expect_finite_and_close(got, n, kTolerance);
      EXPECT_LT(max_relative_error(got, want), kTolerance);
    }
  }
}

TEST(SplitKAttention, PeakedSoftmaxMergesWithoutOverflow) {
  // Scores in the hundreds: each split's max differs by far more than float exp's range, so
  // a merge that did not rescale by e^(m_j - M) would overflow or lose splits.
  AttentionProblemSpec s;
  s.seqs = {{2000, 1}, {500, 3}, {200, 40}};
  s.q_scale = 80.0f;
  s.head_dim = 64;
  AttentionProblem problem(s);
  CpuDevice device(2);
  for (int splits : {0, 7, 64}) {
    SplitKAttention attention(splits, 16);
    expect_finite_and_close(run_attention(attention, problem, device), reference_output(problem), kPeakedTolerance);
  }
}

TEST(SplitKAttention, ForcedSplitsGiveIdenticalResultsForOneAndTwoThreads) {
  AttentionProblemSpec s;
  s.seqs = mixed_long_shapes();
  AttentionProblem problem(s);
  CpuDevice one(1), two(2);
  for (int splits : {1, 7, 64}) {
    SplitKAttention attention(splits);
    EXPECT_EQ(run_attention(attention, problem, one), run_attention(attention, problem, two));
  }
}

TEST(SplitKAttention, AutoSplitsDependOnThreadsAndStayCorrect) {
  AttentionProblemSpec s;
  s.seqs = {{5000, 1}};
  s.n_kv_heads = 2;
  AttentionProblem problem(s);
  SplitKAttention attention;
  EXPECT_EQ(attention.plan(problem.batch(), 1), (std::vector<int>{2}));
  EXPECT_EQ(attention.plan(problem.batch(), 2), (std::vector<int>{4}));
  const std::vector<float> want = reference_output(problem);
  for (int threads : {1, 2}) {
    CpuDevice device(threads);
    EXPECT_LT(max_relative_error(run_attention(attention, problem, device), want), kTolerance);
  }
}

TEST(SplitKAttention, MergeOfTwoHalvesEqualsOnePass) {
  // The helper directly: partials over [0, 300) and [300, 1000) merged vs [0, 1000) in one go.
  AttentionProblemSpec s;
  s.seqs = {{1000, 2}};
  s.n_heads = 4;
  s.n_kv_heads = 2;
  s.head_dim = 20;  // not a multiple of 16: the column tail loop runs too
  AttentionProblem problem(s);
  const AttentionBatch batch = problem.batch();
  const plugins::split_k::QueryBlock block{0, 1, 0, 2};
  const int vectors = block.vectors(2);
  std::vector<float> m(3 * static_cast<std::size_t>(vectors)), l(m.size()), acc(m.size() * 20);
  const auto view = [&](int i) {
    const auto o = static_cast<std::size_t>(i * vectors);
    return plugins::split_k::PartialView{m.data() + o, l.data() + o, acc.data() + o * 20};
  };
  plugins::split_k::RangeScratch scratch;
  const int ranges[3][2] = {{0, 300}, {300, 1000}, {0, 1000}};
  for (int i = 0; i < 3; ++i) {
    plugins::split_k::reset_partial(view(i), vectors, 20);
    plugins::split_k::attend_range(batch, problem.kv(), problem.q(), block, ranges[i][0],
                                   ranges[i][1], view(i), scratch);
  }
  std::vector<float> merged(problem.out_size(), 0.0f), whole(problem.out_size(), 0.0f);
  const std::vector<plugins::split_k::PartialView> halves = {view(0), view(1)};
  plugins::split_k::merge_partials(batch, block, halves, merged.data());
  plugins::split_k::write_normalised(batch, block, view(2), whole.data());
  // Both sides sum the same 1000 exp-weighted terms in fp32, in a different order and with the
  // halves rescaled by exp(m_half - m): rounding differs by a random walk of about sqrt(n)
  // steps of FLT_EPSILON per sum, times a small factor for the rescale and the final division.
  // A fixed 1e-6 (~8 eps) failed at 1.07e-6 in a sanitizer build (different code generation).
  const double bound = 8.0 * std::sqrt(1000.0) * std::numeric_limits<float>::epsilon();  // ~3.0e-5
  EXPECT_LT(max_relative_error(merged, whole), bound);
  // Row 0 sits at position 998: position 999 is outside its causal range, so its second
  // partial saw 698 positions, not 700 (its denominator is a sum of at most 698 terms <= 1).
  EXPECT_LE(l[static_cast<std::size_t>(vectors)], 698.0f);
}

TEST(SplitKAttention, RejectsOutOfRangeParameters) {
  EXPECT_THROW(SplitKAttention(-1), Error);
  EXPECT_THROW(SplitKAttention(4097), Error);
  EXPECT_THROW(SplitKAttention(0, 0), Error);
  EXPECT_THROW(SplitKAttention(0, 256, 0), Error);
  const SplitKAttention defaults;
  EXPECT_EQ(defaults.splits(), 0);
  EXPECT_EQ(defaults.min_split_tokens(), 256);
  EXPECT_EQ(defaults.max_query_rows(), 4);
}

TEST(SplitKAttention, EmptyBatchWritesNothing) {
  SplitKAttention attention(7);
  expect_empty_batch_writes_nothing(attention);
}

TEST(SplitKAttention, RejectsShortBlockTable) {
  SplitKAttention attention;
  expect_rejects_short_block_table(attention);
}

}  // namespace
}  // namespace inferlab::testing
