// The reference math of the fused decode ops (kernels/ref/ops_fused.h) against the CPU device's
// fused ops, within the tolerance tests/support/fused_checks.h states: the same cases the CUDA
// test (tests/cuda/test_cuda_fused.cpp) runs on a GPU, so the reference it compares against is
// itself checked on every machine. Likewise the token choice (ref::argmax, ref::sample_row)
// against the decoders' own (plugins/common/decoding/sampling.h).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "fused_checks.h"
#include "inferlab/device/device.h"
#include "inferlab/support/rng.h"
#include "kernels/ref/ops_fused.h"
#include "plugins/common/decoding/sampling.h"

namespace inferlab {
namespace {

TEST(RefOpsFused, CpuFusedOpsMatchTheReferenceMath) {
  for (int threads : {1, 2}) {
    SCOPED_TRACE(std::to_string(threads) + " threads");
    CpuDevice device(threads);
    testing::expect_fused_ops_match_reference(device);
  }
}

TEST(RefOpsFused, TokenChoiceIsTheDecodersOwn) {
  std::vector<std::pair<float, int>> scratch;
  int compared = 0;
  for (const std::vector<float>& row : testing::token_choice_rows()) {
    const int vocab = static_cast<int>(row.size());
    EXPECT_EQ(ref::argmax(row.data(), vocab), argmax(row.data(), vocab));
    if (std::isnan(row[0]) || std::isnan(row[std::min<std::size_t>(3, row.size() - 1)])) continue;  // sampling NaNs: undefined
    for (double t : {0.5, 1.0, 2.0})
      for (std::uint64_t seed = 1; seed <= 20; ++seed) {
        Rng a(seed), b(seed);
        double margin = 0;
        const int want = ref::sample_row(row.data(), vocab, t, a.uniform(), &margin);
        SamplingParams p;
        p.temperature = t;
        const int got = sample_token(row.data(), vocab, p, b, scratch);
        // The decoders round each weight to float: a draw within 1e-6 of a boundary may differ.
        if (margin > 1e-6) {
          EXPECT_EQ(got, want) << "vocab " << vocab << " T " << t << " seed " << seed;
          ++compared;
        }
      }
  }
  EXPECT_GT(compared, 300);
}

}  // namespace
}  // namespace inferlab
