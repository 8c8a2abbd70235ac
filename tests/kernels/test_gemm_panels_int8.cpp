// The packed int8 GEMM (kernels/cpu/gemm_panels_int8.h) against the reference W8A8 matmul, over
// shapes that are not multiples of the tiles (6 rows, 32 channels, 4- and 32-input steps).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "inferlab/error.h"
#include "inferlab/support/rng.h"
#include "inferlab/thread_pool.h"
#include "kernels/cpu/amx.h"
#include "kernels/cpu/decode_prefetch.h"
#include "kernels/cpu/gemm_panels_int8.h"
#include "kernels/cpu/matmul_int8_act.h"
#include "kernels/ref/matmul_int8.h"

namespace inferlab {
namespace {

struct Case {
  std::vector<std::int8_t> q, xq;  // [out, in], [n, in]
  std::vector<float> scale, xs;    // [out], [n, act_blocks(in)]
  Case(int n, int out, int in, std::uint64_t seed)
      : q(static_cast<std::size_t>(out) * in), xq(static_cast<std::size_t>(n) * in), scale(static_cast<std::size_t>(out)),
        xs(static_cast<std::size_t>(n) * ref::act_blocks(in)) {
    Rng rng(seed);
    std::vector<float> w(q.size()), x(xq.size());
    for (float& v : w) v = static_cast<float>(rng.normal());
    for (float& v : x) v = static_cast<float>(rng.normal());
    ref::quantize_int8_rows(w.data(), out, in, q.data(), scale.data());
    ref::quantize_act_rows(x.data(), n, in, xq.data(), xs.data());
  }
};

std::vector<float> gemm(const Case& c, int n, int out, int in, ThreadPool& pool) {
  const auto packed = cpu::pack_panels_int8(c.q.data(), c.scale.data(), out, in);
  std::vector<float> y(static_cast<std::size_t>(n) * out, std::numeric_limits<float>::quiet_NaN());
  cpu::gemm_panels_int8(c.xq.data(), c.xs.data(), packed, y.data(), n, pool);
  return y;
}

void expect_matches_reference(int n, int out, int in, ThreadPool& pool) {
  SCOPED_TRACE("n=" + std::to_string(n) + " out=" + std::to_string(out) + " in=" + std::to_string(in));
  const Case c(n, out, in, static_cast<std::uint64_t>(n * 1000 + out * 7 + in));
  std::vector<float> want(static_cast<std::size_t>(n) * out);
  ref::matmul_int8_act(c.xq.data(), c.xs.data(), c.q.data(), c.scale.data(), want.data(), n, out, in);
  const auto got = gemm(c, n, out, in, pool);
  const int blocks = ref::act_blocks(in);
  int bad = 0;
  for (int r = 0; r < n; ++r)
    for (int o = 0; o < out; ++o) {
      double mag = 0.0;  // sum of |terms|: the scale of float rounding in the block sums
      for (int k = 0; k < in; ++k)
        mag += std::fabs(static_cast<double>(c.xq[static_cast<std::size_t>(r) * in + k]) *
                         c.xs[static_cast<std::size_t>(r) * blocks + k / ref::kActBlock] *
                         c.q[static_cast<std::size_t>(o) * in + k] * c.scale[static_cast<std::size_t>(o)]);
      const std::size_t i = static_cast<std::size_t>(r) * out + o;
      if (!(std::isfinite(got[i]) && std::fabs(got[i] - want[i]) <= 1e-5 * mag + 1e-6) && ++bad <= 5)
        ADD_FAILURE() << "y[" << r << "," << o << "] = " << got[i] << ", want " << want[i];
    }
  EXPECT_EQ(bad, 0);
}

TEST(GemmPanelsInt8, MatchesReferenceOnAwkwardShapes) {
  if (!cpu::gemm_panels_int8_available()) GTEST_SKIP() << "this build has no int8 panels (neither AVX-512 VNNI nor AVX2)";
  ThreadPool pool(3);
  const int rows[] = {1, 2, 3, 4, 5, 6, 7, 13, 17};
  // in: below one step of 4, not a multiple of 4, of 32, exactly the 256-input cache block,
  // past it; out: around the 32-channel panel and the 4-panel decode group.
  const int shapes[][2] = {{1, 3}, {7, 13}, {31, 33}, {32, 256}, {33, 300}, {130, 64}, {129, 520}};
  for (int n : rows)
    for (const auto& s : shapes) expect_matches_reference(n, s[0], s[1], pool);
}

TEST(GemmPanelsInt8, BitwiseSameForAnyThreadCountAndBatchSize) {
  if (!cpu::gemm_panels_int8_available()) GTEST_SKIP() << "this build has no int8 panels (neither AVX-512 VNNI nor AVX2)";
  const int n = 11, out = 200, in = 600;
  const Case c(n, out, in, 5);
  ThreadPool one(1), three(3);
  const auto y1 = gemm(c, n, out, in, one);
  EXPECT_EQ(y1, gemm(c, n, out, in, three));
  // One row through the decode micro-kernel (4 panels at once) equals its row in the batch.
  const int blocks = ref::act_blocks(in);
  for (int r : {0, 10}) {
    Case row = c;
    row.xq.assign(c.xq.begin() + static_cast<long>(r) * in, c.xq.begin() + static_cast<long>(r + 1) * in);
    row.xs.assign(c.xs.begin() + static_cast<long>(r) * blocks, c.xs.begin() + static_cast<long>(r + 1) * blocks);
    EXPECT_EQ(gemm(row, 1, out, in, three),
              std::vector<float>(y1.begin() + static_cast<long>(r) * out, y1.begin() + static_cast<long>(r + 1) * out))
        << "row " << r;
  }
}

// The micro-tiles' software prefetch (decode_prefetch.h; on by default, what INFERLAB_PREFETCH=0
// turns off for an A/B) reads nothing into the sums: the same bits with it, without it and with
// a distance past the matrix's end, at one row (the 4-panel decode tile), a few and a tile.
TEST(GemmPanelsInt8, FewRowsWithOrWithoutPrefetchGiveTheSameBits) {
  if (!cpu::gemm_panels_int8_available()) GTEST_SKIP() << "this build has no int8 panels (neither AVX-512 VNNI nor AVX2)";
  ThreadPool pool(2);
  const int out = 200, in = 600;
  for (int n : {1, 4, 16}) {
    const Case c(n, out, in, 17 + n);
    ASSERT_EQ(cpu::decode_prefetch_bytes(), cpu::kDecodePrefetch);
    const auto with = gemm(c, n, out, in, pool);
    cpu::set_decode_prefetch(0);
    const auto without = gemm(c, n, out, in, pool);
    cpu::set_decode_prefetch(1 << 24);
    const auto far = gemm(c, n, out, in, pool);
    cpu::set_decode_prefetch(cpu::kDecodePrefetch);
    EXPECT_EQ(with, without) << "n " << n;
    EXPECT_EQ(with, far) << "n " << n;
  }
}

// Where AMX runs (kernels/cpu/amx_blocks.h), 16 rows or more of whole panels and blocks run on
// its tiles and give every row the VNNI micro-tiles' bits (the same int32 sums, folded in the
// same order); other shapes keep the micro-tiles. Rows: below the threshold, two 16-row tiles,
// two and a one-row tail, several with a tail; in: an odd and an even number of 32-blocks.
TEST(GemmPanelsInt8, AmxTilesGiveTheVnniTilesBits) {
  if (!cpu::amx_int8_enabled()) GTEST_SKIP() << "AMX int8 does not run here (not built with it, not granted, or INFERLAB_AMX=0)";
  ThreadPool pool(2);
  const int shapes[][2] = {{64, 160}, {96, 576}, {32, 1024}, {33, 160}, {64, 300}};
  for (const auto& sh : shapes)
    for (int n : {15, 16, 17, 32, 33, 49}) {
      const int out = sh[0], in = sh[1];
      SCOPED_TRACE("n=" + std::to_string(n) + " out=" + std::to_string(out) + " in=" + std::to_string(in));
      const Case c(n, out, in, static_cast<std::uint64_t>(n * 13 + out + in));
      const auto packed = cpu::pack_panels_int8(c.q.data(), c.scale.data(), out, in);
      EXPECT_EQ(cpu::gemm_panels_int8_uses_amx(packed, n), n >= 16 && out % 32 == 0 && in % 32 == 0);
      const auto amx = gemm(c, n, out, in, pool);
      cpu::set_amx_int8(false);
      EXPECT_FALSE(cpu::gemm_panels_int8_uses_amx(packed, n));
      const auto vnni = gemm(c, n, out, in, pool);
      cpu::set_amx_int8(true);
      for (std::size_t i = 0; i < amx.size(); ++i) ASSERT_EQ(amx[i], vnni[i]) << "row " << i / out << " out " << i % out;
    }
}

// Per-token activations (SmoothQuant's W8A8): one scale per row, each output one int32 sum,
// so the kernel must equal the plain loop bit for bit — (float(sum) * xs[r]) * scale[o] — at
// every tile edge, in the decode micro-kernel (n = 1) and for rows longer than a cache block.
TEST(GemmPanelsInt8, PerTokenIsBitIdenticalToThePlainLoop) {
  if (!cpu::gemm_panels_int8_available()) GTEST_SKIP() << "this build has no int8 panels (neither AVX-512 VNNI nor AVX2)";
  ThreadPool pool(3);
  // {64, 576}, {96, 1024} with 16 rows or more: the AMX tiles where they run (whole panels, in %
  // 64 == 0), a tile pair, a pair and a tail, a lone tile with a tail.
  const int shapes[][2] = {{1, 3}, {7, 13}, {33, 300}, {129, 520}, {200, 2100}, {64, 576}, {96, 1024}};
  for (int n : {1, 2, 7, 13, 17, 40})
    for (const auto& sh : shapes) {
      const int out = sh[0], in = sh[1];
      SCOPED_TRACE("n=" + std::to_string(n) + " out=" + std::to_string(out) + " in=" + std::to_string(in));
      Rng rng(static_cast<std::uint64_t>(n * 31 + out * 7 + in));
      std::vector<float> w(static_cast<std::size_t>(out) * in), x(static_cast<std::size_t>(n) * in);
      for (float& v : w) v = static_cast<float>(rng.normal());
      for (float& v : x) v = static_cast<float>(rng.normal() * (1 + (&v - x.data()) % 5));
      std::vector<std::int8_t> q(w.size()), xq(x.size());
      std::vector<float> scale(static_cast<std::size_t>(out)), xs(static_cast<std::size_t>(n));
      ref::quantize_int8_rows(w.data(), out, in, q.data(), scale.data());
      cpu::quantize_act_rows(x.data(), n, in, xq.data(), xs.data(), pool, /*block=*/in);
      const auto packed = cpu::pack_panels_int8(q.data(), scale.data(), out, in);
      std::vector<float> y(static_cast<std::size_t>(n) * out, std::numeric_limits<float>::quiet_NaN());
      cpu::gemm_panels_int8_per_token(xq.data(), xs.data(), packed, y.data(), n, pool);
      int bad = 0;
      for (int r = 0; r < n; ++r)
        for (int o = 0; o < out; ++o) {
          std::int32_t acc = 0;
          for (int k = 0; k < in; ++k)
            acc += static_cast<std::int32_t>(xq[static_cast<std::size_t>(r) * in + k]) * q[static_cast<std::size_t>(o) * in + k];
          const float want = static_cast<float>(acc) * xs[static_cast<std::size_t>(r)] * scale[static_cast<std::size_t>(o)];
          const float got = y[static_cast<std::size_t>(r) * out + o];
          if (!(got == want) && ++bad <= 5) ADD_FAILURE() << "y[" << r << "," << o << "] = " << got << ", want " << want;
        }
      EXPECT_EQ(bad, 0);
    }
}

// A row past 65,536 inputs (one int32 sum could overflow) is summed in blocks sharing the row's
// scale: no longer bit-identical, still the int64 result to float rounding.
TEST(GemmPanelsInt8, PerTokenRowsPastTheInt32BoundStayExactToRounding) {
  if (!cpu::gemm_panels_int8_available()) GTEST_SKIP() << "this build has no int8 panels (neither AVX-512 VNNI nor AVX2)";
  ThreadPool pool(2);
  // All codes 127: the kernel's sum of (w + 128) x over the row, 255 * 127 * 70000, would pass
  // 2^31 in one int32 (the true dot product, 127 * 127 * 70000, fits).
  const int n = 2, out = 3, in = 70000;
  std::vector<std::int8_t> q(static_cast<std::size_t>(out) * in, 127), xq(static_cast<std::size_t>(n) * in, 127);
  for (std::size_t i = static_cast<std::size_t>(in); i < xq.size(); i += 2) xq[i] = -127;  // row 1: sums near 0
  const std::vector<float> scale = {1e-3f, 2e-3f, 3e-3f}, xs = {1e-2f, 2e-2f};
  const auto packed = cpu::pack_panels_int8(q.data(), scale.data(), out, in);
  std::vector<float> y(static_cast<std::size_t>(n) * out);
  cpu::gemm_panels_int8_per_token(xq.data(), xs.data(), packed, y.data(), n, pool);
  for (int r = 0; r < n; ++r)
    for (int o = 0; o < out; ++o) {
      long long acc = 0;
      for (int k = 0; k < in; ++k) acc += 127LL * xq[static_cast<std::size_t>(r) * in + k];
      const double want = static_cast<double>(acc) * xs[static_cast<std::size_t>(r)] * scale[static_cast<std::size_t>(o)];
      EXPECT_NEAR(y[static_cast<std::size_t>(r) * out + o], want, 1e-6 * std::fabs(want)) << r << "," << o;
    }
}

TEST(GemmPanelsInt8, RejectsEmptyShapes) {
  if (!cpu::gemm_panels_int8_available()) {
    const std::vector<std::int8_t> q(4, 1);
    const std::vector<float> s(1, 1.0f);
    EXPECT_THROW(cpu::pack_panels_int8(q.data(), s.data(), 1, 4), Error);  // says the build lacks VNNI
    return;
  }
  const std::vector<std::int8_t> q(12, 1);
  const std::vector<float> s(3, 1.0f);
  EXPECT_THROW(cpu::pack_panels_int8(q.data(), s.data(), 0, 4), Error);
  EXPECT_THROW(cpu::pack_panels_int8(q.data(), s.data(), 3, 0), Error);
}

}  // namespace
}  // namespace inferlab
