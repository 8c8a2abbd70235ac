#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "inferlab/error.h"
#include "inferlab/support/rng.h"
#include "kernels/ref/ops.h"
#include "plugins/common/quantization/float_linear.h"

namespace inferlab {
namespace {

TEST(NoQuantization, ForwardMatchesReferenceMatmul) {
  CpuDevice device(2);
  const int n = 5, out = 37, in = 67;
  Rng rng(3);
  std::vector<float> x(n * in), w(out * in);
  for (float& v : x) v = static_cast<float>(rng.normal());
  for (float& v : w) v = static_cast<float>(0.1 * rng.normal());
  std::vector<float> want(n * out), got(n * out, std::nanf(""));
  ref::matmul(x.data(), w.data(), want.data(), n, out, in);

  NoQuantization quant;
  auto linear = quant.make_linear("layers.0.wq", w, out, in);
  EXPECT_EQ(linear->out_features(), out);
  EXPECT_EQ(linear->in_features(), in);
  EXPECT_EQ(linear->weight_bytes(), 4u * out * in);
  linear->forward(x.data(), got.data(), n, device);
  for (int i = 0; i < n * out; ++i) EXPECT_NEAR(got[i], want[i], 1e-4f) << i;
}

TEST(NoQuantization, RejectsMismatchedWeight) {
  NoQuantization quant;
  EXPECT_THROW(quant.make_linear("w", std::vector<float>(10), 3, 4), Error);
}

}  // namespace
}  // namespace inferlab
