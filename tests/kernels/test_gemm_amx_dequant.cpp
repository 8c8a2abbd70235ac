// The weight-only formats' prefill on the AMX bf16 tiles (kernels/cpu/gemm_amx_dequant.h), as
// matmul_int8 (W8A16), matmul_int4 (W4A16 groups) and matmul_gguf / matmul_gguf_act run it from
// their row thresholds: parity with the reference over odd shapes (in not a multiple of 32, out
// not a multiple of 16, 9 to 128 rows), and proof that the tiles ran (their x has 16 significant
// bits, a value the fp32 paths keep whole) and that INFERLAB_AMX=0's switch restores the fp32
// paths. Skipped, saying why, where the tiles do not run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "gguf_block_fixtures.h"
#include "inferlab/error.h"
#include "inferlab/formats/formats.h"
#include "inferlab/thread_pool.h"
#include "kernels/cpu/amx.h"
#include "kernels/cpu/gemm_amx_dequant.h"
#include "kernels/cpu/matmul_gguf.h"
#include "kernels/cpu/matmul_int4.h"
#include "kernels/cpu/matmul_int8.h"
#include "kernels/cpu/matmul_int8_act.h"
#include "kernels/cpu/matmul_int8_amx.h"
#include "kernels/ref/matmul_int4.h"
#include "kernels/ref/matmul_int8.h"
#include "matmul_checks.h"

namespace inferlab {
namespace {

#define REQUIRE_AMX_BF16()                                                                      \
  if (!cpu::amx_bf16_enabled()) GTEST_SKIP() << "AMX bf16 tiles not running here (built: " \
                                              << cpu::amx_bf16_built() << ")"

constexpr int kRows[] = {9, 16, 17, 33, 128};

struct Shape {
  int out, in;
};

TEST(GemmAmxDequant, Int8MatchesReference) {
  REQUIRE_AMX_BF16();
  ThreadPool pool(2);
  for (int n : kRows)
    for (Shape s : {Shape{13, 37}, Shape{45, 100}, Shape{33, 257}}) {
      SCOPED_TRACE(std::to_string(n) + " rows, " + std::to_string(s.out) + "x" + std::to_string(s.in));
      const std::vector<float> x = testing::random_normal(static_cast<std::size_t>(n) * s.in, n + s.in);
      const std::vector<float> w = testing::random_normal(static_cast<std::size_t>(s.out) * s.in, s.out, 0.05);
      std::vector<std::int8_t> q(w.size());
      std::vector<float> scale(static_cast<std::size_t>(s.out)), deq(w.size());
      ref::quantize_int8_rows(w.data(), s.out, s.in, q.data(), scale.data());
      for (std::size_t i = 0; i < w.size(); ++i) deq[i] = scale[i / static_cast<std::size_t>(s.in)] * q[i];
      std::vector<float> y(static_cast<std::size_t>(n) * s.out, NAN);
      cpu::matmul_int8(x.data(), q.data(), scale.data(), y.data(), n, s.out, s.in, pool);
      testing::expect_matmul_matches_reference(x, deq, y, n, s.out, s.in);
    }
}

TEST(GemmAmxDequant, Int4GroupsMatchReference) {
  REQUIRE_AMX_BF16();
  ThreadPool pool(2);
  for (int n : kRows)
    for (Shape s : {Shape{13, 37}, Shape{45, 100}, Shape{19, 300}})
      for (int gs : {8, 32, 40, 64, 128})  // 32, 64, 128: the group-scaled codes; 8, 40: three terms
        for (bool symmetric : {true, false}) {
          SCOPED_TRACE(std::to_string(n) + " rows, " + std::to_string(s.out) + "x" + std::to_string(s.in) + " g" +
                       std::to_string(gs) + (symmetric ? " symmetric" : " zero points"));
          const std::vector<float> x = testing::random_normal(static_cast<std::size_t>(n) * s.in, n * 7 + gs);
          const std::vector<float> w = testing::random_normal(static_cast<std::size_t>(s.out) * s.in, s.in + gs, 0.05);
          const int groups = ref::int4_groups(s.in, gs);
          std::vector<std::uint8_t> packed(static_cast<std::size_t>(s.out) * ref::int4_row_bytes(s.in));
          std::vector<std::uint8_t> zero(symmetric ? 0 : static_cast<std::size_t>(s.out) * groups);
          std::vector<float> scale(static_cast<std::size_t>(s.out) * groups), deq(w.size());
          const std::uint8_t* zp = symmetric ? nullptr : zero.data();
          ref::quantize_int4_groups(w.data(), s.out, s.in, gs, packed.data(), scale.data(), symmetric ? nullptr : zero.data());
          ref::dequantize_int4(packed.data(), scale.data(), zp, s.out, s.in, gs, deq.data());
          std::vector<float> y(static_cast<std::size_t>(n) * s.out, NAN);
          cpu::matmul_int4(x.data(), packed.data(), scale.data(), zp, y.data(), n, s.out, s.in, gs, pool);
          testing::expect_matmul_matches_reference(x, deq, y, n, s.out, s.in);
        }
}

// Two block types without packed panels (Q5_1: blocks of 32 with offsets; Q3_K: a 256-block with
// 6-bit sub-block scales), both activation paths: matmul_gguf_act's reference is the matmul of the
// same quantised x (xq * xs).
TEST(GemmAmxDequant, GgufBlocksMatchDequantizedMatmul) {
  REQUIRE_AMX_BF16();
  ThreadPool pool(2);
  for (GgmlType type : {GgmlType::kQ5_1, GgmlType::kQ3_K})
    for (int n : kRows)
      for (int out : {13, 45}) {
        const int in = static_cast<int>(ggml_block_elements(type)) * 3;
        SCOPED_TRACE(ggml_type_name(static_cast<std::uint32_t>(type)) + " " + std::to_string(n) + " rows, out " +
                     std::to_string(out));
        const std::vector<std::uint8_t> blocks = testing::random_gguf_blocks(type, out, in, n + out);
        std::vector<float> w(static_cast<std::size_t>(out) * in);
        dequantize(type, blocks.data(), w.size(), w.data());
        const std::vector<float> x = testing::random_normal(static_cast<std::size_t>(n) * in, n * 3 + out);
        std::vector<float> y(static_cast<std::size_t>(n) * out, NAN);
        cpu::matmul_gguf(type, blocks.data(), x.data(), y.data(), n, out, in, pool);
        testing::expect_matmul_matches_reference(x, w, y, n, out, in);

        const int ab = cpu::gguf_act_block(type), nab = in / ab;
        std::vector<std::int8_t> xq(x.size());
        std::vector<float> xs(static_cast<std::size_t>(n) * nab), xd(x.size());
        cpu::quantize_act_rows(x.data(), n, in, xq.data(), xs.data(), pool, ab);
        for (std::size_t i = 0; i < x.size(); ++i)
          xd[i] = static_cast<float>(xq[i]) * xs[(i / static_cast<std::size_t>(in)) * nab + (i % static_cast<std::size_t>(in)) / ab];
        std::fill(y.begin(), y.end(), NAN);
        cpu::matmul_gguf_act(type, blocks.data(), xq.data(), xs.data(), y.data(), n, out, in, pool);
        testing::expect_matmul_matches_reference(xd, w, y, n, out, in);
      }
}

// Every weight 1, every x 1 + 2^-8 + 2^-20: the fp32 paths sum exact products (in * x), the tiles
// see x as bf16 hi + lo = 1 + 2^-8 (the 2^-20 is past their 16 bits): so the result says which
// path ran. Each format gets its threshold's rows and more (and one row fewer: the fp32 path, or
// int8's 5..8 rows matmul_int8_amx's tiles, or int4's few-row path with its own arithmetic at 8
// rows, not the tiles), and again with the tiles switched off.
enum class Below { kFp32, kTiles, kFewRows };
struct PathCase {
  std::string name;
  int min_rows;
  Below below;
  std::function<void(const float* x, float* y, int n, int out, int in, ThreadPool& pool)> run;
};

TEST(GemmAmxDequant, EveryFormatTakesTheTilesFromItsThresholdAndFallsBackWithoutThem) {
  REQUIRE_AMX_BF16();
  ThreadPool pool(2);
  const int out = 21, in = 64;
  const std::vector<std::int8_t> q(static_cast<std::size_t>(out) * in, 1);
  const std::vector<float> one_per_row(out, 1.0f);
  // int4 symmetric (zero point 8) codes 9 at scale 1 are 1.
  const std::vector<std::uint8_t> nibbles(static_cast<std::size_t>(out) * ref::int4_row_bytes(in), 0x99);
  const std::vector<float> int4_scale(static_cast<std::size_t>(out) * ref::int4_groups(in, 32), 1.0f);
  const std::vector<float> int4_scale16(static_cast<std::size_t>(out) * ref::int4_groups(in, 16), 1.0f);
  // Q8_0 blocks: d = 1 (f16 0x3C00), codes 1.
  std::vector<std::uint8_t> q8(static_cast<std::size_t>(out) * (in / 32) * 34, 1);
  for (std::size_t b = 0; b < q8.size(); b += 34) q8[b] = 0x00, q8[b + 1] = 0x3C;
  const std::vector<PathCase> cases = {
      {"int8", cpu::kInt8AmxMaxRows + 1, Below::kTiles, [&](const float* x, float* y, int n, int o, int i, ThreadPool& p) {
         cpu::matmul_int8(x, q.data(), one_per_row.data(), y, n, o, i, p);
       }},
      {"int4 g32", cpu::kInt4AmxCodesMinRows, Below::kFewRows, [&](const float* x, float* y, int n, int o, int i, ThreadPool& p) {
         cpu::matmul_int4(x, nibbles.data(), int4_scale.data(), nullptr, y, n, o, i, 32, p);
       }},
      {"int4 g16", cpu::kInt4AmxMinRows, Below::kFp32, [&](const float* x, float* y, int n, int o, int i, ThreadPool& p) {
         cpu::matmul_int4(x, nibbles.data(), int4_scale16.data(), nullptr, y, n, o, i, 16, p);
       }},
      {"gguf Q8_0", cpu::kGgufAmxMinRows, Below::kFp32, [&](const float* x, float* y, int n, int o, int i, ThreadPool& p) {
         cpu::matmul_gguf(GgmlType::kQ8_0, q8.data(), x, y, n, o, i, p);
       }},
  };
  const float v = 1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20);
  const float fp32 = static_cast<float>(in) * v, tiles = static_cast<float>(in) * (1.0f + std::ldexp(1.0f, -8));
  ASSERT_NE(fp32, tiles);
  for (const PathCase& c : cases)
    for (int n : {c.min_rows - 1, c.min_rows, 40}) {
      SCOPED_TRACE(c.name + ", " + std::to_string(n) + " rows");
      const std::vector<float> x(static_cast<std::size_t>(n) * in, v);
      std::vector<float> y(static_cast<std::size_t>(n) * out, NAN);
      const bool few = n < c.min_rows && c.below == Below::kFewRows;
      c.run(x.data(), y.data(), n, out, in, pool);
      for (float got : y) {
        if (few) ASSERT_NE(got, tiles);
        else ASSERT_EQ(got, n < c.min_rows && c.below == Below::kFp32 ? fp32 : tiles);
      }
      const bool before = cpu::set_amx_bf16(false);
      c.run(x.data(), y.data(), n, out, in, pool);
      cpu::set_amx_bf16(before);
      for (float got : y) {
        if (few) ASSERT_NE(got, tiles);
        else ASSERT_EQ(got, fp32);
      }
    }
}

// The kernel itself on general fp32 weights: 2 and 3 terms within the fp32 tolerance; with 3 the
// weights are exact, so an identity x (exact in bf16) gives back every weight bit for bit, which
// is what a linear's dequantize_row promises (tests/conformance); 2 terms round them to 16 bits.
TEST(GemmAmxDequant, WeightTermsTradeExactnessOfTheWeights) {
  REQUIRE_AMX_BF16();
  ThreadPool pool(2);
  struct Rows {
    const float* w;
    int in;
  };
  const int out = 19, in = 45;
  const std::vector<float> w = testing::random_normal(static_cast<std::size_t>(out) * in, 9);
  const Rows rows{w.data(), in};
  cpu::AmxDequantWeights d;
  d.row = [](const void* ctx, int o, float* dst) {
    const auto& r = *static_cast<const Rows*>(ctx);
    std::copy(r.w + static_cast<std::size_t>(o) * r.in, r.w + static_cast<std::size_t>(o + 1) * r.in, dst);
  };
  d.ctx = &rows;
  d.out = out;
  d.in = in;
  std::vector<float> eye(static_cast<std::size_t>(in) * in, 0.0f);
  for (int i = 0; i < in; ++i) eye[static_cast<std::size_t>(i) * in + i] = 1.0f;
  const std::vector<float> x = testing::random_normal(static_cast<std::size_t>(33) * in, 10);
  for (int terms : {2, 3}) {
    SCOPED_TRACE(std::to_string(terms) + " terms");
    d.weight_terms = terms;
    std::vector<float> y(static_cast<std::size_t>(33) * out, NAN);
    cpu::gemm_amx_dequant(x.data(), 33, d, y.data(), pool);
    testing::expect_matmul_matches_reference(x, w, y, 33, out, in);
    std::vector<float> applied(static_cast<std::size_t>(in) * out, NAN);  // [in, out] = Wᵀ as applied
    cpu::gemm_amx_dequant(eye.data(), in, d, applied.data(), pool);
    int exact = 0;
    for (int o = 0; o < out; ++o)
      for (int i = 0; i < in; ++i) exact += applied[static_cast<std::size_t>(i) * out + o] == w[static_cast<std::size_t>(o) * in + i];
    if (terms == 3) {
      EXPECT_EQ(exact, out * in);
    } else {
      EXPECT_LT(exact, out * in / 2);
    }
  }
}

// Which int4 tile path runs: codes 1 (u = 9, symmetric) at scale 1 + 2^-10, x = 1 + 2^-8 + 2^-20
// (on the tiles hi 1 + 2^-7, lo -2^-8). The group-scaled codes sum x_hi + x_lo exactly per group
// and scale the sums: in * (1 + 2^-8) * (1 + 2^-10), exact in fp32. Three weight terms (hi 1, mid
// 2^-10) drop x_lo w_mid = -2^-18: in * (x_hi (1 + 2^-10) + x_lo). in = 96 makes g64's last group
// a partial one.
TEST(GemmAmxDequant, Int4GroupsOfWholeTileStepsScaleTheSumsOfTheirCodes) {
  REQUIRE_AMX_BF16();
  ThreadPool pool(2);
  const int out = 21, in = 96;
  const std::vector<std::uint8_t> nibbles(static_cast<std::size_t>(out) * ref::int4_row_bytes(in), 0x99);
  const float s = 1.0f + std::ldexp(1.0f, -10), v = 1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20);
  const double x_hi = 1.0 + std::ldexp(1.0, -7), x_lo = -std::ldexp(1.0, -8);
  const auto scaled_codes = static_cast<float>(in * (x_hi + x_lo) * s);
  const auto three_terms = static_cast<float>(in * (x_hi * s + x_lo));
  ASSERT_EQ(static_cast<double>(scaled_codes), in * (x_hi + x_lo) * s);  // exact: bit-equal is the test
  ASSERT_EQ(static_cast<double>(three_terms), in * (x_hi * s + x_lo));
  ASSERT_NE(scaled_codes, three_terms);
  for (int gs : {32, 64, 48, 96})
    for (int n : {cpu::kInt4AmxCodesMinRows, cpu::kInt4AmxMinRows, 40}) {
      if (gs % 32 != 0 && n < cpu::kInt4AmxMinRows) continue;  // three terms from their own threshold
      SCOPED_TRACE("g" + std::to_string(gs) + ", " + std::to_string(n) + " rows");
      const std::vector<float> scale(static_cast<std::size_t>(out) * ref::int4_groups(in, gs), s);
      const std::vector<float> x(static_cast<std::size_t>(n) * in, v);
      std::vector<float> y(static_cast<std::size_t>(n) * out, NAN);
      cpu::matmul_int4(x.data(), nibbles.data(), scale.data(), nullptr, y.data(), n, out, in, gs, pool);
      for (float got : y) ASSERT_EQ(got, gs % 32 == 0 ? scaled_codes : three_terms);
    }
}

// What DequantizedRowsAreTheAppliedWeights (tests/conformance) asks of the int4 linears, on the
// kernel: an identity x (exact in bf16) gives back every dequantised weight bit for bit, on both
// int4 tile paths (scale the codes' sums per group; three terms), with and without zero points.
TEST(GemmAmxDequant, Int4TilesApplyTheDequantizedWeightsExactly) {
  REQUIRE_AMX_BF16();
  ThreadPool pool(2);
  const int out = 33, in = 200;
  std::vector<float> eye(static_cast<std::size_t>(in) * in, 0.0f);
  for (int i = 0; i < in; ++i) eye[static_cast<std::size_t>(i) * in + i] = 1.0f;
  for (int gs : {32, 64, 128, 40})
    for (bool symmetric : {true, false}) {
      SCOPED_TRACE("g" + std::to_string(gs) + (symmetric ? " symmetric" : " zero points"));
      const std::vector<float> w = testing::random_normal(static_cast<std::size_t>(out) * in, gs + symmetric, 0.05);
      const int groups = ref::int4_groups(in, gs);
      std::vector<std::uint8_t> packed(static_cast<std::size_t>(out) * ref::int4_row_bytes(in));
      std::vector<std::uint8_t> zero(symmetric ? 0 : static_cast<std::size_t>(out) * groups);
      std::vector<float> scale(static_cast<std::size_t>(out) * groups), deq(w.size());
      const std::uint8_t* zp = symmetric ? nullptr : zero.data();
      ref::quantize_int4_groups(w.data(), out, in, gs, packed.data(), scale.data(), symmetric ? nullptr : zero.data());
      ref::dequantize_int4(packed.data(), scale.data(), zp, out, in, gs, deq.data());
      std::vector<float> applied(static_cast<std::size_t>(in) * out, NAN);  // [in, out] = Wᵀ as applied
      cpu::matmul_int4(eye.data(), packed.data(), scale.data(), zp, applied.data(), in, out, in, gs, pool);
      int exact = 0;
      for (int o = 0; o < out; ++o)
        for (int i = 0; i < in; ++i) exact += applied[static_cast<std::size_t>(i) * out + o] == deq[static_cast<std::size_t>(o) * in + i];
      EXPECT_EQ(exact, out * in);
    }
}

TEST(GemmAmxDequant, RefusesBadArgumentsAndMissingTiles) {
  ThreadPool pool(1);
  float x = 1, y = 0;
  cpu::AmxDequantWeights w;
  w.row = [](const void*, int, float* dst) { dst[0] = 1; };
  w.out = w.in = 1;
  w.weight_terms = 4;
  EXPECT_THROW(cpu::gemm_amx_dequant(&x, 1, w, &y, pool), Error);
  w.weight_terms = 1;
  w.row = nullptr;
  EXPECT_THROW(cpu::gemm_amx_dequant(&x, 1, w, &y, pool), Error);
  w.row = [](const void*, int, float* dst) { dst[0] = 1; };
  const float group_scale = 1;
  w.group_scale = &group_scale;
  for (int gs : {0, 48}) {  // group scales need whole tile steps and codes as one term
    w.group_size = gs;
    EXPECT_THROW(cpu::gemm_amx_dequant(&x, 1, w, &y, pool), Error);
  }
  w.group_size = 32;
  w.weight_terms = 3;
  EXPECT_THROW(cpu::gemm_amx_dequant(&x, 1, w, &y, pool), Error);
  w.weight_terms = 1;
  w.group_scale = nullptr;
  const bool before = cpu::set_amx_bf16(false);
  EXPECT_THROW(cpu::gemm_amx_dequant(&x, 1, w, &y, pool), Error);
  cpu::set_amx_bf16(before);
}

}  // namespace
}  // namespace inferlab
