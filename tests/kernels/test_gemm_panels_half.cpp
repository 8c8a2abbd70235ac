// The packed-panel half-precision-weight GEMM (kernels/cpu/gemm_panels_half.h): bit for bit the
// fp32 panel GEMM over the widened weights (same FMAs in the same order), for f16 and bf16,
// over shapes that are not multiples of the tiles, at any thread count.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <vector>

#include "inferlab/error.h"
#include "inferlab/support/rng.h"
#include "inferlab/thread_pool.h"
#include "kernels/cpu/decode_prefetch.h"
#include "kernels/cpu/gemm_panels_f32.h"
#include "kernels/cpu/gemm_panels_half.h"
#include "kernels/ref/half.h"
#include "matmul_checks.h"

namespace inferlab {
namespace {

using testing::random_normal;

struct Case {
  std::vector<std::uint16_t> bits;  // W [out, in] in the half format, row-major
  std::vector<float> widened;       // the same weights as fp32
};

Case make_weights(int out, int in, cpu::HalfFormat format, std::uint64_t seed) {
  Case c;
  for (float v : random_normal(static_cast<std::size_t>(out) * in, seed)) {
    const std::uint16_t h = format == cpu::HalfFormat::kF16 ? ref::float_to_f16(v) : ref::float_to_bf16(v);
    c.bits.push_back(h);
    c.widened.push_back(format == cpu::HalfFormat::kF16 ? ref::f16_to_float(h) : ref::bf16_to_float(h));
  }
  return c;
}

std::vector<float> run_half(const std::vector<float>& x, const Case& c, int n, int out, int in,
                            cpu::HalfFormat format, ThreadPool& pool) {
  const auto packed = cpu::pack_panels_half(c.bits.data(), out, in, format);
  std::vector<float> y(static_cast<std::size_t>(n) * out, std::numeric_limits<float>::quiet_NaN());
  cpu::gemm_panels_half(x.data(), packed, y.data(), n, pool);
  return y;
}

std::vector<float> run_f32(const std::vector<float>& x, const std::vector<float>& w, int n, int out, int in,
                           ThreadPool& pool) {
  const auto packed = cpu::pack_panels_f32(w.data(), out, in);
  std::vector<float> y(static_cast<std::size_t>(n) * out, std::numeric_limits<float>::quiet_NaN());
  cpu::gemm_panels_f32(x.data(), packed, y.data(), n, pool);
  return y;
}

class GemmPanelsHalf : public ::testing::TestWithParam<cpu::HalfFormat> {};

TEST_P(GemmPanelsHalf, BitwiseTheFp32GemmOverTheWidenedWeights) {
  const cpu::HalfFormat format = GetParam();
  ThreadPool pool(3);
  const int rows[] = {1, 2, 7, 8, 9, 17};
  const int shapes[][2] = {{1, 1}, {7, 13}, {31, 255}, {32, 256}, {33, 257}, {130, 600}};
  for (int n : rows)
    for (const auto& s : shapes) {
      const int out = s[0], in = s[1];
      SCOPED_TRACE("n=" + std::to_string(n) + " out=" + std::to_string(out) + " in=" + std::to_string(in));
      const Case c = make_weights(out, in, format, 11 + out);
      const auto x = random_normal(static_cast<std::size_t>(n) * in, 5 + n);
      const auto got = run_half(x, c, n, out, in, format, pool);
      const auto want = run_f32(x, c.widened, n, out, in, pool);
      ASSERT_EQ(got, want);
      testing::expect_matmul_matches_reference(x, c.widened, got, n, out, in);
    }
}

TEST_P(GemmPanelsHalf, FewRowsMatchReferenceAtEveryRowCount) {
  // k = 1..16 rows: groups of full panels at once (gemm_panels_impl.h few_rows) with the
  // half-precision loads, a remainder of panels and a narrow one, two cache blocks and a tail.
  const cpu::HalfFormat format = GetParam();
  const int out = 9 * 32 + 5, in = 2 * 256 + 37;
  const Case c = make_weights(out, in, format, 21);
  ThreadPool pool(3);
  for (int n = 1; n <= 16; ++n) {
    SCOPED_TRACE("n=" + std::to_string(n));
    const auto x = random_normal(static_cast<std::size_t>(n) * in, 50 + n);
    testing::expect_matmul_matches_reference(x, c.widened, run_half(x, c, n, out, in, format, pool), n, out, in);
  }
}

// few_rows' software prefetch (decode_prefetch.h; on by default) reads nothing into the sums:
// the same bits with it, without it and with a distance past the matrix's end.
TEST_P(GemmPanelsHalf, FewRowsWithOrWithoutPrefetchGiveTheSameBits) {
  const cpu::HalfFormat format = GetParam();
  const int out = 9 * 32 + 5, in = 2 * 256 + 37;
  const Case c = make_weights(out, in, format, 23);
  ThreadPool pool(2);
  for (int n : {1, 4, 8}) {
    const auto x = random_normal(static_cast<std::size_t>(n) * in, 70 + n);
    ASSERT_EQ(cpu::decode_prefetch_bytes(), cpu::kDecodePrefetch);
    const auto with = run_half(x, c, n, out, in, format, pool);
    cpu::set_decode_prefetch(0);
    const auto without = run_half(x, c, n, out, in, format, pool);
    cpu::set_decode_prefetch(1 << 24);
    const auto far = run_half(x, c, n, out, in, format, pool);
    cpu::set_decode_prefetch(cpu::kDecodePrefetch);
    EXPECT_EQ(with, without) << "n " << n;
    EXPECT_EQ(with, far) << "n " << n;
  }
}

TEST_P(GemmPanelsHalf, UnpackedRowsAreTheWidenedWeights) {
  const cpu::HalfFormat format = GetParam();
  const int out = 45, in = 70;
  const Case c = make_weights(out, in, format, 3);
  const auto packed = cpu::pack_panels_half(c.bits.data(), out, in, format);
  std::vector<float> row(static_cast<std::size_t>(in));
  for (int r = 0; r < out; ++r) {
    cpu::unpack_panel_row_half(packed, r, row.data());
    ASSERT_EQ(row, std::vector<float>(c.widened.begin() + r * in, c.widened.begin() + (r + 1) * in)) << "row " << r;
  }
  EXPECT_THROW(cpu::unpack_panel_row_half(packed, out, row.data()), Error);
  const std::uint16_t one = 0;
  EXPECT_THROW(cpu::pack_panels_half(&one, 0, 1, format), Error);
}

TEST_P(GemmPanelsHalf, SameBitsForAnyThreadCountAndBatchSize) {
  const cpu::HalfFormat format = GetParam();
  const int n = 29, out = 83, in = 700;
  const Case c = make_weights(out, in, format, 4);
  const auto x = random_normal(static_cast<std::size_t>(n) * in, 3);
  ThreadPool one(1), four(4);
  const auto batch = run_half(x, c, n, out, in, format, one);
  EXPECT_EQ(run_half(x, c, n, out, in, format, four), batch);
  // Row 5 alone (decode) is the batch's row 5.
  const std::vector<float> x5(x.begin() + 5 * in, x.begin() + 6 * in);
  const auto alone = run_half(x5, c, 1, out, in, format, four);
  EXPECT_EQ(alone, std::vector<float>(batch.begin() + 5 * out, batch.begin() + 6 * out));
}

INSTANTIATE_TEST_SUITE_P(Formats, GemmPanelsHalf, ::testing::Values(cpu::HalfFormat::kF16, cpu::HalfFormat::kBF16),
                         [](const auto& info) { return info.param == cpu::HalfFormat::kF16 ? "f16" : "bf16"; });

}  // namespace
}  // namespace inferlab
