// The CPU linears' kernel plan (kernels/cpu/linear_plan.h): every branch of every format for
// every ISA, on any machine (the ISA is an argument), the table's rows, and that the plan's view
// of this host agrees with what the kernels were built with.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "kernels/cpu/amx.h"
#include "kernels/cpu/gemm_gguf.h"
#include "kernels/cpu/gemm_int4_panels.h"
#include "kernels/cpu/gemm_panels_int8.h"
#include "kernels/cpu/linear_plan.h"
#include "kernels/cpu/matmul_int4_rows.h"

namespace inferlab::cpu {
namespace {

using K = CpuKernel;
using F = CpuFormat;

CpuIsa avx2() { return {.avx2 = true}; }
CpuIsa avx512() { return {.avx512 = true, .avx2 = true}; }
CpuIsa vnni() { return {.avx512 = true, .vnni = true, .avx2 = true}; }
CpuIsa amx() { return {.avx512 = true, .vnni = true, .avx2 = true, .amx_int8 = true, .amx_bf16 = true}; }

// TinyLlama's shapes: the attention / gate projections read 2048 inputs, the down projection 5632.
const CpuLinearShape kNarrow{.out = 5632, .in = 2048};
const CpuLinearShape kWide{.out = 2048, .in = 5632};

TEST(CpuLinearPlan, Fp32IsThePanelsAtEveryRowCountAndIsa) {
  for (const CpuIsa& isa : {CpuIsa::scalar(), avx2(), vnni(), amx()})
    for (int n : {1, 7, 16, 512}) EXPECT_EQ(plan_cpu_linear(F::kF32, n, kNarrow, isa), K::kPanelsF32);
}

TEST(CpuLinearPlan, HalfTakesTheAmxTilesFromTheirRowCountWhereTheyWerePacked) {
  CpuLinearShape s = kNarrow;
  s.amx_packed = true;
  EXPECT_EQ(plan_cpu_linear(F::kBf16, kAmxBf16MinRows - 1, s, amx()), K::kPanelsHalf);
  EXPECT_EQ(plan_cpu_linear(F::kBf16, kAmxBf16MinRows, s, amx()), K::kAmxBf16);
  s.weight_terms = 2;  // f16 split: exact hi + lo weights read twice the bytes
  EXPECT_EQ(plan_cpu_linear(F::kF16, kAmxBf16SplitMinRows - 1, s, amx()), K::kPanelsHalf);
  EXPECT_EQ(plan_cpu_linear(F::kF16, kAmxBf16SplitMinRows, s, amx()), K::kAmxBf16);
  s.weight_terms = 1;  // f16 with amx = bf16: one term, as bf16
  EXPECT_EQ(plan_cpu_linear(F::kF16, kAmxBf16MinRows, s, amx()), K::kAmxBf16);
  // bf16 weights are one term whatever the shape says.
  s.weight_terms = 2;
  EXPECT_EQ(plan_cpu_linear(F::kBf16, kAmxBf16MinRows, s, amx()), K::kAmxBf16);
  // Not packed (amx = off) or the tiles not granted: the panels.
  EXPECT_EQ(plan_cpu_linear(F::kBf16, 512, kNarrow, amx()), K::kPanelsHalf);
  s.weight_terms = 1;
  EXPECT_EQ(plan_cpu_linear(F::kBf16, 512, s, vnni()), K::kPanelsHalf);
}

TEST(CpuLinearPlan, W8A16PanelsThenTheAmxTilesThenTheDequantisingTiles) {
  for (int n = 1; n <= kW8PanelMaxRows; ++n) EXPECT_EQ(plan_cpu_linear(F::kW8A16, n, kNarrow, amx()), K::kPanelsW8) << n;
  for (int n = kW8PanelMaxRows + 1; n <= kInt8AmxMaxRows; ++n)
    EXPECT_EQ(plan_cpu_linear(F::kW8A16, n, kNarrow, amx()), K::kInt8Amx) << n;
  EXPECT_EQ(plan_cpu_linear(F::kW8A16, kInt8AmxMaxRows + 1, kNarrow, amx()), K::kAmxDequant);
  // matmul_int8's own choice (the panels not packed: the row-major codes).
  CpuLinearShape rows = kNarrow;
  rows.packed = false;
  EXPECT_EQ(plan_cpu_linear(F::kW8A16, kInt8AmxMinRows - 1, rows, amx()), K::kInt8Stream);
  EXPECT_EQ(plan_cpu_linear(F::kW8A16, kInt8AmxMinRows, rows, amx()), K::kInt8Amx);
  rows.in = kWide.in;  // 3 and 4 rows of 5632 inputs outgrow the stream's L1 tile
  EXPECT_EQ(plan_cpu_linear(F::kW8A16, kInt8AmxWideMinRows - 1, rows, amx()), K::kInt8Stream);
  EXPECT_EQ(plan_cpu_linear(F::kW8A16, kInt8AmxWideMinRows, rows, amx()), K::kInt8Amx);
  rows.in = kAmxDequantMinIn - 1;  // too short for a tile step
  EXPECT_EQ(plan_cpu_linear(F::kW8A16, kInt8AmxMaxRows + 1, rows, amx()), K::kInt8Tiles);
  // Without AMX the panels serve every row count (Zen 3, 2026-12-06: TinyLlama 8 / 16 / 128-row
  // passes 273-280 / 416-480 / 3068-3291 ms on matmul_int8's tiles, 141-155 / 270-287 / 2068-2148
  // on the panels, level with f16's); matmul_int8's own choice below them: the stream below
  // kInt8WidenOnceRows with AVX-512, else the tiles.
  for (int n : {1, kW8PanelMaxRows + 1, 16, 512}) {
    EXPECT_EQ(plan_cpu_linear(F::kW8A16, n, kNarrow, avx2()), K::kPanelsW8) << n;
    EXPECT_EQ(plan_cpu_linear(F::kW8A16, n, kNarrow, vnni()), K::kPanelsW8) << n;
  }
  rows.in = kNarrow.in;
  EXPECT_EQ(plan_cpu_linear(F::kW8A16, kInt8WidenOnceRows - 1, rows, avx512()), K::kInt8Stream);
  EXPECT_EQ(plan_cpu_linear(F::kW8A16, kInt8WidenOnceRows, rows, avx512()), K::kInt8Tiles);
  EXPECT_EQ(plan_cpu_linear(F::kW8A16, kInt8WidenOnceRows - 1, rows, avx2()), K::kInt8Tiles);
}

// W8A16 with int16 activation blocks: its panels on every ISA (the portable loop without AVX2),
// up to kW8PanelMaxRows where the AMX bf16 tiles run and at every row count elsewhere; past
// them, and without its panels (in not a multiple of 32), matmul_int8's choice as W8A16's.
TEST(CpuLinearPlan, W8A16Int16PanelsThenTheAmxTilesAsW8A16) {
  for (const CpuIsa& isa : {CpuIsa::scalar(), avx2(), avx512(), vnni()})
    for (int n : {1, 4, kW8PanelMaxRows + 1, 512}) EXPECT_EQ(plan_cpu_linear(F::kW8A16Int16, n, kNarrow, isa), K::kPanelsW8Int16);
  for (int n = 1; n <= kW8PanelMaxRows; ++n) EXPECT_EQ(plan_cpu_linear(F::kW8A16Int16, n, kNarrow, amx()), K::kPanelsW8Int16);
  for (int n : {kW8PanelMaxRows + 1, kInt8AmxMaxRows + 1}) {
    EXPECT_NE(plan_cpu_linear(F::kW8A16Int16, n, kNarrow, amx()), K::kPanelsW8Int16) << n;
    EXPECT_EQ(plan_cpu_linear(F::kW8A16Int16, n, kNarrow, amx()), plan_cpu_linear(F::kW8A16, n, kNarrow, amx())) << n;
  }
  CpuLinearShape rows = kNarrow;
  rows.packed = false;
  for (int n : {1, 4, 64}) EXPECT_EQ(plan_cpu_linear(F::kW8A16Int16, n, rows, avx2()), plan_cpu_linear(F::kW8A16, n, rows, avx2()));
  EXPECT_EQ(cpu_kernel_info(K::kPanelsW8Int16).arithmetic, CpuArithmetic::kInt16Dot);
}

TEST(CpuLinearPlan, W8A8PanelsWithTheAmxTilesForWholePanelsAndBlocks) {
  // AVX2 without AVX-512: the int16 panels, the int8 blocks widened (in a multiple of 32; else
  // the maddubs panels); AVX-512 builds keep the int8 panels. Per-token W8A8 the same (in up to
  // 65536: one int32 sum a row).
  for (int n : {1, 4, 16, 512}) {
    EXPECT_EQ(plan_cpu_linear(F::kW8A8PerToken, n, kNarrow, avx2()), K::kPanelsW8Int16) << n;
    EXPECT_EQ(plan_cpu_linear(F::kW8A8PerToken, n, CpuLinearShape{.out = 64, .in = 65536 + 32}, avx2()), K::kPanelsInt8);
    EXPECT_EQ(plan_cpu_linear(F::kW8A8PerToken, n, kNarrow, avx512()), K::kPanelsInt8) << n;
    EXPECT_EQ(plan_cpu_linear(F::kW8A8, n, kNarrow, avx2()), K::kPanelsW8Int16) << n;
    EXPECT_EQ(plan_cpu_linear(F::kW8A8, n, CpuLinearShape{.out = 5632, .in = 2048 + 16}, avx2()), K::kPanelsInt8) << n;
    EXPECT_EQ(plan_cpu_linear(F::kW8A8, n, kNarrow, avx512()), K::kPanelsInt8) << n;
  }
  EXPECT_EQ(plan_cpu_linear(F::kW8A8, kAmxBlocksMinRows - 1, kNarrow, amx()), K::kPanelsInt8);
  EXPECT_EQ(plan_cpu_linear(F::kW8A8, kAmxBlocksMinRows, kNarrow, amx()), K::kPanelsInt8Amx);
  EXPECT_EQ(plan_cpu_linear(F::kW8A8, 512, kNarrow, vnni()), K::kPanelsInt8);
  EXPECT_EQ(plan_cpu_linear(F::kW8A8, 512, CpuLinearShape{.out = 5632 + 16, .in = 2048}, amx()), K::kPanelsInt8);
  EXPECT_EQ(plan_cpu_linear(F::kW8A8, 512, CpuLinearShape{.out = 5632, .in = 2048 + 16}, amx()), K::kPanelsInt8);
  CpuLinearShape rows = kNarrow;
  rows.packed = false;  // no VNNI build: no panels
  EXPECT_EQ(plan_cpu_linear(F::kW8A8, 512, rows, avx2()), K::kInt8ActRows);
  // Per token (smoothquant): whole 64-input steps and rows short enough for one int32 sum.
  EXPECT_EQ(plan_cpu_linear(F::kW8A8PerToken, kPerTokenAmxMinRows - 1, kNarrow, amx()), K::kPanelsInt8);
  EXPECT_EQ(plan_cpu_linear(F::kW8A8PerToken, kPerTokenAmxMinRows, kNarrow, amx()), K::kPerTokenAmx);
  EXPECT_EQ(plan_cpu_linear(F::kW8A8PerToken, 512, CpuLinearShape{.out = 64, .in = 96}, amx()), K::kPanelsInt8);
  EXPECT_EQ(plan_cpu_linear(F::kW8A8PerToken, 512, CpuLinearShape{.out = 64, .in = 65536 + 64}, amx()), K::kPanelsInt8);
  EXPECT_EQ(plan_cpu_linear(F::kW8A8PerToken, 512, rows, avx2()), K::kInt8Loop);
}

TEST(CpuLinearPlan, W4A16LookupThenTheAmxTilesByGroupSize) {
  // Rows held (the panels are not packed where the AMX bf16 tiles run, int4_panels_f32_available):
  // the lookup, then the tiles or the dequantised rows.
  CpuLinearShape s = kNarrow;
  s.packed = false;
  for (int g : {32, 128, 256}) {
    s.group_size = g;
    EXPECT_EQ(plan_cpu_linear(F::kW4A16, kInt4RowsMaxRows, s, amx()), K::kInt4Rows) << g;
    EXPECT_EQ(plan_cpu_linear(F::kW4A16, kInt4AmxCodesMinRows, s, amx()), K::kAmxDequant) << g;
    EXPECT_EQ(plan_cpu_linear(F::kW4A16, kInt4RowsMaxRows, s, avx512()), K::kInt4Rows) << g;
    EXPECT_EQ(plan_cpu_linear(F::kW4A16, kInt4AmxCodesMinRows, s, avx512()), K::kInt4Dequant) << g;
  }
  s.group_size = 48;  // no lookup (not dividing 128), three bf16 terms from kInt4AmxMinRows
  EXPECT_EQ(plan_cpu_linear(F::kW4A16, 1, s, amx()), K::kInt4Dequant);
  EXPECT_EQ(plan_cpu_linear(F::kW4A16, kInt4AmxMinRows - 1, s, amx()), K::kInt4Dequant);
  EXPECT_EQ(plan_cpu_linear(F::kW4A16, kInt4AmxMinRows, s, amx()), K::kAmxDequant);
  s.group_size = 16;  // divides 128 (the lookup), not a multiple of 32 (three terms)
  EXPECT_EQ(plan_cpu_linear(F::kW4A16, kInt4RowsMaxRows, s, amx()), K::kInt4Rows);
  EXPECT_EQ(plan_cpu_linear(F::kW4A16, kInt4AmxMinRows - 1, s, amx()), K::kInt4Dequant);
  s.group_size = 32;
  EXPECT_EQ(plan_cpu_linear(F::kW4A16, 1, s, avx2()), K::kInt4Dequant);  // AVX2: no lookup
  // Panels packed (AVX2 and AVX-512 builds where the tiles did not run at load): they hold the
  // only copy of the weights, so they serve every row count whatever the tiles do now (tiles
  // switched on after the load must not send the linear to rows it released).
  s.packed = true;
  for (const CpuIsa& isa : {avx2(), avx512(), amx()})
    for (int n : {1, kInt4RowsMaxRows, kInt4AmxCodesMinRows, 512})
      EXPECT_EQ(plan_cpu_linear(F::kW4A16, n, s, isa), K::kInt4PanelsF32) << n;
  // int16 activations: their panels where packed (no AMX form), else the fp32 plan.
  EXPECT_EQ(plan_cpu_linear(F::kW4A16Int16, 512, s, amx()), K::kInt4PanelsInt16);
  s.packed = false;
  EXPECT_EQ(plan_cpu_linear(F::kW4A16Int16, 1, s, amx()), K::kInt4Rows);
}

TEST(CpuLinearPlan, W4A8PanelsWithTheAmxTilesFromTheirRowCount) {
  CpuLinearShape s = kNarrow;
  s.group_size = 128;
  EXPECT_EQ(plan_cpu_linear(F::kW4A8, kInt4PanelsAmxMinRows - 1, s, amx()), K::kInt4Panels);
  EXPECT_EQ(plan_cpu_linear(F::kW4A8, kInt4PanelsAmxMinRows, s, amx()), K::kInt4PanelsAmx);
  EXPECT_EQ(plan_cpu_linear(F::kW4A8, 512, s, vnni()), K::kInt4Panels);
  s.packed = false;
  EXPECT_EQ(plan_cpu_linear(F::kW4A8, 512, s, avx2()), K::kInt4ActRows);
}

TEST(CpuLinearPlan, GgufPackedBlocksRowsAndFp32Activations) {
  CpuLinearShape s = kNarrow;
  for (GgmlType t : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ4_K, GgmlType::kQ5_K}) {
    s.type = t;
    EXPECT_EQ(plan_cpu_linear(F::kGguf, kAmxBlocksMinRows - 1, s, amx()), K::kGgufPanels);
    EXPECT_EQ(plan_cpu_linear(F::kGguf, kAmxBlocksMinRows, s, amx()), K::kGgufPanelsAmx);
    EXPECT_EQ(plan_cpu_linear(F::kGguf, 512, s, avx2()), K::kGgufAvx2);
  }
  s.type = GgmlType::kQ6_K;  // scales per 16: no AMX form
  EXPECT_EQ(plan_cpu_linear(F::kGguf, 512, s, amx()), K::kGgufPanels);
  s.type = GgmlType::kQ3_K;
  s.packed = false;  // the file's rows (Q5_1, Q2_K, Q3_K, IQ4_XS; any type without a packed build)
  EXPECT_EQ(plan_cpu_linear(F::kGguf, kGgufAmxMinRows - 1, s, amx()), K::kGgufActRows);
  EXPECT_EQ(plan_cpu_linear(F::kGguf, kGgufAmxMinRows, s, amx()), K::kAmxDequant);
  EXPECT_EQ(plan_cpu_linear(F::kGguf, 512, s, avx2()), K::kGgufActRows);
  EXPECT_EQ(plan_cpu_linear(F::kGgufFp32, kGgufAmxMinRows - 1, s, amx()), K::kGgufRows);
  EXPECT_EQ(plan_cpu_linear(F::kGgufFp32, kGgufAmxMinRows, s, amx()), K::kAmxDequant);
  EXPECT_EQ(plan_cpu_linear(F::kGgufFp32, 512, s, CpuIsa::scalar()), K::kGgufRows);
}

TEST(CpuLinearPlan, EveryKernelHasItsOwnNameAndEveryFormatARow) {
  std::set<std::string> names;
  for (int k = 0; k <= static_cast<int>(K::kGgufRows); ++k) {
    const CpuKernelInfo& info = cpu_kernel_info(static_cast<K>(k));
    EXPECT_TRUE(names.insert(info.name).second) << info.name;
    EXPECT_EQ(find_cpu_kernel(info.name), &info);
    EXPECT_NE(std::string(cpu_arithmetic_name(info.arithmetic)), "?");
  }
  std::set<int> formats;
  for (const CpuFormatInfo& f : cpu_formats()) {
    EXPECT_TRUE(formats.insert(static_cast<int>(f.format)).second) << f.name;
    EXPECT_EQ(find_cpu_format(f.name), &f);
  }
  EXPECT_EQ(formats.size(), static_cast<std::size_t>(F::kGgufFp32) + 1);
  EXPECT_EQ(find_cpu_format("int3"), nullptr);
  EXPECT_EQ(find_cpu_kernel("panels_f33"), nullptr);
  // The arithmetic each kernel is bounded by (inferlab bench's limit takes that peak).
  EXPECT_EQ(cpu_kernel_info(K::kAmxBf16).arithmetic, CpuArithmetic::kAmxBf16);
  EXPECT_EQ(cpu_kernel_info(K::kPanelsHalf).arithmetic, CpuArithmetic::kFp32Fma);  // widened to fp32 in the load
  EXPECT_EQ(cpu_kernel_info(K::kGgufPanelsAmx).arithmetic, CpuArithmetic::kAmxInt8);
  EXPECT_EQ(cpu_kernel_info(K::kInt4PanelsInt16).arithmetic, CpuArithmetic::kInt16Dot);
}

// The plan's view of this host is what the kernels were compiled with and what the tiles allow now.
TEST(CpuLinearPlan, HostIsaAgreesWithTheKernelsBuild) {
  const CpuIsa isa = CpuIsa::host();
  EXPECT_EQ(isa.vnni || isa.avx2, gemm_panels_int8_available());
  EXPECT_EQ(isa.vnni || isa.avx2, int4_panels_available(64, 32));
  EXPECT_EQ(isa.avx2 && !isa.amx_bf16, int4_panels_f32_available(64, 32));
  EXPECT_EQ(isa.vnni || isa.avx2, gemm_gguf_available());
  EXPECT_EQ(isa.avx512, int4_rows_supported(32));
  EXPECT_EQ(isa.amx_int8, amx_int8_enabled());
  EXPECT_EQ(isa.amx_bf16, amx_bf16_enabled());
}

TEST(CpuLinearPlan, SwitchingTheTilesOffMovesThePlan) {
  if (!amx_bf16_enabled()) GTEST_SKIP() << "the AMX bf16 tiles are not granted here: nothing to switch off";
  const bool before = set_amx_bf16(false);  // an ablation switches the tiles off: the plan follows
  EXPECT_FALSE(CpuIsa::host().amx_bf16);
  EXPECT_EQ(plan_cpu_linear(F::kW8A16, 8, kNarrow, CpuIsa::host()), K::kInt8Stream);
  set_amx_bf16(before);
  EXPECT_EQ(plan_cpu_linear(F::kW8A16, 8, kNarrow, CpuIsa::host()), K::kInt8Amx);
}

}  // namespace
}  // namespace inferlab::cpu
