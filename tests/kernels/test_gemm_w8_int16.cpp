// W8A16 in integers (kernels/cpu/gemm_w8_int16.h): int8 codes against int16 activation blocks.
// The arithmetic is defined exactly (int32 block sums, fp32 FMAs in block order, the channel
// scale last), so the vector passes are checked bit for bit against that definition written out
// here in scalar code, over awkward shapes (a partial last panel, one block, 1..9 rows and a
// prefill's worth, one and three threads); each row alone gives its row of the batch; the
// group gives each member's bits; the panels give each row back; and the int16 activation
// quantiser (vectorised on AVX2) gives the values its scalar definition does, ties included.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "inferlab/error.h"
#include "inferlab/thread_pool.h"
#include "kernels/cpu/gemm_int4_panels.h"
#include "kernels/cpu/gemm_panels_int8.h"
#include "kernels/cpu/matmul_int8_act.h"
#include "kernels/cpu/gemm_w8_int16.h"
#include "kernels/ref/matmul_int8.h"
#include "matmul_checks.h"

namespace inferlab {
namespace {

struct Codes {
  std::vector<std::int8_t> q;
  std::vector<float> scale;
};
Codes codes(int out, int in, std::uint64_t seed) {
  const std::vector<float> w = testing::random_normal(static_cast<std::size_t>(out) * in, seed, 0.05);
  Codes c{std::vector<std::int8_t>(w.size()), std::vector<float>(static_cast<std::size_t>(out))};
  ref::quantize_int8_rows(w.data(), out, in, c.q.data(), c.scale.data());
  return c;
}

// The kernel's definition: per output, int32 sums over each 32-block of code x activation (the
// activation of input i at slot int16_pair_slot(i)), each converted and FMA'd with the block's
// activation scale in block order, times the channel scale.
std::vector<float> defined(const Codes& c, const std::vector<std::int16_t>& xq, const std::vector<float>& xs, int n,
                           int out, int in) {
  const int blocks = in / 32;
  std::vector<float> y(static_cast<std::size_t>(n) * out);
  for (int r = 0; r < n; ++r)
    for (int o = 0; o < out; ++o) {
      float sum = 0.0f;
      for (int b = 0; b < blocks; ++b) {
        std::int32_t acc = 0;
        for (int i = 0; i < 32; ++i)
          acc += static_cast<std::int32_t>(c.q[static_cast<std::size_t>(o) * in + b * 32 + i]) *
                 xq[static_cast<std::size_t>(r) * in + b * 32 + cpu::int16_pair_slot(i)];
        sum = std::fma(static_cast<float>(acc), xs[static_cast<std::size_t>(r) * blocks + b], sum);
      }
      y[static_cast<std::size_t>(r) * out + o] = sum * c.scale[static_cast<std::size_t>(o)];
    }
  return y;
}

TEST(GemmW8Int16, MatchesItsDefinitionBitForBit) {
  struct Shape {
    int n, out, in;
  };
  const Shape shapes[] = {{1, 1, 32},   {1, 33, 576},  {1, 100, 1536}, {2, 17, 576}, {3, 64, 320},  {4, 40, 2048},
                          {5, 31, 96},  {6, 48, 576},  {7, 9, 5632},   {8, 96, 64},  {9, 50, 1024}, {40, 70, 288}};
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    for (const Shape& s : shapes) {
      SCOPED_TRACE("n " + std::to_string(s.n) + " out " + std::to_string(s.out) + " in " + std::to_string(s.in) + ", " +
                   std::to_string(threads) + " threads");
      const Codes c = codes(s.out, s.in, static_cast<std::uint64_t>(s.in + s.out));
      const std::vector<float> x = testing::random_normal(static_cast<std::size_t>(s.n) * s.in, s.out + 2, 3.0);
      std::vector<std::int16_t> xq(x.size());
      std::vector<float> xs(static_cast<std::size_t>(s.n) * (s.in / 32));
      cpu::quantize_panel_acts_int16(x.data(), s.n, s.in, xq.data(), xs.data());
      const cpu::PackedW8Int16 w = cpu::pack_w8_int16(c.q.data(), c.scale.data(), s.out, s.in);
      std::vector<float> got(static_cast<std::size_t>(s.n) * s.out, std::nanf(""));
      cpu::gemm_w8_int16(xq.data(), xs.data(), w, got.data(), s.n, pool);
      ASSERT_EQ(got, defined(c, xq, xs, s.n, s.out, s.in));
      std::vector<float> one(static_cast<std::size_t>(s.out));
      for (int r = 0; r < s.n; ++r) {  // a row alone: the bits it gets in the batch
        cpu::gemm_w8_int16(xq.data() + static_cast<std::size_t>(r) * s.in, xs.data() + static_cast<std::size_t>(r) * (s.in / 32),
                           w, one.data(), 1, pool);
        ASSERT_TRUE(std::equal(one.begin(), one.end(), got.begin() + static_cast<std::ptrdiff_t>(r) * s.out)) << "row " << r;
      }
    }
  }
}

// Against the weights the codes stand for and the fp32 activations: the int16 blocks' error is
// at most half a step (2^-16 of the block's largest value) per activation.
TEST(GemmW8Int16, CloseToTheFp32ActivationProduct) {
  ThreadPool pool(2);
  const int n = 4, out = 80, in = 576;
  const Codes c = codes(out, in, 5);
  const std::vector<float> x = testing::random_normal(static_cast<std::size_t>(n) * in, 6);
  std::vector<std::int16_t> xq(x.size());
  std::vector<float> xs(static_cast<std::size_t>(n) * (in / 32));
  cpu::quantize_panel_acts_int16(x.data(), n, in, xq.data(), xs.data());
  const cpu::PackedW8Int16 w = cpu::pack_w8_int16(c.q.data(), c.scale.data(), out, in);
  std::vector<float> got(static_cast<std::size_t>(n) * out);
  cpu::gemm_w8_int16(xq.data(), xs.data(), w, got.data(), n, pool);
  for (int r = 0; r < n; ++r)
    for (int o = 0; o < out; ++o) {
      double want = 0, bound = 1e-6;
      for (int i = 0; i < in; ++i) {
        const double wi = static_cast<double>(c.scale[o]) * c.q[static_cast<std::size_t>(o) * in + i];
        want += wi * x[static_cast<std::size_t>(r) * in + i];
        bound += std::fabs(wi) * (0.5 * xs[static_cast<std::size_t>(r) * (in / 32) + i / 32] + 1e-6 * std::fabs(x[static_cast<std::size_t>(r) * in + i]));
      }
      ASSERT_NEAR(got[static_cast<std::size_t>(r) * out + o], want, bound) << r << " " << o;
    }
}

TEST(GemmW8Int16, GroupGivesEachMembersBits) {
  ThreadPool pool(3);
  const int in = 288, n = 3;
  const int outs[] = {96, 33, 17};
  std::vector<Codes> c;
  std::vector<cpu::PackedW8Int16> w;
  for (int m = 0; m < 3; ++m) {
    c.push_back(codes(outs[m], in, 40 + static_cast<std::uint64_t>(m)));
    w.push_back(cpu::pack_w8_int16(c.back().q.data(), c.back().scale.data(), outs[m], in));
  }
  const std::vector<float> x = testing::random_normal(static_cast<std::size_t>(n) * in, 9);
  std::vector<std::int16_t> xq(x.size());
  std::vector<float> xs(static_cast<std::size_t>(n) * (in / 32));
  cpu::quantize_panel_acts_int16(x.data(), n, in, xq.data(), xs.data());
  std::vector<std::vector<float>> grouped(3), alone(3);
  std::vector<cpu::GemmW8Int16Output> members;
  for (int m = 0; m < 3; ++m) {
    grouped[m].assign(static_cast<std::size_t>(n) * outs[m], std::nanf(""));
    alone[m].assign(grouped[m].size(), std::nanf(""));
    members.push_back({&w[m], grouped[m].data()});
    cpu::gemm_w8_int16(xq.data(), xs.data(), w[m], alone[m].data(), n, pool);
  }
  cpu::gemm_w8_int16_group(xq.data(), xs.data(), members, n, pool);
  for (int m = 0; m < 3; ++m) EXPECT_EQ(grouped[m], alone[m]) << "member " << m;
  const cpu::PackedW8Int16 other = cpu::pack_w8_int16(c[0].q.data(), c[0].scale.data(), 96, 64);
  std::vector<float> y(static_cast<std::size_t>(n) * 96);
  const cpu::GemmW8Int16Output mixed[] = {{&w[0], grouped[0].data()}, {&other, y.data()}};
  EXPECT_THROW(cpu::gemm_w8_int16_group(xq.data(), xs.data(), mixed, n, pool), Error);
}

TEST(GemmW8Int16, PanelsGiveEachRowBackAndRefuseOtherShapes) {
  const int out = 37, in = 96;
  const Codes c = codes(out, in, 11);
  const cpu::PackedW8Int16 w = cpu::pack_w8_int16(c.q.data(), c.scale.data(), out, in);
  EXPECT_EQ(cpu::w8_int16_bytes(w), static_cast<std::uint64_t>(out) * (in + 4));
  std::vector<float> row(in);
  for (int o = 0; o < out; ++o) {
    cpu::unpack_w8_int16_row(w, o, row.data());
    for (int i = 0; i < in; ++i)
      ASSERT_EQ(row[i], c.scale[o] * static_cast<float>(c.q[static_cast<std::size_t>(o) * in + i])) << o << " " << i;
  }
  EXPECT_THROW(cpu::unpack_w8_int16_row(w, out, row.data()), Error);
  EXPECT_FALSE(cpu::w8_int16_available(100));
  EXPECT_FALSE(cpu::w8_int16_available(0));
  EXPECT_TRUE(cpu::w8_int16_available(576));
  EXPECT_THROW(cpu::pack_w8_int16(c.q.data(), c.scale.data(), out, 100), Error);
}

// W8A8 on the int16 panels: int8 activation blocks widened into the pair order (exactly: each
// code at its slot), then the kernel gives the reference W8A8 product, and where this build has
// the int8 panels their bits (the same int32 block sums, the same fp32 operations).
TEST(GemmW8Int16, WidenedInt8BlocksGiveTheW8A8Product) {
  ThreadPool pool(2);
  for (int n : {1, 3, 4, 7, 16}) {
    SCOPED_TRACE(std::to_string(n) + " rows");
    const int out = 72, in = 576;
    const Codes c = codes(out, in, 30 + static_cast<std::uint64_t>(n));
    const std::vector<float> x = testing::random_normal(static_cast<std::size_t>(n) * in, 31, 2.0);
    std::vector<std::int8_t> xq(x.size());
    std::vector<float> xs(static_cast<std::size_t>(n) * (in / 32));
    cpu::quantize_act_rows(x.data(), n, in, xq.data(), xs.data(), pool);
    std::vector<std::int16_t> wide(x.size());
    cpu::widen_act_blocks_int16(xq.data(), n, in, wide.data());
    for (std::size_t i = 0; i < xq.size(); ++i)
      ASSERT_EQ(wide[i - i % 32 + static_cast<std::size_t>(cpu::int16_pair_slot(static_cast<int>(i % 32)))], xq[i]) << i;
    const cpu::PackedW8Int16 w = cpu::pack_w8_int16(c.q.data(), c.scale.data(), out, in);
    std::vector<float> got(static_cast<std::size_t>(n) * out), want(got.size());
    cpu::gemm_w8_int16(wide.data(), xs.data(), w, got.data(), n, pool);
    ref::matmul_int8_act(xq.data(), xs.data(), c.q.data(), c.scale.data(), want.data(), n, out, in);
    for (std::size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5 * (1.0 + std::fabs(want[i]))) << i;
    if (cpu::gemm_panels_int8_available()) {
      const cpu::PackedPanelsInt8 p = cpu::pack_panels_int8(c.q.data(), c.scale.data(), out, in);
      std::vector<float> panels(got.size());
      cpu::gemm_panels_int8(xq.data(), xs.data(), p, panels.data(), n, pool);
      EXPECT_EQ(got, panels);
    }
  }
  std::vector<std::int16_t> wide(100);
  const std::vector<std::int8_t> xq(100);
  EXPECT_THROW(cpu::widen_act_blocks_int16(xq.data(), 1, 100, wide.data()), Error);
}

// Per-token W8A8 (one scale a row): one exact int32 sum over the row, then (float(sum) * xs[r]) *
// scale[o], the plain loop's operations: its bits, for 1..9 rows; in past the limit is refused.
TEST(GemmW8Int16, PerTokenGivesThePlainLoopsBits) {
  ThreadPool pool(2);
  for (int n : {1, 2, 5, 9}) {
    const int out = 40, in = 1536;
    const Codes c = codes(out, in, 50 + static_cast<std::uint64_t>(n));
    const std::vector<float> x = testing::random_normal(static_cast<std::size_t>(n) * in, 51, 2.0);
    std::vector<std::int8_t> xq(x.size());
    std::vector<float> xs(static_cast<std::size_t>(n));
    cpu::quantize_act_rows(x.data(), n, in, xq.data(), xs.data(), pool, in);
    std::vector<std::int16_t> wide(x.size());
    cpu::widen_act_blocks_int16(xq.data(), n, in, wide.data());
    const cpu::PackedW8Int16 w = cpu::pack_w8_int16(c.q.data(), c.scale.data(), out, in);
    std::vector<float> got(static_cast<std::size_t>(n) * out), want(got.size());
    cpu::gemm_w8_int16_per_token(wide.data(), xs.data(), w, got.data(), n, pool);
    for (int r = 0; r < n; ++r)
      for (int o = 0; o < out; ++o) {
        std::int32_t acc = 0;
        for (int i = 0; i < in; ++i)
          acc += static_cast<std::int32_t>(xq[static_cast<std::size_t>(r) * in + i]) * c.q[static_cast<std::size_t>(o) * in + i];
        want[static_cast<std::size_t>(r) * out + o] = static_cast<float>(acc) * xs[r] * c.scale[o];
      }
    EXPECT_EQ(got, want) << n << " rows";
  }
  const int big = cpu::kW8Int16PerTokenMaxIn + 32;
  const std::vector<std::int8_t> q(big);
  const float scale = 1.0f, xs = 1.0f;
  const cpu::PackedW8Int16 w = cpu::pack_w8_int16(q.data(), &scale, 1, big);
  const std::vector<std::int16_t> wide(big);
  float y = 0;
  EXPECT_THROW(cpu::gemm_w8_int16_per_token(wide.data(), &xs, w, &y, 1, pool), Error);
}

// The quantiser's vector form (AVX2 builds) against its scalar definition: xs = max |x| / 32767,
// xq = the nearest integer (ties to even) of x * (32767 / max |x|), clamped, in the pair order;
// inputs include exact halves, an all-zero block and a block whose largest value is negative.
TEST(GemmW8Int16, ActivationQuantiserMatchesItsDefinition) {
  const int n = 3, in = 128, blocks = in / 32;
  std::vector<float> x = testing::random_normal(static_cast<std::size_t>(n) * in, 21, 2.0);
  for (int i = 0; i < 32; ++i) x[32 + i] = 0.0f;               // row 0, block 1: all zero
  x[64] = -5.0f;                                               // row 0, block 2: largest negative
  for (int i = 0; i < 32; ++i) x[in + i] = (i - 16) * 0.5f;   // row 1, block 0: halves, and with
  x[in] = 32767.0f;                                            // this largest a step of exactly 1
  std::vector<std::int16_t> xq(x.size());
  std::vector<float> xs(static_cast<std::size_t>(n) * blocks);
  cpu::quantize_panel_acts_int16(x.data(), n, in, xq.data(), xs.data());
  for (int r = 0; r < n; ++r)
    for (int b = 0; b < blocks; ++b) {
      const float* xb = x.data() + static_cast<std::size_t>(r) * in + b * 32;
      float amax = 0.0f;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(xb[i]));
      const float inv = amax > 0.0f ? 32767.0f / amax : 0.0f;
      ASSERT_EQ(xs[static_cast<std::size_t>(r) * blocks + b], amax / 32767.0f) << r << " " << b;
      for (int i = 0; i < 32; ++i) {
        const float v = std::clamp(std::nearbyint(xb[i] * inv), -32767.0f, 32767.0f);
        ASSERT_EQ(xq[static_cast<std::size_t>(r) * in + b * 32 + cpu::int16_pair_slot(i)], static_cast<std::int16_t>(v))
            << r << " " << b << " " << i;
      }
    }
  EXPECT_EQ(xq[static_cast<std::size_t>(in) + cpu::int16_pair_slot(1)], -8);  // -7.5: to even
  EXPECT_EQ(xq[static_cast<std::size_t>(in) + cpu::int16_pair_slot(2)], -7);
  EXPECT_EQ(xq[static_cast<std::size_t>(in) + cpu::int16_pair_slot(3)], -6);  // -6.5: to even
}

}  // namespace
}  // namespace inferlab
