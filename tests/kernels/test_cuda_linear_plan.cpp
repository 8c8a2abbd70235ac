// The host-side logic of the CUDA tensor-core linears, checked on the CPU in every build: which
// kernel a linear runs for a row count and shape (kernels/cuda/linear_plan.h), where each element
// of an mma.sync fragment lives and the nibble / s8 / bf16 packing the kernels stage tiles with
// (kernels/cuda/mma_fragments.h), and the cuBLASLt plan cache (kernels/cuda/gemm_lt_plan.h).
// The device code itself is tested against kernels/ref on a GPU (tests/cuda_kernels/
// test_cuda_tensor_core_linears.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <set>
#include <utility>
#include <vector>

#include "inferlab/support/rng.h"
#include "kernels/cuda/gemm_lt_plan.h"
#include "kernels/cuda/linear_plan.h"
#include "kernels/cuda/mma_fragments.h"
#include "kernels/ref/half.h"
#include "kernels/ref/matmul_int4.h"

namespace inferlab::cuda {
namespace {

// ---- kernel choice ------------------------------------------------------------------------------

TEST(CudaLinearPlan, Int4WeightOnlyDecodeIsTheGemvPrefillTheTensorCores) {
  for (int n = 1; n <= kDecodeMaxRows; ++n) {
    EXPECT_EQ(plan_int4_linear(n, 4096, 128), LinearKernel::kGemv128) << n;
    EXPECT_EQ(plan_int4_linear(n, 4096, 32), LinearKernel::kGemv128) << n;
  }
  EXPECT_EQ(plan_int4_linear(kDecodeMaxRows + 1, 4096, 128), LinearKernel::kTensorCore);
  EXPECT_EQ(plan_int4_linear(8, 4096, 128), LinearKernel::kGemv128);  // the boundary itself: 8 | 9
  EXPECT_EQ(plan_int4_linear(9, 4096, 128), LinearKernel::kTensorCore);
  EXPECT_EQ(plan_int4_linear(512, 4096, 64), LinearKernel::kTensorCore);
  EXPECT_EQ(plan_int4_linear(512, 67, 32), LinearKernel::kTensorCore);  // ragged in: zero-filled tail
}

TEST(CudaLinearPlan, Int4ShapesTheNewKernelsCannotTakeFallBack) {
  // The 128-bit GEMV reads 32 codes of one group from a 16-byte aligned row.
  EXPECT_EQ(plan_int4_linear(1, 4096 + 16, 32), LinearKernel::kGemv);
  EXPECT_EQ(plan_int4_linear(1, 4096, 16), LinearKernel::kGemv);
  EXPECT_EQ(plan_int4_linear(1, 4096, 8), LinearKernel::kGemv);
  // Groups not a multiple of 32: no tensor cores; one GEMV pass up to 16 rows, then fp32 tiles.
  EXPECT_EQ(plan_int4_linear(16, 4096, 8), LinearKernel::kGemv);
  EXPECT_EQ(plan_int4_linear(17, 4096, 8), LinearKernel::kTiledFp32);
  EXPECT_EQ(plan_int4_linear(512, 4096, 48), LinearKernel::kTiledFp32);
}

TEST(CudaLinearPlan, Int8WeightOnlyDecodeIsTheGemvPrefillTheTensorCores) {
  EXPECT_EQ(plan_int8_linear(1, 4096), LinearKernel::kGemv128);
  EXPECT_EQ(plan_int8_linear(8, 4096), LinearKernel::kGemv128);
  EXPECT_EQ(plan_int8_linear(8, 4104), LinearKernel::kGemv);  // 16-byte loads need in % 16 == 0
  EXPECT_EQ(plan_int8_linear(9, 4096), LinearKernel::kTensorCore);
  EXPECT_EQ(plan_int8_linear(512, 67), LinearKernel::kTensorCore);
}

TEST(CudaLinearPlan, Int8ActivationsPerBlock) {
  // int8 weights, blocks of 32 (the int8 plugin's W8A8).
  EXPECT_EQ(plan_int8_act_linear(1, 4096, 4096, 32, false, false), LinearKernel::kGemv128);
  EXPECT_EQ(plan_int8_act_linear(8, 4096, 4096, 32, false, false), LinearKernel::kGemv128);
  EXPECT_EQ(plan_int8_act_linear(9, 4096, 4096, 32, false, false), LinearKernel::kTensorCore);
  EXPECT_EQ(plan_int8_act_linear(1, 37, 67, 32, false, false), LinearKernel::kGemv);  // unaligned rows
  EXPECT_EQ(plan_int8_act_linear(64, 37, 67, 32, false, false), LinearKernel::kTensorCore);
  // int4 weights (W4A8): a lane's 16-byte load is 32 codes, so `in` must be a multiple of 32.
  EXPECT_EQ(plan_int8_act_linear(1, 4096, 4096, 32, true, false), LinearKernel::kGemv128);
  EXPECT_EQ(plan_int8_act_linear(1, 4096, 4096 + 16, 32, true, false), LinearKernel::kGemv);
  EXPECT_EQ(plan_int8_act_linear(1, 4096, 4096 + 16, 32, false, false), LinearKernel::kGemv128);
  // Blocks that change scale inside a 32-code step cannot feed the s8 tiles.
  EXPECT_EQ(plan_int8_act_linear(64, 4096, 4096, 16, false, false), LinearKernel::kGemv);
  EXPECT_EQ(plan_int8_act_linear(1, 4096, 4096, 16, false, false), LinearKernel::kGemv128);
}

TEST(CudaLinearPlan, PerTokenScalesTakeCublasLtWhereItsLeadingDimensionsAllow) {
  // SmoothQuant: one block per row.
  EXPECT_EQ(plan_int8_act_linear(1, 4096, 4096, 4096, false, true), LinearKernel::kGemv128);
  EXPECT_EQ(plan_int8_act_linear(512, 4096, 4096, 4096, false, true), LinearKernel::kCublasLtInt8);
  EXPECT_EQ(plan_int8_act_linear(512, 4096, 4094, 4094, false, true), LinearKernel::kTensorCore);  // in % 4
  EXPECT_EQ(plan_int8_act_linear(512, 37, 4096, 4096, false, true), LinearKernel::kTensorCore);    // out % 4
  EXPECT_EQ(plan_int8_act_linear(512, 4096, 4096, 4096, false, false), LinearKernel::kTensorCore);
  EXPECT_EQ(plan_int8_act_linear(1, 4096, 100, 100, false, true), LinearKernel::kGemv);  // 100 % 16
}

TEST(CudaLinearPlan, EveryKernelHasAName) {
  std::set<std::string> names;
  for (LinearKernel k : {LinearKernel::kGemv, LinearKernel::kGemv128, LinearKernel::kTiledFp32,
                         LinearKernel::kTensorCore, LinearKernel::kCublasLtInt8})
    names.insert(linear_kernel_name(k));
  EXPECT_EQ(names.size(), 5u);
  EXPECT_EQ(names.count("?"), 0u);
}

// ---- fragment layouts ---------------------------------------------------------------------------

// Every element of an A (16 x 8 epr), B (8 epr x 8) and C (16 x 8) tile is held by exactly one
// (lane, register, element), and a register's elements are consecutive along K (the kernels
// load each register as one 32-bit word of a K-contiguous shared row).
void expect_fragments_cover_their_tiles(int epr) {
  const int k = 8 * epr;
  std::vector<int> a(16 * static_cast<std::size_t>(k)), b(static_cast<std::size_t>(k) * 8), c(16 * 8);
  for (int lane = 0; lane < 32; ++lane) {
    for (int r = 0; r < 4; ++r)
      for (int e = 0; e < epr; ++e) {
        const int row = mma::a_row(lane, r), col = mma::a_col(lane, r, e, epr);
        ASSERT_TRUE(row >= 0 && row < 16 && col >= 0 && col < k);
        ++a[static_cast<std::size_t>(row) * k + col];
        EXPECT_EQ(col, mma::a_col(lane, r, 0, epr) + e);
      }
    for (int r = 0; r < 2; ++r)
      for (int e = 0; e < epr; ++e) {
        const int kk = mma::b_k(lane, r, e, epr), col = mma::b_col(lane);
        ASSERT_TRUE(kk >= 0 && kk < k && col >= 0 && col < 8);
        ++b[static_cast<std::size_t>(kk) * 8 + col];
        EXPECT_EQ(kk, mma::b_k(lane, r, 0, epr) + e);
      }
    for (int i = 0; i < 4; ++i) ++c[static_cast<std::size_t>(mma::c_row(lane, i)) * 8 + mma::c_col(lane, i)];
  }
  for (int v : a) EXPECT_EQ(v, 1);
  for (int v : b) EXPECT_EQ(v, 1);
  for (int v : c) EXPECT_EQ(v, 1);
}

TEST(CudaMmaFragments, Bf16AndS8FragmentsCoverTheirTilesOnce) {
  expect_fragments_cover_their_tiles(mma::kHalfPerReg);
  expect_fragments_cover_their_tiles(mma::kInt8PerReg);
}

TEST(CudaMmaFragments, PositionsMatchThePtxFigures) {
  // m16n8k16 bf16, lane 5 (group 1, thread 1): a2 holds (1, 10..11), a1 (9, 2..3); b1 (k 10..11, n 1).
  EXPECT_EQ(mma::a_row(5, 2), 1);
  EXPECT_EQ(mma::a_col(5, 2, 0, 2), 10);
  EXPECT_EQ(mma::a_row(5, 1), 9);
  EXPECT_EQ(mma::a_col(5, 1, 1, 2), 3);
  EXPECT_EQ(mma::b_k(5, 1, 0, 2), 10);
  EXPECT_EQ(mma::b_col(5), 1);
  // m16n8k32 s8, lane 7 (group 1, thread 3): a3 holds (9, 28..31); b1 (k 28..31, n 1).
  EXPECT_EQ(mma::a_row(7, 3), 9);
  EXPECT_EQ(mma::a_col(7, 3, 0, 4), 28);
  EXPECT_EQ(mma::b_k(7, 1, 3, 4), 31);
  // Accumulator, lane 6 (group 1, thread 2): c3 is (9, 5).
  EXPECT_EQ(mma::c_row(6, 3), 9);
  EXPECT_EQ(mma::c_col(6, 3), 5);
}

// ---- packing ------------------------------------------------------------------------------------

TEST(CudaMmaPacking, UnpackedCodesAreTheReferenceCodesMinusTheirZeroPoint) {
  const int out = 3, in = 64, gs = 32;
  Rng rng(41);
  std::vector<float> w(static_cast<std::size_t>(out) * in);
  for (float& v : w) v = static_cast<float>(rng.uniform() * 2.0 - 1.0);
  std::vector<std::uint8_t> packed(out * ref::int4_row_bytes(in)), zero(out * ref::int4_groups(in, gs));
  std::vector<float> scale(zero.size()), deq(w.size());
  ref::quantize_int4_groups(w.data(), out, in, gs, packed.data(), scale.data(), zero.data());
  ref::dequantize_int4(packed.data(), scale.data(), zero.data(), out, in, gs, deq.data());
  for (int o = 0; o < out; ++o)
    for (int k = 0; k < in; k += 8) {
      std::uint32_t word = 0;
      std::memcpy(&word, packed.data() + o * ref::int4_row_bytes(in) + k / 2, sizeof(word));
      const int g = k / gs;
      int codes[8];
      mma::unpack_codes8(word, zero[static_cast<std::size_t>(o) * 2 + g], codes);
      for (int j = 0; j < 8; ++j) {
        EXPECT_GE(codes[j], -15);
        EXPECT_LE(codes[j], 15);
        // The kernels multiply the code by the group scale: that is the reference's weight.
        EXPECT_FLOAT_EQ(scale[static_cast<std::size_t>(o) * 2 + g] * static_cast<float>(codes[j]),
                        deq[static_cast<std::size_t>(o) * in + k + j]);
      }
    }
  int sym[8];
  mma::unpack_codes8(0x76543210u, 8, sym);  // the symmetric zero point
  for (int j = 0; j < 8; ++j) EXPECT_EQ(sym[j], j - 8);
}

TEST(CudaMmaPacking, SignedBytesPackLittleEndian) {
  EXPECT_EQ(mma::pack_s8x4(1, -1, 127, -128), 0x807FFF01u);
  EXPECT_EQ(mma::pack_s8x4(-15, 0, 15, 0), 0x000F00F1u);
}

TEST(CudaMmaPacking, Bf16RoundingIsTheReferenceAndTheSplitKeepsSixteenBits) {
  Rng rng(7);
  for (int i = 0; i < 20000; ++i) {
    const float x = static_cast<float>((rng.uniform() * 2.0 - 1.0) * std::pow(10.0, rng.uniform() * 8.0 - 4.0));
    ASSERT_EQ(mma::bf16_bits_rne(x), ref::float_to_bf16(x)) << x;
    std::uint16_t hi = 0, lo = 0;
    mma::split_bf16(x, hi, lo);
    const double sum = static_cast<double>(ref::bf16_to_float(hi)) + ref::bf16_to_float(lo);
    EXPECT_LE(std::fabs(sum - x), std::fabs(x) * std::ldexp(1.0, -16)) << x;
  }
  for (int v = -15; v <= 15; ++v)  // codes minus zero points are exact in bf16
    EXPECT_EQ(ref::bf16_to_float(mma::bf16_bits_rne(static_cast<float>(v))), static_cast<float>(v));
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  for (float x : {inf, -inf, nan, 0.0f, -0.0f, 3.0e38f}) EXPECT_EQ(mma::bf16_bits_rne(x), ref::float_to_bf16(x)) << x;
  std::uint16_t hi = 0, lo = 0;
  mma::split_bf16(inf, hi, lo);
  EXPECT_EQ(lo, 0u);  // no NaN from inf - inf
  EXPECT_EQ(hi, ref::float_to_bf16(inf));
}

// ---- cuBLASLt plan cache ------------------------------------------------------------------------

TEST(CudaLtPlanCache, BuildsAPlanOncePerProblemAndEpilogue) {
  LtPlanCache<int> cache(8);
  int built = 0;
  const auto make = [&built](const LtKey& k) {
    ++built;
    return std::make_unique<int>(k.n * 1000 + k.out);
  };
  const LtKey a{LtOp::kBF16, 1, 2048, 2048, false, false};
  EXPECT_EQ(*cache.get(a, make), 1 * 1000 + 2048);
  EXPECT_EQ(*cache.get(a, make), 1 * 1000 + 2048);
  EXPECT_EQ(built, 1);
  // Any field of the key is another problem: rows, type, bias, accumulate.
  LtKey b = a;
  b.n = 2;
  LtKey c = a;
  c.op = LtOp::kF16;
  LtKey d = a;
  d.bias = true;
  LtKey e = a;
  e.accumulate = true;
  for (const LtKey& k : {b, c, d, e}) cache.get(k, make);
  EXPECT_EQ(built, 5);
  EXPECT_EQ(cache.size(), 5u);
  EXPECT_EQ(cache.hits(), 1u);
  EXPECT_EQ(cache.misses(), 5u);
}

TEST(CudaLtPlanCache, DropsEverythingAtCapacityAndRebuildsOnDemand) {
  LtPlanCache<int> cache(3);
  int built = 0;
  const auto make = [&built](const LtKey&) { return std::make_unique<int>(++built); };
  for (int n = 1; n <= 3; ++n) cache.get(LtKey{LtOp::kInt8, n, 64, 64, false, false}, make);
  EXPECT_EQ(cache.size(), 3u);
  cache.get(LtKey{LtOp::kInt8, 4, 64, 64, false, false}, make);  // the fourth: cleared first
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(*cache.get(LtKey{LtOp::kInt8, 1, 64, 64, false, false}, make), 5);  // rebuilt
}

TEST(CudaLtPlanCache, RemembersThatAProblemHasNoPlan) {
  LtPlanCache<int> cache(8);
  int asked = 0;
  const auto none = [&asked](const LtKey&) {
    ++asked;
    return std::unique_ptr<int>();
  };
  const LtKey k{LtOp::kInt8, 3, 36, 36, false, false};
  EXPECT_EQ(cache.get(k, none), nullptr);
  EXPECT_EQ(cache.get(k, none), nullptr);
  EXPECT_EQ(asked, 1);  // the heuristic is not asked again
}

}  // namespace
}  // namespace inferlab::cuda
