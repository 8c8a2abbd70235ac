// Checks shared by the fp32 matmul kernel tests (tests/kernels/test_matmul.cpp,
// test_gemm_panels.cpp).
#pragma once
#include <cstdint>
#include <vector>

namespace inferlab::testing {

// count normal floats of standard deviation `scale` drawn with inferlab::Rng(seed).
std::vector<float> random_normal(std::size_t count, std::uint64_t seed, double scale = 1.0);

// Checks y [n, out] from a fast fp32 matmul of x [n, in] and W [out, in] against
// kernels/ref matmul (double accumulation), within 1e-5 * sum_k |x_k w_k| + 1e-6 per output (the
// size of a float dot product's rounding error), and that every output is finite (a NaN-filled
// y shows unwritten outputs). Reports the first 5 misses and expects none.
void expect_matmul_matches_reference(const std::vector<float>& x, const std::vector<float>& w,
                                     const std::vector<float>& y, int n, int out, int in);

}  // namespace inferlab::testing
