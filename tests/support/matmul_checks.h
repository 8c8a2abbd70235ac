// Checks shared by the matmul kernel tests (tests/kernels/test_matmul.cpp, test_gemm_panels.cpp;
// the int4 sweep: test_matmul_int4.cpp, test_gemm_int4_panels.cpp).
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "inferlab/thread_pool.h"

namespace inferlab::testing {

// count normal floats of standard deviation `scale` drawn with inferlab::Rng(seed).
std::vector<float> random_normal(std::size_t count, std::uint64_t seed, double scale = 1.0);

// Checks y [n, out] from a fast fp32 matmul of x [n, in] and W [out, in] against
// kernels/ref matmul (double accumulation), within 1e-5 * sum_k |x_k w_k| + 1e-6 per output (the
// size of a float dot product's rounding error), and that every output is finite (a NaN-filled
// y shows unwritten outputs). Reports the first 5 misses and expects none.
void expect_matmul_matches_reference(const std::vector<float>& x, const std::vector<float>& w,
                                     const std::vector<float>& y, int n, int out, int in);

// Every got[i] finite and within tolerance x max(1, max |want|) of want[i] (an integer-activation
// kernel against its reference: the same integer sums, fp32 sums in another order).
inline void expect_near_scaled(const std::vector<float>& got, const std::vector<float>& want, double tolerance) {
  ASSERT_EQ(got.size(), want.size());
  double mag = 0;
  for (float v : want) mag = std::max(mag, std::fabs(static_cast<double>(v)));
  for (std::size_t i = 0; i < want.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << i;
    ASSERT_NEAR(got[i], want[i], tolerance * std::max(1.0, mag)) << i;
  }
}

// An int4 matmul case: n token rows against out x in weights in groups of gs.
struct Int4Shape {
  int n, out, in, gs;
};

// check(shape, symmetric, pool) for every shape, symmetric and with zero points, on 1 and 3
// threads, each under a SCOPED_TRACE that names it.
template <class Check>
void for_each_int4_case(std::span<const Int4Shape> shapes, const Check& check) {
  for (bool symmetric : {true, false})
    for (int threads : {1, 3})
      for (const Int4Shape& s : shapes) {
        SCOPED_TRACE("n " + std::to_string(s.n) + " out " + std::to_string(s.out) + " in " + std::to_string(s.in) +
                     " gs " + std::to_string(s.gs) + (symmetric ? " sym" : " asym") + ", " +
                     std::to_string(threads) + " threads");
        ThreadPool pool(threads);
        check(s, symmetric, pool);
      }
}

}  // namespace inferlab::testing
