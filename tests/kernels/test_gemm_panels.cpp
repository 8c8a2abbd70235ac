// The packed-panel fp32 GEMM (kernels/cpu/gemm_panels_f32.h) against the double-accumulating
// reference, over shapes that are not multiples of the tiles.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "inferlab/error.h"
#include "inferlab/support/rng.h"
#include "inferlab/thread_pool.h"
#include "kernels/cpu/gemm_panels_f32.h"
#include "kernels/cpu/gemm_vec.h"
#include "kernels/cpu/matmul.h"
#include "kernels/ref/ops.h"
#include "matmul_checks.h"

namespace inferlab {
namespace {

using testing::random_normal;

std::vector<float> gemm(const std::vector<float>& x, const std::vector<float>& w, int n, int out, int in,
                        ThreadPool& pool) {
  const auto packed = cpu::pack_panels_f32(w.data(), out, in);
  std::vector<float> y(static_cast<std::size_t>(n) * out, std::numeric_limits<float>::quiet_NaN());
  cpu::gemm_panels_f32(x.data(), packed, y.data(), n, pool);
  return y;
}

void expect_matches_reference(int n, int out, int in, ThreadPool& pool) {
  SCOPED_TRACE("n=" + std::to_string(n) + " out=" + std::to_string(out) + " in=" + std::to_string(in));
  const auto x = random_normal(static_cast<std::size_t>(n) * in, 5 + n);
  const auto w = random_normal(static_cast<std::size_t>(out) * in, 7 + out);
  testing::expect_matmul_matches_reference(x, w, gemm(x, w, n, out, in, pool), n, out, in);
}

TEST(GemmPanels, MatchesReferenceOnAwkwardShapes) {
  ThreadPool pool(3);
  // Rows around the row tile (6 or 8), outputs around the panel (16 or 32), inputs around the
  // 256-channel cache block.
  const int rows[] = {1, 2, 5, 7, 8, 9, 13, 17, 33};
  const int shapes[][2] = {{1, 1}, {7, 13}, {16, 9}, {31, 255}, {32, 256}, {33, 257}, {67, 600}};
  for (int n : rows)
    for (const auto& s : shapes) expect_matches_reference(n, s[0], s[1], pool);
}

TEST(GemmPanels, FewRowsMatchReferenceAtEveryRowCount) {
  // k = 1..16 rows (speculative verification, beam branches, a few sequences): one row tile
  // runs groups of full panels at once (gemm_panels_impl.h few_rows), the rest one at a time.
  // out: 9 full panels (groups of 4, 3 and 2 leave a remainder) and a narrow one; in: two
  // cache blocks and a tail.
  const int out = 9 * cpu::gemm::kPanel + 5, in = 2 * 256 + 37;
  ThreadPool one(1), three(3);
  for (int n = 1; n <= 16; ++n) {
    expect_matches_reference(n, out, in, one);
    expect_matches_reference(n, out, in, three);
  }
}

TEST(GemmPanels, FewRowsGiveEachRowTheBitsItGetsAlone) {
  // A row's sums are those of its decode pass whatever the rows beside it (the group kernel
  // keeps micro_tile's order), for every row count of one row tile and beyond.
  const int out = 9 * cpu::gemm::kPanel + 5, in = 2 * 256 + 37;
  const auto w = random_normal(static_cast<std::size_t>(out) * in, 11);
  ThreadPool pool(2);
  for (int n = 2; n <= 16; ++n) {
    const auto x = random_normal(static_cast<std::size_t>(n) * in, 100 + n);
    const auto y = gemm(x, w, n, out, in, pool);
    for (int r : {0, n / 2, n - 1}) {
      const std::vector<float> row(x.begin() + static_cast<long>(r) * in, x.begin() + static_cast<long>(r + 1) * in);
      EXPECT_EQ(gemm(row, w, 1, out, in, pool),
                std::vector<float>(y.begin() + static_cast<long>(r) * out, y.begin() + static_cast<long>(r + 1) * out))
          << "n " << n << " row " << r;
    }
  }
}

TEST(GemmPanels, ModelShapeWithManyRows) {
  ThreadPool pool(2);
  expect_matches_reference(130, 96, 576, pool);
}

TEST(GemmPanels, BitwiseSameForAnyThreadCountAndBatchSize) {
  // Each output's summation order is fixed by the layout: threads and the batch a row is part
  // of do not change it, so prefill and decode agree bit for bit.
  const int n = 29, out = 83, in = 700;
  const auto x = random_normal(static_cast<std::size_t>(n) * in, 3);
  const auto w = random_normal(static_cast<std::size_t>(out) * in, 4);
  ThreadPool one(1), four(4);
  const auto y1 = gemm(x, w, n, out, in, one);
  EXPECT_EQ(y1, gemm(x, w, n, out, in, four));
  for (int r : {0, 9, 28}) {
    const std::vector<float> row(x.begin() + static_cast<long>(r) * in, x.begin() + static_cast<long>(r + 1) * in);
    const auto alone = gemm(row, w, 1, out, in, four);
    EXPECT_EQ(alone, std::vector<float>(y1.begin() + static_cast<long>(r) * out, y1.begin() + static_cast<long>(r + 1) * out))
        << "row " << r;
  }
}

TEST(GemmPanels, PackKeepsEveryWeightOnce) {
  const int out = 37, in = 5;
  const auto w = random_normal(static_cast<std::size_t>(out) * in, 9);
  const auto packed = cpu::pack_panels_f32(w.data(), out, in);
  EXPECT_EQ(packed.data.size(), w.size());
  // Channel o, input k sits in panel o / kPanel at [k][o % kPanel] of a panel cols wide.
  for (int o = 0; o < out; ++o)
    for (int k = 0; k < in; ++k) {
      const int p0 = o / cpu::gemm::kPanel * cpu::gemm::kPanel, cols = std::min(cpu::gemm::kPanel, out - p0);
      EXPECT_EQ(packed.data[static_cast<std::size_t>(p0) * in + static_cast<std::size_t>(k) * cols + (o - p0)],
                w[static_cast<std::size_t>(o) * in + k]);
    }
}

TEST(GemmPanels, RejectsEmptyShapesAndIgnoresZeroRows) {
  const std::vector<float> w(12, 1.0f);
  EXPECT_THROW(cpu::pack_panels_f32(w.data(), 0, 4), Error);
  EXPECT_THROW(cpu::pack_panels_f32(w.data(), 3, -1), Error);
  ThreadPool pool(2);
  const auto packed = cpu::pack_panels_f32(w.data(), 3, 4);
  std::vector<float> y(1, 5.0f);
  cpu::gemm_panels_f32(nullptr, packed, y.data(), 0, pool);
  EXPECT_EQ(y[0], 5.0f);
}

}  // namespace
}  // namespace inferlab
