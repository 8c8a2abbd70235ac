// kernels/cpu/matmul_int4 against the reference over awkward shapes (partial last groups, in
// not a multiple of 8, odd in), and the quantizer's format guarantees.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "inferlab/error.h"
#include "inferlab/support/rng.h"
#include "inferlab/thread_pool.h"
#include "kernels/cpu/matmul_int4.h"
#include "kernels/cpu/linear_plan.h"
#include "kernels/cpu/matmul_int4_act.h"
#include "kernels/cpu/matmul_int4_rows.h"
#include "kernels/cpu/matmul_int8_act.h"
#include "kernels/cpu/quantize_int4.h"
#include "kernels/ref/matmul_int8.h"
#include "kernels/ref/matmul_int4.h"
#include "matmul_checks.h"

namespace inferlab {
namespace {

// A quantized matrix in the reference format.
struct Quantized {
  std::vector<std::uint8_t> packed, zero;
  std::vector<float> scale;
  Quantized(const std::vector<float>& w, int out, int in, int gs, bool symmetric)
      : packed(static_cast<std::size_t>(out) * ref::int4_row_bytes(in)),
        zero(symmetric ? 0 : static_cast<std::size_t>(out) * ref::int4_groups(in, gs)),
        scale(static_cast<std::size_t>(out) * ref::int4_groups(in, gs)) {
    ref::quantize_int4_groups(w.data(), out, in, gs, packed.data(), scale.data(),
                              symmetric ? nullptr : zero.data());
  }
  const std::uint8_t* zp() const { return zero.empty() ? nullptr : zero.data(); }
};

int code(const std::vector<std::uint8_t>& packed, int in, int o, int i) {
  return (packed[o * ref::int4_row_bytes(in) + i / 2] >> ((i & 1) * 4)) & 0xF;
}

TEST(QuantizeInt4Groups, ScalesZerosCodesAndRoundingError) {
  const int out = 4, in = 45, gs = 16;  // groups of 16, 16, 13
  std::vector<float> w = testing::random_normal(static_cast<std::size_t>(out) * in, 21, 0.3);
  for (int i = 0; i < 16; ++i) w[1 * in + i] = 0.0f;           // an all-zero group
  for (int i = 16; i < 32; ++i) w[2 * in + i] = 0.5f + 0.01f * i;  // an all-positive group
  w[3 * in + 40] = -3.5f;                                      // extreme in the partial group
  for (bool symmetric : {true, false}) {
    Quantized q(w, out, in, gs, symmetric);
    const int G = ref::int4_groups(in, gs);
    ASSERT_EQ(G, 3);
    std::vector<float> deq(w.size());
    ref::dequantize_int4(q.packed.data(), q.scale.data(), q.zp(), out, in, gs, deq.data());
    for (int o = 0; o < out; ++o)
      for (int g = 0; g < G; ++g) {
        float lo = 0, hi = 0, amax = 0;
        for (int i = g * gs; i < std::min(in, (g + 1) * gs); ++i) {
          lo = std::min(lo, w[o * in + i]);
          hi = std::max(hi, w[o * in + i]);
          amax = std::max(amax, std::fabs(w[o * in + i]));
        }
        const float s = q.scale[o * G + g];
        EXPECT_FLOAT_EQ(s, symmetric ? amax / 7.0f : (hi - lo) / 15.0f) << o << "," << g;
        if (!symmetric && s > 0) {
          EXPECT_EQ(q.zero[o * G + g], std::lround(-lo / s));
        }
        for (int i = g * gs; i < std::min(in, (g + 1) * gs); ++i) {
          const int u = code(q.packed, in, o, i);
          if (symmetric) {
            EXPECT_GE(u, 1);  // q = u - 8 in [-7, 7]
          }
          EXPECT_LE(std::fabs(w[o * in + i] - deq[o * in + i]), s * 0.5f * (1 + 1e-5f) + 1e-12f);
        }
      }
    EXPECT_EQ(q.scale[1 * G + 0], 0.0f);
    for (int i = 0; i < 16; ++i) EXPECT_EQ(deq[1 * in + i], 0.0f);
    if (symmetric) {
      // The extreme of row 3's partial group is exact: -a = scale * -7.
      EXPECT_FLOAT_EQ(deq[3 * in + 40], -3.5f);
      EXPECT_EQ(code(q.packed, in, 3, 40), 1);  // -7 + 8
    } else {
      EXPECT_EQ(q.zero[1 * G + 0], 0);       // all-zero group: zero point 0
      EXPECT_EQ(q.zero[2 * G + 1], 0);       // all-positive group: range [0, max], zero 0
      EXPECT_EQ(code(q.packed, in, 2, 31), 15);
    }
  }
}

// cpu::quantize_int4_groups writes the reference's bytes, scales and zero points: random rows over
// awkward shapes (groups not a multiple of 8, a partial last group, odd in), and rows built to hit
// the rounding's ties (w / scale exactly k + 0.5), zeros of both signs, subnormals, and groups
// holding a NaN or an infinity (which take the scalar rule).
TEST(QuantizeInt4Groups, FastMatchesRefBitForBit) {
  ThreadPool pool(2);
  struct Shape {
    int out, in, gs;
  };
  for (const Shape s : {Shape{7, 256, 128}, Shape{5, 77, 32}, Shape{3, 129, 64}, Shape{4, 40, 20}, Shape{2, 9, 9},
                        Shape{6, 300, 24}, Shape{1, 5, 8}}) {
    for (const bool symmetric : {true, false}) {
      std::vector<float> w = testing::random_normal(static_cast<std::size_t>(s.out) * s.in,
                                                    static_cast<std::uint64_t>(s.out * 1000 + s.in + s.gs + symmetric), 0.5);
      for (std::size_t k = 0; k < w.size(); k += 3) w[k] *= 1e-3f;
      // Row 0, group 0: ties. Its extreme values fix the scale: hi = 7.5, lo = -7.5 (symmetric:
      // scale 7.5 / 7) or lo = -7 (asymmetric: scale 1), so k + 0.5 lands on a tie.
      for (int i = 0; i < std::min(s.gs, s.in); ++i) w[static_cast<std::size_t>(i)] = -7.0f + 0.5f * static_cast<float>(i % 30);
      if (s.out > 1) {  // row 1: signed zeros and subnormals
        for (int i = 0; i < s.in; ++i) w[static_cast<std::size_t>(s.in + i)] = i % 3 == 0 ? -0.0f : i % 3 == 1 ? 0.0f : 1e-40f * static_cast<float>(i % 7 - 3);
      }
      if (s.out > 2) {  // row 2: a NaN and an infinity
        w[static_cast<std::size_t>(2 * s.in)] = std::nanf("");
        w[static_cast<std::size_t>(2 * s.in + s.in - 1)] = -INFINITY;
      }
      const Quantized want(w, s.out, s.in, s.gs, symmetric);
      std::vector<std::uint8_t> packed(want.packed.size(), 0xAB), zero(want.zero.size(), 0xCD);
      std::vector<float> scale(want.scale.size(), -1.0f);
      cpu::quantize_int4_groups(w.data(), s.out, s.in, s.gs, packed.data(), scale.data(), symmetric ? nullptr : zero.data(),
                                pool);
      SCOPED_TRACE(::testing::Message() << s.out << " x " << s.in << " gs " << s.gs << (symmetric ? " symmetric" : " asymmetric"));
      EXPECT_EQ(packed, want.packed);
      EXPECT_EQ(zero, want.zero);
      ASSERT_EQ(scale.size(), want.scale.size());
      for (std::size_t k = 0; k < scale.size(); ++k)
        EXPECT_EQ(std::memcmp(&scale[k], &want.scale[k], sizeof(float)), 0) << "scale " << k << ": " << scale[k] << " vs " << want.scale[k];
    }
  }
}

TEST(MatmulInt4, RefMatchesHandPackedCodes) {
  // One row, in = 10, group size 8: group 0 = codes 0..7, group 1 = codes 15, 3.
  const int in = 10, gs = 8;
  std::vector<std::uint8_t> packed = {0x10, 0x32, 0x54, 0x76, 0x3F};
  const std::vector<float> scale = {0.5f, 2.0f};
  const std::vector<std::uint8_t> zero = {4, 1};
  const std::vector<float> x = {1, 1, 1, 1, 1, 1, 1, 1, 1, -1};
  float y = 0;
  ref::matmul_int4(x.data(), packed.data(), scale.data(), zero.data(), &y, 1, 1, in, gs);
  // 0.5 * sum(0..7 - 4) + 2 * ((15 - 1) - (3 - 1)) = 0.5 * -4 + 2 * 12.
  EXPECT_FLOAT_EQ(y, 22.0f);
  ref::matmul_int4(x.data(), packed.data(), scale.data(), nullptr, &y, 1, 1, in, gs);
  // Symmetric, zero point 8: 0.5 * (28 - 64) + 2 * (7 - (-5)).
  EXPECT_FLOAT_EQ(y, -18.0f + 24.0f);
}

TEST(MatmulInt4, FastMatchesRefOverAwkwardShapes) {
  ThreadPool pool1(1), pool2(2);
  const int ns[] = {1, 2, 3, 4, 5, 6, 7, 8, 16, 17, 129};  // 1..7: every tile split of the row path
  const int outs[] = {1, 3, 13, 129};
  // 257, 300, 576: several 128-code chunks of the AVX-512 row path and a partial last one.
  const int ins[] = {1, 7, 8, 9, 33, 100, 257, 300, 576};
  // With AVX-512 and n <= 7, group sizes dividing 128 or multiples of it take the row path
  // (matmul_int4_rows.h); group size 40 the AVX2 tiles; 8+ rows the dequantize-once path.
  const int group_sizes[] = {8, 32, 40, 64, 128, 256};
  for (int n : ns)
    for (int out : outs)
      for (int in : ins)
        for (int gs : group_sizes)
          for (bool symmetric : {false, true}) {
            if (n == 129 && out == 129 && in > 100) continue;  // keep the reference cheap
            if (in > 257 && (n > 7 || out > 13)) continue;
            std::uint64_t seed = static_cast<std::uint64_t>(n * 10007 + out * 101 + in + gs);
            std::vector<float> x = testing::random_normal(static_cast<std::size_t>(n) * in, seed);
            std::vector<float> w = testing::random_normal(static_cast<std::size_t>(out) * in, seed + 1, 0.05);
            Quantized q(w, out, in, gs, symmetric);
            std::vector<float> deq(w.size());
            ref::dequantize_int4(q.packed.data(), q.scale.data(), q.zp(), out, in, gs,
                                 deq.data());
            std::vector<float> want(static_cast<std::size_t>(n) * out);
            ref::matmul_int4(x.data(), q.packed.data(), q.scale.data(), q.zp(), want.data(), n,
                             out, in, gs);
            for (ThreadPool* pool : {&pool1, &pool2}) {
              std::vector<float> got(want.size(), std::nanf(""));
              cpu::matmul_int4(x.data(), q.packed.data(), q.scale.data(), q.zp(), got.data(), n,
                               out, in, gs, *pool);
              for (int r = 0; r < n; ++r)
                for (int o = 0; o < out; ++o) {
                  // fp32 accumulation error scales with the sum of |terms|.
                  double mag = 0;
                  for (int i = 0; i < in; ++i) mag += std::fabs(x[r * in + i] * deq[o * in + i]);
                  float g = got[r * out + o], e = want[r * out + o];
                  ASSERT_FALSE(std::isnan(g)) << "n=" << n << " out=" << out << " in=" << in;
                  ASSERT_NEAR(g, e, 1e-5 * mag + 1e-7)
                      << "n=" << n << " out=" << out << " in=" << in << " gs=" << gs
                      << " sym=" << symmetric << " r=" << r << " o=" << o;
                }
            }
          }
}

// The row-major codes take the register lookup up to kInt4RowsMaxRows rows wherever it is built
// (AVX-512), whatever the panels' plan for a packed linear says: matmul_int4 gives
// matmul_int4_rows' bits there (the dequantised rows sum in another order).
TEST(MatmulInt4, FewRowsTakeTheLookupWhereItIsBuilt) {
  if (!cpu::int4_rows_supported(128)) GTEST_SKIP() << "the register lookup is an AVX-512 kernel";
  ThreadPool pool(2);
  const int out = 40, in = 576;
  for (int gs : {32, 128})
    for (int n : {1, 4, cpu::kInt4RowsMaxRows}) {
      const std::uint64_t seed = static_cast<std::uint64_t>(n * 31 + gs);
      const std::vector<float> x = testing::random_normal(static_cast<std::size_t>(n) * in, seed);
      const Quantized q(testing::random_normal(static_cast<std::size_t>(out) * in, seed + 1, 0.05), out, in, gs, false);
      std::vector<float> got(static_cast<std::size_t>(n) * out), want(got.size());
      cpu::matmul_int4(x.data(), q.packed.data(), q.scale.data(), q.zp(), got.data(), n, out, in, gs, pool);
      cpu::matmul_int4_rows(x.data(), q.packed.data(), q.scale.data(), q.zp(), want.data(), n, out, in, gs, pool);
      EXPECT_EQ(got, want) << "n " << n << " gs " << gs;
    }
}

TEST(MatmulInt4, ZeroWeightsGiveZeroNotNaN) {
  ThreadPool pool(2);
  const int out = 9, in = 20, gs = 8;
  for (int n : {1, 3, 9}) {
    std::vector<float> x = testing::random_normal(static_cast<std::size_t>(n) * in, 5);
    std::vector<float> w(out * in, 0.0f);
    for (bool symmetric : {false, true}) {
      Quantized q(w, out, in, gs, symmetric);
      std::vector<float> y(static_cast<std::size_t>(n) * out, std::nanf(""));
      cpu::matmul_int4(x.data(), q.packed.data(), q.scale.data(), q.zp(), y.data(), n, out, in,
                       gs, pool);
      for (float v : y) EXPECT_EQ(v, 0.0f);
    }
  }
}

TEST(MatmulInt4, RejectsGroupSizeNotMultipleOfEight) {
  ThreadPool pool(1);
  std::vector<float> x(12, 1.0f), scale(2, 1.0f), y(1);
  std::vector<std::uint8_t> packed(6, 0);
  EXPECT_THROW(cpu::matmul_int4(x.data(), packed.data(), scale.data(), nullptr, y.data(), 1, 1,
                                12, 6, pool),
               Error);
}

}  // namespace
}  // namespace inferlab

namespace inferlab {
namespace {

// W4A8: the AVX2 tiles (nibble unpack + maddubs, zero point as zero * sum(x)) and the AVX-512 VNNI
// row stream (lanes one per block) against the reference, symmetric and asymmetric, group sizes
// 32 .. 1024, in not a multiple of 32, 1..22 rows.
TEST(MatmulInt4Act, FastMatchesRefOverAwkwardShapes) {
  const testing::Int4Shape shapes[] = {{1, 1, 32, 32}, {1, 9, 33, 32}, {2, 17, 100, 64}, {3, 8, 576, 64},
                          {5, 13, 288, 128}, {9, 40, 1000, 32}, {1, 64, 1536, 128},
                          {1, 24, 576, 32}, {1, 40, 1000, 32}, {4, 12, 576, 32},
                          // the VNNI stream's chunks of 16 blocks (lane l: block 16c + l): 1..7 rows in one
                          // pass, full chunks and a partial one, groups per chunk 16, 4 and 1, groups of 96
                          // and 160 (scales gathered per block), of 512 and 1024 (one per chunk or more)
                          {2, 9, 2048, 128}, {3, 7, 1570, 128}, {5, 5, 1536, 32}, {6, 6, 1000, 512},
                          {7, 4, 2080, 160}, {4, 8, 1536, 96}, {1, 5, 3072, 1024}, {7, 3, 5632, 128},
                          // more rows stream in groups of up to 7 (8: 7 + 1, 15: 7 + 7 + 1, 22: a
                          // half last chunk too)
                          {8, 6, 2048, 128}, {15, 5, 1000, 64}, {22, 9, 576, 32}};
  testing::for_each_int4_case(shapes, [](const testing::Int4Shape& s, bool symmetric, ThreadPool& pool) {
    Rng rng(static_cast<std::uint64_t>(s.in * 7 + s.n));
    std::vector<float> x(static_cast<std::size_t>(s.n) * s.in), w(static_cast<std::size_t>(s.out) * s.in);
    for (float& v : x) v = static_cast<float>(2.0 * rng.normal());
    for (float& v : w) v = static_cast<float>(0.1 * rng.normal() + (symmetric ? 0.0 : 0.03));
    const int groups = ref::int4_groups(s.in, s.gs);
    std::vector<std::uint8_t> packed(static_cast<std::size_t>(s.out) * ref::int4_row_bytes(s.in));
    std::vector<float> scale(static_cast<std::size_t>(s.out) * groups);
    std::vector<std::uint8_t> zero(symmetric ? 0 : scale.size());
    ref::quantize_int4_groups(w.data(), s.out, s.in, s.gs, packed.data(), scale.data(),
                              symmetric ? nullptr : zero.data());
    std::vector<std::int8_t> xq(x.size());
    std::vector<float> xs(static_cast<std::size_t>(s.n) * ref::act_blocks(s.in));
    cpu::quantize_act_rows(x.data(), s.n, s.in, xq.data(), xs.data(), pool);
    std::vector<float> want(static_cast<std::size_t>(s.n) * s.out), got(want.size(), std::nanf(""));
    const std::uint8_t* z = symmetric ? nullptr : zero.data();
    ref::matmul_int4_act(xq.data(), xs.data(), packed.data(), scale.data(), z, want.data(), s.n, s.out, s.in, s.gs);
    cpu::matmul_int4_act(xq.data(), xs.data(), packed.data(), scale.data(), z, got.data(), s.n, s.out, s.in, s.gs,
                         pool);
    testing::expect_near_scaled(got, want, 1e-5);
    double mag = 0;
    for (float v : want) mag = std::max(mag, std::fabs(static_cast<double>(v)));
    // And close to the fp32-activation int4 product: only the activation rounding differs.
    std::vector<float> w4a16(want.size());
    ref::matmul_int4(x.data(), packed.data(), scale.data(), z, w4a16.data(), s.n, s.out, s.in, s.gs);
    double err = 0;
    for (std::size_t i = 0; i < want.size(); ++i) err = std::max(err, std::fabs(static_cast<double>(got[i]) - w4a16[i]));
    EXPECT_LT(err, 0.03 * std::max(1.0, mag));
  });
}

}  // namespace
}  // namespace inferlab
