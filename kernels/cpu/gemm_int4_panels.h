// W4A8 on int4 groups (kernels/ref/matmul_int4.h: codes 0..15, an fp32 scale and a uint8 zero
// point per group of `group_size` inputs) held as panels of 16 output rows, the layout
// gemm_gguf gives GGUF blocks: one vpdpbusd lane per output row, so a pass of up to 8 token rows
// reads and unpacks each panel once and no lane ever needs a horizontal sum. The same bytes as the
// rows (a permutation of the codes; the scales and zero points transposed per panel), the same
// arithmetic as matmul_int4_act: per 32-block an exact integer dot product of the codes with the
// int8 activations (cpu::quantize_act_rows), scaled by the block's activation scale, and per group
// the zero point's term and the group's scale. Each token row's sums are formed in the same order
// whatever the row count (speculative verification relies on it). Needs AVX-512 VNNI
// (gemm_int4_panels_vnni.cpp; AMX prefill where the tiles run) or AVX2 (gemm_int4_panels_avx2.cpp:
// `vpmaddubsw` with int16 block sums, a panel's 16 rows as two ymm halves, the same per-output operations); in
// and group_size multiples of 32 (int4_panels_available). Parity: tests/kernels/test_gemm_int4_panels.cpp.
#pragma once
#include <cstdint>

#include "inferlab/huge_pages.h"
#include "inferlab/thread_pool.h"

namespace inferlab::cpu {

constexpr int kInt4PanelRows = 16;

struct Int4Panels {
  int out = 0, in = 0, group_size = 0, groups = 0, panels = 0;
  // Panel p, block b (inputs 32b .. 32b+31), vector j (0..3), lane l (row 16p + l), byte t:
  // low nibble the code of input 32b + 8j + t, high nibble that of input 32b + 8j + 4 + t.
  // Rows past `out` hold code 0, scale 0 and zero point 0.
  HugeVector<std::uint8_t> codes;  // [panels][in / 32][4][16][4]
  HugeVector<float> scale;         // [panels][groups][16]
  HugeVector<std::uint8_t> zero;   // [panels][groups][16]; empty when symmetric
  bool symmetric() const { return zero.empty(); }
};

// Whether this build has the kernel and it takes the shape: in and group_size multiples of 32.
bool int4_panels_available(int in, int group_size);

// The panels of packed [out, ceil(in / 2)], scale [out, groups], zero [out, groups] or null
// (symmetric). Throws Error where int4_panels_available is false.
Int4Panels pack_int4_panels(const std::uint8_t* packed, const float* scale, const std::uint8_t* zero, int out, int in,
                            int group_size);

// Row `row` back in the row format: packed_row [ceil(in / 2)], scale_row [groups], zero_row
// [groups] (untouched when symmetric).
void unpack_int4_panels_row(const Int4Panels& w, int row, std::uint8_t* packed_row, float* scale_row,
                            std::uint8_t* zero_row);

// Bytes the panels hold for the real rows (codes, scales, zero points; the padding rows left out):
// those of the row format.
std::uint64_t int4_panels_bytes(const Int4Panels& w);

// y[n, out] = x · Wᵀ for xq [n, in], xs [n, in / 32] from cpu::quantize_act_rows (block 32).
void gemm_int4_panels(const std::int8_t* xq, const float* xs, const Int4Panels& w, float* y, int n, ThreadPool& pool);

// W4A16 in integers: activations as int16 per 32-block (scale max |x| / 32767: an error of at most
// 2^-16 of the block's largest value, below an fp16 rounding of it) against the same panels, in
// `vpdpwssd` (int16 pairs into int32 lanes; AVX2: `vpmaddwd`). The activations lie in the panels' pair order: within
// each 8 inputs, 0 2 4 6 1 3 5 7 (int16_pair_slot).
constexpr float kInt16ActMax = 32767.0f;
// Where input i of a 32-block sits in the pair order.
constexpr int int16_pair_slot(int i) { return (i & ~7) + ((i & 1) ? 4 + (i & 7) / 2 : (i & 7) / 2); }
// x [n, in] (in a multiple of 32) as xq [n, in] int16 in the pair order and xs [n, in / 32]:
// xq = round(x / xs), xs = max |x| / 32767 per block (0 for an all-zero block).
void quantize_panel_acts_int16(const float* x, int n, int in, std::int16_t* xq, float* xs);
// The same into the calling thread's scratch, valid until its next call (the int4 and int8
// linears' int16 paths).
struct PanelActsInt16 {
  const std::int16_t* xq;
  const float* xs;
};
PanelActsInt16 quantize_panel_acts_int16(const float* x, int n, int in);
// y[n, out] = x · Wᵀ for xq, xs from quantize_panel_acts_int16. Passes of up to 8 token rows as
// gemm_int4_panels' (no AMX path).
void gemm_int4_panels_int16(const std::int16_t* xq, const float* xs, const Int4Panels& w, float* y, int n,
                            ThreadPool& pool);

// W4A16 with exact fp32 activations on the same panels, for AVX2 builds without AVX-512 (where
// matmul_int4_rows' register lookup serves it): each code widened to an exact float in the lane
// of its row (an AND and a conversion per 8 weights, shared by the pass's token rows), multiplied
// with the activation in an FMA, the zero point's term taken off once per group. Passes as
// gemm_int4_panels'. x [n, in] fp32, y [n, out].
bool int4_panels_f32_available(int in, int group_size);
void gemm_int4_panels_f32(const float* x, const Int4Panels& w, float* y, int n, ThreadPool& pool);

}  // namespace inferlab::cpu
