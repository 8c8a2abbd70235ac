#include "matmul_checks.h"

#include <gtest/gtest.h>

#include <cmath>

#include "inferlab/support/rng.h"
#include "kernels/ref/ops.h"

namespace inferlab::testing {

std::vector<float> random_normal(std::size_t count, std::uint64_t seed, double scale) {
  Rng rng(seed);
  std::vector<float> v(count);
  for (float& x : v) x = static_cast<float>(scale * rng.normal());
  return v;
}

void expect_matmul_matches_reference(const std::vector<float>& x, const std::vector<float>& w,
                                     const std::vector<float>& y, int n, int out, int in) {
  std::vector<float> want(static_cast<std::size_t>(n) * out);
  ref::matmul(x.data(), w.data(), want.data(), n, out, in);
  int bad = 0;
  for (int r = 0; r < n; ++r)
    for (int o = 0; o < out; ++o) {
      double mag = 0.0;
      for (int k = 0; k < in; ++k)
        mag += std::fabs(static_cast<double>(x[static_cast<std::size_t>(r) * in + k]) *
                         w[static_cast<std::size_t>(o) * in + k]);
      const std::size_t i = static_cast<std::size_t>(r) * out + o;
      const bool ok = std::isfinite(y[i]) && std::fabs(y[i] - want[i]) <= 1e-5 * mag + 1e-6;
      if (!ok && ++bad <= 5) ADD_FAILURE() << "y[" << r << "," << o << "] = " << y[i] << ", want " << want[i];
    }
  EXPECT_EQ(bad, 0);
}

}  // namespace inferlab::testing
