// matmul_f32 (kernels/cpu) against the double-accumulating reference over awkward shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "inferlab/support/rng.h"
#include "inferlab/thread_pool.h"
#include "kernels/cpu/matmul.h"
#include "kernels/ref/ops.h"
#include "matmul_checks.h"

namespace inferlab {
namespace {

using testing::random_normal;

void expect_matches_reference(int n, int out, int in, ThreadPool& pool) {
  SCOPED_TRACE("n=" + std::to_string(n) + " out=" + std::to_string(out) + " in=" + std::to_string(in) +
               " threads=" + std::to_string(pool.size()));
  const auto x = random_normal(static_cast<std::size_t>(n) * in, 11 + n);
  const auto w = random_normal(static_cast<std::size_t>(out) * in, 29 + out);
  std::vector<float> got(static_cast<std::size_t>(n) * out, std::numeric_limits<float>::quiet_NaN());
  cpu::matmul_f32(x.data(), w.data(), got.data(), n, out, in, pool);
  testing::expect_matmul_matches_reference(x, w, got, n, out, in);
}

TEST(Matmul, MatchesReferenceOnAwkwardShapes) {
  ThreadPool pool(3);
  const int rows[] = {1, 2, 3, 5, 17, 129};
  const int shapes[][2] = {{1, 1}, {1, 9}, {7, 13}, {9, 8}, {33, 65}, {67, 129}, {130, 300}};
  for (int n : rows)
    for (const auto& s : shapes) expect_matches_reference(n, s[0], s[1], pool);
}

TEST(Matmul, SameResultForAnyThreadCount) {
  // Threads split output channels, so each output's summation order is fixed: bitwise equal.
  const int n = 17, out = 291, in = 203;
  const auto x = random_normal(static_cast<std::size_t>(n) * in, 3);
  const auto w = random_normal(static_cast<std::size_t>(out) * in, 4);
  std::vector<float> y1(static_cast<std::size_t>(n) * out), y4(y1.size());
  ThreadPool one(1), four(4);
  cpu::matmul_f32(x.data(), w.data(), y1.data(), n, out, in, one);
  cpu::matmul_f32(x.data(), w.data(), y4.data(), n, out, in, four);
  EXPECT_EQ(y1, y4);
  expect_matches_reference(n, out, in, one);
}

TEST(Matmul, ModelShapesIncludingWideOutputs) {
  ThreadPool pool(2);
  expect_matches_reference(3, 512, 64, pool);   // stories260K classifier
  expect_matches_reference(4, 64, 172, pool);   // stories260K w2
  expect_matches_reference(1, 768, 288, pool);  // stories15M w1
}

TEST(Matmul, ZeroRowsIsANoOp) {
  ThreadPool pool(2);
  std::vector<float> w(12, 1.0f), y(1, 5.0f);
  cpu::matmul_f32(nullptr, w.data(), y.data(), 0, 3, 4, pool);
  EXPECT_EQ(y[0], 5.0f);
}

}  // namespace
}  // namespace inferlab
