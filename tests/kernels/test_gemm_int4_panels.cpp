// The int4 group panels (kernels/cpu/gemm_int4_panels.h): the layout round-trips to the rows, the
// kernel matches the W4A8 reference over awkward shapes and every row count a pass groups, and
// a token row's result does not depend on how many rows share its pass, nor on whether they ran
// on the AMX tiles (32 rows and more where AMX runs; INFERLAB_AMX=0 runs the VNNI passes).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "inferlab/error.h"
#include "inferlab/support/rng.h"
#include "inferlab/thread_pool.h"
#include "kernels/cpu/decode_prefetch.h"
#include "kernels/cpu/gemm_int4_panels.h"
#include "kernels/cpu/matmul_int8_act.h"
#include "kernels/ref/matmul_int4.h"
#include "kernels/ref/matmul_int8.h"
#include "matmul_checks.h"

namespace inferlab {
namespace {

struct Weights {
  std::vector<std::uint8_t> packed, zero;
  std::vector<float> scale;
};

Weights quantized(int out, int in, int gs, bool symmetric, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<float> w(static_cast<std::size_t>(out) * in);
  for (float& v : w) v = static_cast<float>(0.1 * rng.normal() + (symmetric ? 0.0 : 0.03));
  Weights q;
  q.packed.resize(static_cast<std::size_t>(out) * ref::int4_row_bytes(in));
  q.scale.resize(static_cast<std::size_t>(out) * ref::int4_groups(in, gs));
  if (!symmetric) q.zero.resize(q.scale.size());
  ref::quantize_int4_groups(w.data(), out, in, gs, q.packed.data(), q.scale.data(),
                            symmetric ? nullptr : q.zero.data());
  return q;
}

TEST(GemmInt4Panels, AvailableForMultiplesOf32Only) {
  if (!cpu::int4_panels_available(64, 128)) GTEST_SKIP() << "this build has no int4 panels (neither AVX-512 VNNI nor AVX2)";
  EXPECT_TRUE(cpu::int4_panels_available(576, 32));
  EXPECT_FALSE(cpu::int4_panels_available(100, 32));
  EXPECT_FALSE(cpu::int4_panels_available(576, 16));
  EXPECT_THROW(cpu::pack_int4_panels(nullptr, nullptr, nullptr, 4, 100, 32), Error);
}

TEST(GemmInt4Panels, RowsRoundTripAndBytesMatchTheRowFormat) {
  if (!cpu::int4_panels_available(64, 128)) GTEST_SKIP() << "this build has no int4 panels (neither AVX-512 VNNI nor AVX2)";
  for (bool symmetric : {true, false}) {
    const int out = 37, in = 320, gs = 128, groups = ref::int4_groups(in, gs);
    const Weights q = quantized(out, in, gs, symmetric, 5);
    const cpu::Int4Panels w =
        cpu::pack_int4_panels(q.packed.data(), q.scale.data(), symmetric ? nullptr : q.zero.data(), out, in, gs);
    EXPECT_EQ(cpu::int4_panels_bytes(w), q.packed.size() + q.scale.size() * 4 + q.zero.size());
    std::vector<std::uint8_t> row(ref::int4_row_bytes(in)), zero(groups, 99);
    std::vector<float> scale(groups);
    for (int o = 0; o < out; ++o) {
      cpu::unpack_int4_panels_row(w, o, row.data(), scale.data(), zero.data());
      const std::size_t rb = ref::int4_row_bytes(in);
      ASSERT_EQ(std::vector<std::uint8_t>(q.packed.begin() + o * rb, q.packed.begin() + (o + 1) * rb), row) << o;
      for (int g = 0; g < groups; ++g) {
        ASSERT_EQ(scale[g], q.scale[o * groups + g]);
        ASSERT_EQ(zero[g], symmetric ? 99 : q.zero[o * groups + g]);
      }
    }
  }
}

TEST(GemmInt4Panels, MatchesTheReferenceOverAwkwardShapes) {
  if (!cpu::int4_panels_available(64, 128)) GTEST_SKIP() << "this build has no int4 panels (neither AVX-512 VNNI nor AVX2)";
  // Rows 1..8 (one pass: two chains per row up to 3 rows, one from 4), 9 (8 + 1), 22 (8 + 8 + 6);
  // outputs not a multiple of 16 (a partial last panel); groups of 32 .. 1024; a partial last group
  // (576 in groups of 128 and 256).
  const testing::Int4Shape shapes[] = {{1, 1, 32, 32},    {1, 16, 576, 128},  {2, 17, 576, 256}, {3, 33, 1536, 128},
                          {4, 40, 2048, 64}, {5, 15, 576, 32},   {6, 48, 320, 160}, {7, 9, 5632, 128},
                          {8, 20, 1024, 1024}, {9, 31, 96, 96}, {22, 18, 576, 128},
                          // from 32 rows, where AMX runs, its tiles: 2 full ones; 3 with a partial last;
                          // 4 with a partial last
                          {32, 17, 320, 64},   {37, 33, 576, 128}, {48, 17, 320, 64}, {53, 33, 576, 128}};
  testing::for_each_int4_case(shapes, [](const testing::Int4Shape& s, bool symmetric, ThreadPool& pool) {
    const Weights q = quantized(s.out, s.in, s.gs, symmetric, static_cast<std::uint64_t>(s.in * 3 + s.n));
    const std::uint8_t* z = symmetric ? nullptr : q.zero.data();
    const cpu::Int4Panels w = cpu::pack_int4_panels(q.packed.data(), q.scale.data(), z, s.out, s.in, s.gs);
    Rng rng(static_cast<std::uint64_t>(s.out));
    std::vector<float> x(static_cast<std::size_t>(s.n) * s.in);
    for (float& v : x) v = static_cast<float>(2.0 * rng.normal());
    std::vector<std::int8_t> xq(x.size());
    std::vector<float> xs(static_cast<std::size_t>(s.n) * ref::act_blocks(s.in));
    cpu::quantize_act_rows(x.data(), s.n, s.in, xq.data(), xs.data(), pool);
    std::vector<float> want(static_cast<std::size_t>(s.n) * s.out), got(want.size(), std::nanf(""));
    ref::matmul_int4_act(xq.data(), xs.data(), q.packed.data(), q.scale.data(), z, want.data(), s.n, s.out, s.in,
                         s.gs);
    cpu::gemm_int4_panels(xq.data(), xs.data(), w, got.data(), s.n, pool);
    testing::expect_near_scaled(got, want, 1e-5);
    // Each row alone gives its row of the batch bit for bit (row-count invariance).
    std::vector<float> one(static_cast<std::size_t>(s.out));
    for (int r = 0; r < s.n; ++r) {
      cpu::gemm_int4_panels(xq.data() + static_cast<std::size_t>(r) * s.in,
                            xs.data() + static_cast<std::size_t>(r) * ref::act_blocks(s.in), w, one.data(), 1, pool);
      for (int o = 0; o < s.out; ++o) ASSERT_EQ(one[o], got[static_cast<std::size_t>(r) * s.out + o]) << r << " " << o;
    }
  });
}

// The codes' and the group scales' prefetch (decode_prefetch.h) changes no bit, at one row (two
// panels a pass) and a few, on and off and past the end of the weights.
TEST(GemmInt4Panels, WithOrWithoutPrefetchGiveTheSameBits) {
  if (!cpu::int4_panels_available(64, 128)) GTEST_SKIP() << "this build has no int4 panels (neither AVX-512 VNNI nor AVX2)";
  const int out = 40, in = 1024, gs = 128;
  ThreadPool pool(2);
  const Weights q = quantized(out, in, gs, false, 9);
  const cpu::Int4Panels w = cpu::pack_int4_panels(q.packed.data(), q.scale.data(), q.zero.data(), out, in, gs);
  for (int n : {1, 4}) {
    Rng rng(static_cast<std::uint64_t>(n));
    std::vector<float> x(static_cast<std::size_t>(n) * in);
    for (float& v : x) v = static_cast<float>(rng.normal());
    std::vector<std::int8_t> xq(x.size());
    std::vector<float> xs(static_cast<std::size_t>(n) * ref::act_blocks(in));
    cpu::quantize_act_rows(x.data(), n, in, xq.data(), xs.data(), pool);
    std::vector<float> want(static_cast<std::size_t>(n) * out), got(want.size());
    const int before = cpu::set_decode_prefetch(0);
    cpu::gemm_int4_panels(xq.data(), xs.data(), w, want.data(), n, pool);
    for (int ahead : {cpu::kDecodePrefetch, cpu::kMaxDecodePrefetch}) {
      cpu::set_decode_prefetch(ahead);
      cpu::gemm_int4_panels(xq.data(), xs.data(), w, got.data(), n, pool);
      EXPECT_EQ(got, want) << "n " << n << ", ahead " << ahead;
    }
    cpu::set_decode_prefetch(before);
  }
}

// W4A16 in integers (gemm_int4_panels_int16): the int16 blocks hold each activation to 2^-16 of its
// block's largest, in the panels' pair order; against a double reference on those values and the
// dequantised weights over the shapes above (one row: four chains, up to 3 rows two, then one),
// and each row alone gives its row of the batch bit for bit.
TEST(GemmInt4Panels, Int16ActivationsMatchTheReference) {
  if (!cpu::int4_panels_available(64, 128)) GTEST_SKIP() << "this build has no int4 panels (neither AVX-512 VNNI nor AVX2)";
  for (int i = 0; i < 32; ++i) EXPECT_EQ(cpu::int16_pair_slot(i) / 8, i / 8) << i;
  EXPECT_EQ(cpu::int16_pair_slot(2), 1);
  EXPECT_EQ(cpu::int16_pair_slot(1), 4);
  EXPECT_EQ(cpu::int16_pair_slot(15), 15);
  const testing::Int4Shape shapes[] = {{1, 1, 32, 32},     {1, 16, 576, 128}, {2, 17, 576, 256}, {3, 33, 1536, 128},
                                       {4, 40, 2048, 64},  {5, 15, 576, 32},  {6, 48, 320, 160}, {7, 9, 5632, 128},
                                       {8, 20, 1024, 1024}, {9, 31, 96, 96},  {22, 18, 576, 128}, {53, 33, 576, 128}};
  testing::for_each_int4_case(shapes, [](const testing::Int4Shape& s, bool symmetric, ThreadPool& pool) {
    const Weights q = quantized(s.out, s.in, s.gs, symmetric, static_cast<std::uint64_t>(s.in * 5 + s.n));
    const std::uint8_t* z = symmetric ? nullptr : q.zero.data();
    const cpu::Int4Panels w = cpu::pack_int4_panels(q.packed.data(), q.scale.data(), z, s.out, s.in, s.gs);
    Rng rng(static_cast<std::uint64_t>(s.out + 7));
    std::vector<float> x(static_cast<std::size_t>(s.n) * s.in);
    for (float& v : x) v = static_cast<float>(2.0 * rng.normal());
    const int blocks = s.in / 32;
    std::vector<std::int16_t> xq(x.size());
    std::vector<float> xs(static_cast<std::size_t>(s.n) * blocks);
    cpu::quantize_panel_acts_int16(x.data(), s.n, s.in, xq.data(), xs.data());
    std::vector<float> wd(static_cast<std::size_t>(s.out) * s.in);
    ref::dequantize_int4(q.packed.data(), q.scale.data(), z, s.out, s.in, s.gs, wd.data());
    std::vector<float> got(static_cast<std::size_t>(s.n) * s.out, std::nanf(""));
    cpu::gemm_int4_panels_int16(xq.data(), xs.data(), w, got.data(), s.n, pool);
    for (int r = 0; r < s.n; ++r)
      for (int o = 0; o < s.out; ++o) {
        double want = 0, mag = 0;
        for (int i = 0; i < s.in; ++i) {
          const std::size_t at = static_cast<std::size_t>(r) * s.in + i;
          const double xi = static_cast<double>(xs[at / 32]) * xq[at - at % 32 + cpu::int16_pair_slot(i % 32)];
          // Nearest, up to fp32 x * (1 / xs)'s rounding: ~2 * 2^-24 * 32767 = 0.004 of a step.
          ASSERT_LE(std::fabs(xi - x[at]), xs[at / 32] * 0.505) << "activation " << i;
          want += xi * wd[static_cast<std::size_t>(o) * s.in + i];
          mag += std::fabs(xi * wd[static_cast<std::size_t>(o) * s.in + i]);
        }
        ASSERT_NEAR(got[static_cast<std::size_t>(r) * s.out + o], want, 2e-6 * mag + 1e-6) << "r " << r << " o " << o;
      }
    std::vector<float> one(static_cast<std::size_t>(s.out));
    for (int r = 0; r < s.n; ++r) {
      cpu::gemm_int4_panels_int16(xq.data() + static_cast<std::size_t>(r) * s.in,
                                  xs.data() + static_cast<std::size_t>(r) * blocks, w, one.data(), 1, pool);
      for (int o = 0; o < s.out; ++o) ASSERT_EQ(one[o], got[static_cast<std::size_t>(r) * s.out + o]) << r << " " << o;
    }
  });
}

// W4A16 with exact fp32 activations on the panels (gemm_int4_panels_f32: AVX2 and AVX-512 builds
// where the AMX bf16 tiles do not run): against a
// double reference on the dequantised weights over the shapes above (rows 1-4 a pass, 5 = 4 + 1,
// partial panels and groups), and each row alone gives its row of the batch bit for bit.
TEST(GemmInt4Panels, Fp32ActivationsMatchTheReference) {
  if (!cpu::int4_panels_f32_available(64, 128)) GTEST_SKIP() << "the fp32-activation panels: AVX2 / AVX-512 builds, not where the AMX bf16 tiles run";
  EXPECT_FALSE(cpu::int4_panels_f32_available(100, 32));
  EXPECT_FALSE(cpu::int4_panels_f32_available(576, 16));
  const testing::Int4Shape shapes[] = {{1, 1, 32, 32},     {1, 16, 576, 128}, {2, 17, 576, 256}, {3, 33, 1536, 128},
                                       {4, 40, 2048, 64},  {5, 15, 576, 32},  {6, 48, 320, 160}, {7, 9, 5632, 128},
                                       {8, 20, 1024, 1024}, {9, 31, 96, 96},  {22, 18, 576, 128}};
  testing::for_each_int4_case(shapes, [](const testing::Int4Shape& s, bool symmetric, ThreadPool& pool) {
    const Weights q = quantized(s.out, s.in, s.gs, symmetric, static_cast<std::uint64_t>(s.in * 7 + s.n));
    const std::uint8_t* z = symmetric ? nullptr : q.zero.data();
    const cpu::Int4Panels w = cpu::pack_int4_panels(q.packed.data(), q.scale.data(), z, s.out, s.in, s.gs);
    Rng rng(static_cast<std::uint64_t>(s.out + 11));
    std::vector<float> x(static_cast<std::size_t>(s.n) * s.in);
    for (float& v : x) v = static_cast<float>(2.0 * rng.normal());
    std::vector<float> wd(static_cast<std::size_t>(s.out) * s.in);
    ref::dequantize_int4(q.packed.data(), q.scale.data(), z, s.out, s.in, s.gs, wd.data());
    std::vector<float> got(static_cast<std::size_t>(s.n) * s.out, std::nanf(""));
    cpu::gemm_int4_panels_f32(x.data(), w, got.data(), s.n, pool);
    for (int r = 0; r < s.n; ++r)
      for (int o = 0; o < s.out; ++o) {
        double want = 0, mag = 0;
        for (int i = 0; i < s.in; ++i) {
          const double p = static_cast<double>(x[static_cast<std::size_t>(r) * s.in + i]) * wd[static_cast<std::size_t>(o) * s.in + i];
          want += p;
          mag += std::fabs(p);
        }
        // The zero point's term is taken off per group: an error of a few fp32 roundings of the
        // group's |x q| and |z Σx| sums, bounded by 15 |x| per weight against |x w|.
        ASSERT_NEAR(got[static_cast<std::size_t>(r) * s.out + o], want, 4e-6 * mag + 1e-5) << "r " << r << " o " << o;
      }
    std::vector<float> one(static_cast<std::size_t>(s.out));
    for (int r = 0; r < s.n; ++r) {
      cpu::gemm_int4_panels_f32(x.data() + static_cast<std::size_t>(r) * s.in, w, one.data(), 1, pool);
      for (int o = 0; o < s.out; ++o) ASSERT_EQ(one[o], got[static_cast<std::size_t>(r) * s.out + o]) << r << " " << o;
    }
  });
}

}  // namespace
}  // namespace inferlab
