// Which CPU kernel a linear runs: one row per weight format (as ggml-cpu's type traits), the
// kernel each number of token rows takes on this build and host, and every row-count threshold
// of the CPU linears in one place. The linears and the kernels that choose between sub-paths
// (matmul_int8, matmul_int4, gemm_gguf, gemm_panels_int8, gemm_int4_panels, matmul_gguf) ask
// plan_cpu_linear, so what `inferlab kernels` prints and `inferlab bench` names beside each
// pass is what runs. The CUDA counterpart is kernels/cuda/linear_plan.h.
//
// The plan is plain C++ over an explicit ISA (CpuIsa), so tests/kernels/test_cpu_linear_plan.cpp
// checks every branch for every ISA on any machine. A format's kernels are measured where their
// thresholds are set (docs/kernels.md, "What runs where"; the figures beside each constant).
#pragma once
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "inferlab/ggml_types.h"

namespace inferlab::cpu {

// What the CPU linears can run here: the build's vector ISA and, at run time, whether the AMX
// tiles are granted (kernels/cpu/amx.h; they may be switched off for an ablation).
struct CpuIsa {
  bool avx512 = false;    // AVX-512 F/BW/VL: the int8 row stream, the int4 register lookup (int4_rows)
  bool vnni = false;      // AVX-512 VNNI: the int8 panels (W8A8, W4A8, GGUF blocks' packed tiles)
  bool avx2 = false;      // AVX2 + FMA (+ F16C): the GGUF blocks' packed tiles without VNNI
  bool amx_int8 = false;  // the AMX int8 tiles, granted now
  bool amx_bf16 = false;  // the AMX bf16 tiles, granted now
  static CpuIsa host();   // this build on this machine, now
  static CpuIsa scalar() { return {}; }
};

// "AVX2, AMX int8 off, AMX bf16 off": the vector ISA and the tiles, as `inferlab kernels` heads its
// table and manifest.json's "cpu_isa" records it (what an "auto" parameter resolved against).
std::string cpu_isa_text(const CpuIsa& isa);

// A weight format of the CPU linears and the activations it multiplies.
enum class CpuFormat {
  kF32,           // quantization none; the fp32 classifiers of the int4 / gptq / awq / smoothquant stacks
  kF16,           // quantization f16 (parameter amx: split = two bf16 weight terms, bf16 = one)
  kBf16,          // quantization bf16
  kW8A16,         // int8 per channel, fp32 activations (int8 activations = fp32; auto on portable builds)
  kW8A16Int16,    // int8 per channel, int16 activation blocks (int8 activations = int16; auto on AVX2 / AVX-512 builds)
  kW8A8,          // int8 per channel, int8 activation blocks of 32 (int8 activations = int8)
  kW8A8PerToken,  // int8 per channel, one int8 scale per token row (smoothquant)
  kW4A16,         // int4 groups, fp32 activations (int4 / gptq / awq activations = fp32)
  kW4A16Int16,    // int4 groups, int16 activation blocks (activations = int16)
  kW4A8,          // int4 groups, int8 activation blocks (activations = int8; int4 g32 takes kGguf Q4_0)
  kGguf,          // a GGUF block type, int8 activation blocks (gguf activations = int8)
  kGgufFp32,      // a GGUF block type, fp32 activations (gguf activations = fp32)
};

// The arithmetic a kernel's multiply-adds run on: which probed peak bounds it (peak_probe.h).
enum class CpuArithmetic { kFp32Fma, kInt8Dot, kInt16Dot, kAmxInt8, kAmxBf16 };

enum class CpuKernel {
  kPanelsF32,       // gemm_panels_f32.h: fp32 panels, FMA micro-tiles
  kPanelsHalf,      // gemm_panels_half.h: f16 / bf16 panels widened in the load, FMA
  kAmxBf16,         // gemm_amx_bf16.h: bf16 (or f16 as two bf16 terms) B tiles, tdpbf16ps
  kPanelsW8,        // gemm_panels_w8.h: int8 panels widened in the load, FMA, scales on the sums
  kPanelsW8Int16,   // gemm_w8_int16.h: int8 panels widened to int16, vpmaddwd with int16 activations
                    // (W8A16 int16; W8A8 and per-token W8A8 on AVX2 without AVX-512, the int8
                    // codes widened)
  kInt8Stream,      // matmul_int8.cpp: each int8 weight row front to back, widened in registers
  kInt8Tiles,       // matmul_int8.cpp: dot_tile / a block widened once for every row (dot_tile.h)
  kInt8Amx,         // matmul_int8_amx.h: 16 weight rows widened to bf16 A tiles per step
  kAmxDequant,      // gemm_amx_dequant.h: 32 weight rows dequantised once into bf16 tiles per call
  kPanelsInt8,      // gemm_panels_int8.h: VNNI (or AVX2 maddubs) micro-tiles on int8 panels
  kPanelsInt8Amx,   // gemm_panels_int8.h + amx_blocks.h: AMX int8 tiles, folded per 32-block
  kPerTokenAmx,     // gemm_panels_int8.h: per-token rows accumulated whole in AMX int8 C tiles
  kInt8ActRows,     // matmul_int8_act.h: int8 × int8 rows, a plain loop (builds without AVX2 / VNNI), no panels
  kInt8Loop,        // smoothquant.cpp: the plain int32 loop (builds without VNNI)
  kInt4Rows,        // matmul_int4_rows.h: codes to exact floats by vpermps, FMA
  kInt4Dequant,     // matmul_int4.cpp: AVX2 unpack per tile, or a block dequantised once per call
  kInt4Panels,      // gemm_int4_panels.h: VNNI (or AVX2 maddubs) on the group panels
  kInt4PanelsAmx,   // gemm_int4_panels.h: AMX int8 tiles on the group panels
  kInt4PanelsInt16, // gemm_int4_panels.h: vpdpwssd (AVX2: vpmaddwd) on the group panels, int16 activations
  kInt4PanelsF32,   // gemm_int4_panels.h: AVX2 codes widened in their rows' lanes, fp32 FMA
  kInt4ActRows,     // matmul_int4_act.h: int4 × int8 rows (AVX2 maddubs / VNNI), no panels
  kGgufPanels,      // gemm_gguf.h: VNNI tiles on the packed blocks
  kGgufPanelsAmx,   // gemm_gguf.h + amx_blocks.h: AMX int8 tiles on the packed blocks
  kGgufAvx2,        // gemm_gguf_avx2.h: AVX2 maddubs tiles on the packed blocks
  kGgufActRows,     // matmul_gguf.h: the file's blocks against int8 activation blocks
  kGgufRows,        // matmul_gguf.h: the file's blocks widened to float against fp32 activations
};

struct CpuKernelInfo {
  const char* name;          // as `inferlab kernels` and `inferlab bench` print it
  CpuArithmetic arithmetic;  // the peak that bounds it
  const char* source;        // where it is written
};
const CpuKernelInfo& cpu_kernel_info(CpuKernel k);
const char* cpu_arithmetic_name(CpuArithmetic a);  // "fp32 FMA", "AMX int8", ...
const CpuKernelInfo* find_cpu_kernel(std::string_view name);  // by its name; null when unknown

// What the plan needs of a linear beyond its format: its shape, its group or block type, and
// what it packed at load (packing depends on the build: see each linear).
struct CpuLinearShape {
  int out = 0, in = 0;
  int group_size = 0;              // kW4A16, kW4A16Int16, kW4A8
  GgmlType type = GgmlType::kQ8_0;  // kGguf, kGgufFp32: the block type as held (Q5_0 / IQ4_NL transcoded: Q8_0)
  int weight_terms = 1;            // kF16: bf16 terms per weight on the AMX tiles (1: amx = bf16, 2: split)
  bool amx_packed = false;         // kF16, kBf16: the AMX B tiles were packed (parameter amx not off)
  bool packed = true;              // the panels / packed blocks were packed (else the row-major fallback)
};

// The kernel a pass of n >= 1 token rows takes.
CpuKernel plan_cpu_linear(CpuFormat f, int n, const CpuLinearShape& s, const CpuIsa& isa);

// ---- The thresholds (token rows), measured where they are set (docs/kernels.md) ----

// f16 / bf16: gemm_amx_bf16 with one weight term (bf16 weights) from 7 rows, where the half
// panels' 7-row tile runs out of registers (TinyLlama bf16, AMX Xeon, 2026-12-06, two rounds
// alternating, cost over one row, panels / tiles: 5 rows 1.09-1.11 / 1.22-1.31, 6 rows 1.10-1.14
// / 1.14-1.20, 7 rows 1.33-1.35 / 1.18-1.19, 8 rows 1.45-1.47 / 1.19-1.21, 12 rows 1.96 /
// 1.22-1.25; the tiles' 16 token rows half empty cost little against the weights' read); with two
// (f16 as exact hi + lo: twice the bytes), from 24: at 16 rows the fp32 panels, which read the
// f16 weights once, took 0.86-0.88x the tiles' time, at 24 1.23x (TinyLlama f16, 2026-12-06).
constexpr int kAmxBf16MinRows = 7;
constexpr int kAmxBf16SplitMinRows = 24;
constexpr int amx_bf16_min_rows(int weight_terms) { return weight_terms == 1 ? kAmxBf16MinRows : kAmxBf16SplitMinRows; }
// W8A16: the int8 panels (gemm_panels_w8.h) at every row count where the AMX bf16 tiles do not
// run (AVX2-only Zen 3, 2026-12-06, TinyLlama, alternating: 8 / 16 / 128-row passes 273-280 /
// 416-480 / 3068-3291 ms on matmul_int8's tiles, 141-155 / 270-287 / 2068-2148 on the panels,
// level with f16's), and up to these rows where they do; from 7 the AMX bf16 tiles of
// matmul_int8_amx are as fast or faster (TinyLlama, 2 threads, AMX Xeon, 2026-12-06, alternating,
// ms panels / tiles: 5 rows 54-55 / 71-76, 6 rows 60 / 70-75, 7 rows 72-77 / ~72, 8 rows 80-83 /
// 72-75).
constexpr int kW8PanelMaxRows = 6;
// W8A16 on matmul_int8_amx up to 16 rows (B-tile columns per row: three, x = hi + mid + lo
// exactly, up to 5 rows; two, hi + lo, from 6; at most 32 columns in two sets of 16), then
// gemm_amx_dequant. Below 5 the AVX-512 row stream is as fast or faster while its tile of
// activations stays in L1: widening 16 weight rows into tiles costs about twice its work at one
// row. Where 3 or 4 rows of activations outgrow kStreamActBytes (TinyLlama's 5632-wide down
// projection) they stream from L2 once per weight row, and the tiles run from
// kInt8AmxWideMinRows instead (2 threads from DRAM, alternating, AMX Xeon, 2026-12-06: 2048 x
// 5632 3 rows 9.5 -> 12.4 GB/s, 4 rows 7.4 -> 12.2; 2048-wide rows 3 rows 0.8x, 4 rows 0.9x).
constexpr int kInt8AmxMinRows = 5;
constexpr int kInt8AmxWideMinRows = 3;
constexpr int kInt8AmxMaxRows = 16;
constexpr std::size_t kStreamActBytes = std::size_t{32} << 10;
// W8A16 without AMX: from these rows a block of weight rows is widened once into a buffer for
// every token row (matmul_int8.cpp); below, each row is widened in registers per tile.
constexpr int kInt8WidenOnceRows = 8;
// gemm_amx_dequant needs rows of at least one tile step.
constexpr int kAmxDequantMinIn = 32;
// W4A16: the register lookup (int4_rows) up to these rows (matmul_int4_rows.h: each token row
// costs 9 vector operations per 128 codes against 16 shared ones per weight row; it stayed ahead
// of dequantising a block of weight rows once up to 8 rows: 1024 x 2048 g32, one thread, Xeon,
// 2026-12-06, 7 rows 437 us, 8 rows dequantised once 661 us), then, where AMX
// runs and in >= kAmxDequantMinIn, gemm_amx_dequant (blocks of 32 weight rows dequantised once by
// a vpermps lookup of the group's 16 values; fp32 sums, ~1e-5 of sum |x w|), else the
// dequantising tiles. Groups of a multiple of 32 take the codes u - z (one exact bf16 term) with
// each group's sums scaled in fp32, from kInt4AmxCodesMinRows, the first count the lookup leaves
// (1 thread, TinyLlama's 5632 x 2048, loaded VM, 2026-12-06 11:12 UTC: 9 rows 0.84x the time of
// the dequantising tiles at g32, 0.70x at g128; 12 rows 0.69x, 0.55x). Other groups take
// s * (u - z) as three bf16 terms (exact) from kInt4AmxMinRows: below it the dequantisation is
// not paid back (g32, 2 threads, 2026-12-06: 16 rows 0.94-1.01x, 32 rows 0.60x).
constexpr int kInt4RowsMaxRows = 8;
constexpr int kInt4AmxMinRows = 16;
constexpr int kInt4AmxCodesMinRows = 9;
// W8A8 (blocks of 32) and the GGUF packed blocks (not Q6_K): AMX int8 tiles from one token tile.
constexpr int kAmxBlocksMinRows = 16;
// SmoothQuant's per-token W8A8: AMX int8 tiles from one token tile (out % 32, in % 64).
constexpr int kPerTokenAmxMinRows = 16;
// W4A8 group panels: AMX int8 tiles from these rows (16 level with the VNNI passes, 32 ahead:
// 106-109 -> 97-102 ms on TinyLlama, 2026-12-06).
constexpr int kInt4PanelsAmxMinRows = 32;
// GGUF blocks held as the file's rows: AMX bf16 dequantising tiles from these rows (matmul_gguf.h).
constexpr int kGgufAmxMinRows = 16;

// ---- The table ----

// One row per format: its name, the strategies that run it, and what its weights are.
struct CpuFormatInfo {
  CpuFormat format;
  const char* name;      // "w8a16"
  const char* plugins;   // "int8 activations = int16 (auto on AVX2 / AVX-512)"
  const char* weights;   // "int8 per output channel, fp32 scale"
};
const std::vector<CpuFormatInfo>& cpu_formats();
const CpuFormatInfo* find_cpu_format(std::string_view name);  // null when unknown

}  // namespace inferlab::cpu
