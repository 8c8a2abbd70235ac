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
#include "kernels/ref/token_choice.h"
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

// The decoders' host choice is the reference's, exactly: argmax by its rule, and the untruncated
// draw (sample_token without top-k / top-p) is ref::sample_row with the same uniform — the very
// arithmetic the GPU kernels run (kernels/ref/token_choice.h).
TEST(RefOpsFused, TokenChoiceIsTheDecodersOwn) {
  std::vector<std::pair<float, int>> scratch;
  int compared = 0;
  for (const std::vector<float>& row : testing::token_choice_rows()) {
    const int vocab = static_cast<int>(row.size());
    EXPECT_EQ(ref::argmax(row.data(), vocab), argmax(row.data(), vocab));
    for (double t : {0.5, 1.0, 2.0})
      for (std::uint64_t seed = 1; seed <= 20; ++seed) {
        Rng a(seed), b(seed);
        const int want = ref::sample_row(row.data(), vocab, t, a.uniform());
        SamplingParams p;
        p.temperature = t;
        EXPECT_EQ(sample_token(row.data(), vocab, p, b, scratch), want) << "vocab " << vocab << " T " << t;
        p.top_k = vocab;  // keeps every token: the same draw
        Rng c(seed);
        EXPECT_EQ(sample_token(row.data(), vocab, p, c, scratch), want) << "vocab " << vocab << " T " << t;
        ++compared;
      }
  }
  EXPECT_EQ(compared, 16 * 60);
}

// sample_weight is exp to within an ulp or two over the range a draw uses, and 0 where a weight
// is negligible or undefined.
TEST(RefOpsFused, SampleWeightIsExp) {
  Rng rng(3);
  for (int i = 0; i < 20000; ++i) {
    const double x = i < 10 ? -static_cast<double>(i) : -700.0 * rng.uniform() * rng.uniform();
    const double want = std::exp(x), got = ref::sample_weight(x);
    EXPECT_NEAR(got, want, 4e-16 * want) << "x " << x;
  }
  EXPECT_EQ(ref::sample_weight(0.0), 1.0);
  EXPECT_EQ(ref::sample_weight(-700.5), 0.0);
  EXPECT_EQ(ref::sample_weight(-INFINITY), 0.0);
  EXPECT_EQ(ref::sample_weight(std::nan("")), 0.0);
}

// The chunked draw: each token at its softmax frequency (rows shorter and longer than the 256
// chunks), NaN and -inf never drawn, and a row without a finite weight gives vocab - 1.
TEST(RefOpsFused, SampleRowDrawsTheSoftmax) {
  Rng rng(9);
  for (int vocab : {5, 700}) {
    std::vector<float> row(static_cast<std::size_t>(vocab));
    for (float& x : row) x = static_cast<float>(rng.normal());
    row[1] = 4.0f;  // one likely token
    if (vocab > 5) row[600] = 3.5f;
    const double t = 0.7;
    std::vector<double> p(row.size());
    double sum = 0;
    for (std::size_t i = 0; i < row.size(); ++i) sum += p[i] = std::exp((row[i] - 4.0) / t);
    std::vector<double> freq(row.size(), 0.0);
    const int draws = 40000;
    for (int d = 0; d < draws; ++d) freq[static_cast<std::size_t>(ref::sample_row(row.data(), vocab, t, rng.uniform()))] += 1.0 / draws;
    for (std::size_t i : {std::size_t{0}, std::size_t{1}, row.size() - 1}) {
      EXPECT_NEAR(freq[i], p[i] / sum, 0.01) << i;
    }
    if (vocab > 5) {
      EXPECT_NEAR(freq[600], p[600] / sum, 0.01);
    }
  }
  std::vector<float> odd = {1.0f, std::nanf(""), -INFINITY, 1.0f};
  for (double u : {0.0, 0.3, 0.49, 0.51, 0.999}) {
    EXPECT_EQ(ref::sample_row(odd.data(), 4, 1.0, u), u < 0.5 ? 0 : 3) << u;
  }
  std::vector<float> inf = {0.0f, INFINITY, 1.0f}, none = {-INFINITY, std::nanf(""), -INFINITY};
  EXPECT_EQ(ref::sample_row(inf.data(), 3, 1.0, 0.2), 2);
  EXPECT_EQ(ref::sample_row(none.data(), 3, 1.0, 0.2), 2);
}

}  // namespace
}  // namespace inferlab
