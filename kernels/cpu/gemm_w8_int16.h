// W8A16 in integers: int8 weight codes (kernels/ref/matmul_int8.h: symmetric, one fp32 scale per
// output channel) against 16-bit activations held as int16 per 32-block
// (quantize_panel_acts_int16: scale max |x| / 32767, an error of at most 2^-16 of the block's
// largest value, below an fp16 rounding of it), the int4 groups' int16 path (gemm_int4_panels.h)
// for int8 codes. Panels of 16 output rows, one int32 lane per row: each step a pair of inputs,
// the codes widened to int16 once (`vpmovsxbw`) for every token row of the pass and multiplied
// with the row's activation pair in `vpmaddwd` (two products into an int32 lane), summed exactly
// in int32 over the block (|sum| <= 32 * 127 * 32767 < 2^31), converted and scaled by the block's
// activation scale into an fp32 sum, and the channel scale applied to the finished sum.
//
// Why: the fp32 W8A16 panels (gemm_panels_w8.h) spend a widening and a conversion per 8 weights
// and an FMA per 8 products, and on AVX2 machines such as Zen 3 FMAs and conversions share two
// pipes, so their few-row passes are bound by them; here 16 products take one `vpmaddwd` (and a
// `vpaddd` on the other pipes), the widening shared by the pass's rows (docs/kernels.md, "W8A16
// in integers").
//
// Bits: a row's sums are formed in the same order whatever the row count, the tile or the ISA
// (exact int32 block sums, fp32 FMAs in block order, one multiply by the channel scale), so a row
// alone gives the bits it gets in any batch (speculative verification relies on it) and the
// portable loop (builds without AVX2) gives the bits of the vector passes. Parity:
// tests/kernels/test_gemm_w8_int16.cpp.
#pragma once
#include <cstdint>
#include <span>

#include "inferlab/huge_pages.h"
#include "inferlab/thread_pool.h"

namespace inferlab::cpu {

constexpr int kW8Int16PanelRows = 16;

struct PackedW8Int16 {
  int out = 0, in = 0, panels = 0;
  // Panel p, block b (inputs 32b .. 32b+31), step j (0..15: the pair of inputs the activations'
  // pair order puts in int16 slots 2j, 2j+1: int16_pair_slot), lane l (row 16p + l), t (0, 1):
  // the code of that pair's input t. Rows past `out` hold code 0 and scale 0.
  HugeVector<std::int8_t> codes;  // [panels][in / 32][16][16][2]
  HugeVector<float> scale;        // [panels * 16]
};

// Whether the kernel takes the shape: in a positive multiple of 32 (every build: the portable
// loop where there is no AVX2).
bool w8_int16_available(int in);

// The panels of q [out, in] (row-major codes) with scale [out]. Throws inferlab::Error where
// w8_int16_available(in) is false or out <= 0.
PackedW8Int16 pack_w8_int16(const std::int8_t* q, const float* scale, int out, int in);

// Row `row`'s weights as the codes stand for them (scale * code) into dst [in].
void unpack_w8_int16_row(const PackedW8Int16& w, int row, float* dst);

// Bytes the panels hold for the real rows (codes and scales; the padding rows left out).
std::uint64_t w8_int16_bytes(const PackedW8Int16& w);

// y[n, out] = x · Wᵀ for xq [n, in] int16 in the pair order and xs [n, in / 32] from
// quantize_panel_acts_int16 (gemm_int4_panels.h). n <= 0 is a no-op.
void gemm_w8_int16(const std::int16_t* xq, const float* xs, const PackedW8Int16& w, float* y, int n, ThreadPool& pool);

// W8A8 (int8 activation blocks of 32: cpu::quantize_act_rows) on these panels: xq [n, in] int8
// (in a multiple of 32) as int16 in the pair order into out [n, in], exact. The int8 products
// then run through gemm_w8_int16 with the blocks' own scales, which on AVX2 without VNNI gives
// the bits of gemm_panels_int8 in 0.73-0.84x its time from 3 rows (its `vpmaddubsw` sign trick
// spends three multiply-pipe operations per 32 products, `vpmaddwd` two; SmolLM2's shapes,
// one thread, Zen 3, 2026-12-07): the plan's W8A8 kernel on such builds.
void widen_act_blocks_int16(const std::int8_t* xq, int n, int in, std::int16_t* out);

// Per-token W8A8 (smoothquant: cpu::quantize_act_rows with block = in, xs [n] one scale a row)
// on these panels, the int8 codes widened by widen_act_blocks_int16: each output one exact int32
// sum over the whole row, y[r, o] = (float(sum) * xs[r]) * scale[o], the plain loop's operations,
// so its bits. in at most kW8Int16PerTokenMaxIn (|sum| <= in * 127^2 < 2^31; throws beyond).
constexpr int kW8Int16PerTokenMaxIn = 65536;
void gemm_w8_int16_per_token(const std::int16_t* xq, const float* xs, const PackedW8Int16& w, float* y, int n,
                             ThreadPool& pool);

// One matrix of a group: y [n, w->out].
struct GemmW8Int16Output {
  const PackedW8Int16* w;
  float* y;
};
// Every member's y (as gemm_w8_int16 on each, bit for bit) in one pool dispatch (wq/wk/wv,
// w1/w3: panel_union.h). The members share in (throws inferlab::Error otherwise).
void gemm_w8_int16_group(const std::int16_t* xq, const float* xs, std::span<const GemmW8Int16Output> group, int n,
                         ThreadPool& pool);

}  // namespace inferlab::cpu
