// Packed int8 x int8 GEMM for dynamic W8A8 (the format of kernels/ref/matmul_int8.h:
// per-channel int8 weights, activation blocks of 32 with one fp32 scale each), built on
// AVX-512 VNNI `vpdpbusd` (u8 x s8, four products summed into each s32 lane):
//  - W is repacked once into panels of 32 output channels, [in/4][32][4] bytes, so one
//    64-byte load holds 4 consecutive inputs of 16 channels: the operand layout of vpdpbusd;
//  - the codes are held as w + 128 (vpdpbusd's unsigned operand) against the signed
//    activations; per 32-block -128 * sum(x) — one number per token row and block, shared by
//    every channel — starts the block's integer sums, which are then converted once and
//    scaled by the row's block scale with one FMA (the weight scale is applied when the tile
//    is written out). Nothing but codes and scales is stored (an earlier layout fed x + 128
//    and kept an int16 sum(w) per channel and block: 1/16 byte per weight more);
//  - the activations are packed once per call into tiles of 6 rows interleaved per step, with
//    their block scales and sums (kernels/cpu/act_tiles.h), so the micro-kernel reads them
//    through one pointer; one row (decode) is read as it is;
//  - the micro-kernel holds 6 rows x 32 channels (12 zmm of s32 block sums, 12 zmm of fp32
//    sums) over the whole depth (a 32-block's 8 steps unrolled; the panel, 32 x in bytes,
//    stays in L1/L2 while the row tiles pass, and each output is written once), and threads
//    split the panels, as in gemm_panels_f32.h; for one row (decode) 4 panels run at once,
//    so the weights stream front to back;
//  - where AMX runs (kernels/cpu/amx.h), passes of 16 rows and more of whole panels run on the
//    tile unit instead, through the GGUF blocks' AMX code (kernels/cpu/amx_blocks.h): a panel's
//    32-input block is Q8_0's slot layout, read with its offset flipped off, its int32 sums
//    folded into fp32 as micro_tile folds them (the same bits; gemm_panels_int8_uses_amx);
//  - gemm_panels_int8_group runs several matrices reading the same activations (wq/wk/wv,
//    w1/w3) as one parallel_for over the union of their panels, cut into one contiguous run of
//    about equal bytes per thread (kernels/cpu/panel_union.h); x's tiles are packed once.
// Roofline: 2 * n * out * in int ops per call against the measured vpdpbusd peak
// (`inferlab_bench --benchmark_filter=PeakInt8Dot`); benchmarks: --benchmark_filter=GemmPanelsInt8;
// parity with the reference: tests/kernels/test_gemm_panels_int8.cpp. Builds without
// AVX-512 VNNI (compile-time, -march=native) do not have the kernel: gemm_panels_int8_available()
// is false there and callers keep kernels/cpu/matmul_int8_act.h.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "inferlab/huge_pages.h"
#include "inferlab/thread_pool.h"

namespace inferlab::cpu {

// True when this build has the kernel (AVX-512 VNNI).
bool gemm_panels_int8_available();

// Panel p covers channels [32p, 32p + cols), cols = min(32, out - 32p), from data[32p * in4]
// and scale[32p]; in4 = in rounded up to 4 (code 0, held as 128, past in). No channel padding:
// only the last panel is narrower.
struct PackedPanelsInt8 {
  int out = 0, in = 0;
  HugeVector<std::uint8_t> data;  // per panel [in4 / 4][cols][4]: codes + 128 (2 MiB pages once large)
  std::vector<float> scale;       // [out]: weight scale per channel
};

// Bytes held: data and scale (1 byte per weight, rounded up to 4 per channel, plus 4 per channel).
std::uint64_t packed_bytes(const PackedPanelsInt8& w);

// Repacks q [out, in] with scale [out]. Throws inferlab::Error on non-positive sizes or where
// the kernel is not available.
PackedPanelsInt8 pack_panels_int8(const std::int8_t* q, const float* scale, int out, int in);

// Row `row` of the packed weights dequantised: out[in] = scale[row] * codes (the embedding
// lookup of a tied classifier reads it).
void unpack_panel_row_int8(const PackedPanelsInt8& w, int row, float* out);

// xq: [n, in], xs: [n, act_blocks(in)] (kernels/cpu/matmul_int8_act.h quantize_act_rows),
// y: [n, out]. n <= 0 is a no-op.
void gemm_panels_int8(const std::int8_t* xq, const float* xs, const PackedPanelsInt8& w, float* y, int n,
                      ThreadPool& pool);

// True when gemm_panels_int8 (and a group holding w) runs w's n rows on the AMX tiles
// (kernels/cpu/amx_blocks.h: built with AMX int8, granted by the kernel, switched on) rather than
// the VNNI micro-tiles: 32 rows or more (two token tiles; at one the micro-tiles are as fast),
// out % 32 == 0 and in % 32 == 0. Same bits either way.
bool gemm_panels_int8_uses_amx(const PackedPanelsInt8& w, int n);

// One matrix of a group: y [n, w->out].
struct GemmPanelsInt8Output {
  const PackedPanelsInt8* w;
  float* y;
};
// Every member's y = x · Wᵀ (as gemm_panels_int8 on each, bit for bit) in one pool dispatch (none
// when the group is less than one grain of work). The members share in (throws
// inferlab::Error otherwise); their out may differ. n <= 0 is a no-op.
void gemm_panels_int8_group(const std::int8_t* xq, const float* xs, std::span<const GemmPanelsInt8Output> group,
                            int n, ThreadPool& pool);

// Per-token W8A8 (SmoothQuant's dynamic per-token activations): xs [n] one scale per row
// (quantize_act_rows with block = in). Each output is one int32 sum over the whole row (rows
// up to 65,536 inputs; longer ones are cut into blocks of that size sharing the row's scale),
// converted once and scaled: y[r, o] = (float(sum) * xs[r]) * scale[o], the same operations in
// the same order as a plain loop, so bit-identical to it — and without the 32-blocks'
// per-block conversion (3 vector ops per 8 vpdpbusd), the kernel's int8 dot rate rises.
// Where AMX runs (kernels/cpu/amx.h), 16 rows or more of a matrix with out % 32 == 0 and
// in % 64 == 0 run on the tile unit instead (the whole row summed in the C tiles, no fold per
// block), with the same bits; gemm_panels_int8_per_token_uses_amx tells which.
void gemm_panels_int8_per_token(const std::int8_t* xq, const float* xs, const PackedPanelsInt8& w, float* y, int n,
                                ThreadPool& pool);
bool gemm_panels_int8_per_token_uses_amx(const PackedPanelsInt8& w, int n);

}  // namespace inferlab::cpu
