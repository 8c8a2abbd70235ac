// Packed, register-blocked, cache-blocked fp32 GEMM y[n, out] = x[n, in] · W^T (the GotoBLAS /
// BLIS structure, specialised to the linears' W [out, in]):
//  - W is repacked once, at load, into panels of gemm::kPanel output channels (32 with
//    AVX-512, 16 with AVX2): panel p is [in][cols], so the micro-kernel reads kPanel weights of
//    one input channel as kVectors contiguous vector loads;
//  - x is packed per call into tiles of gemm::kRows token rows, [in][rows] each, so a row's
//    value at k is one broadcast;
//  - the micro-kernel keeps a kRows x kPanel tile of y in registers (8 x 32 = 16 zmm on
//    AVX-512) and walks kDepth input channels: a [kDepth][kPanel] weight block (32 KiB) stays
//    in L1 while every row tile of x (n x kDepth, in L2) passes over it;
//  - one row tile (at most kRows rows: decode, speculative verification, beam branches, a few
//    sequences) streams each panel once, front to back, with several full panels at once (as
//    many as the registers hold for its rows: 4 at one or two rows, 3 at three or four, 2 at
//    five or six with AVX-512), so a thread reads several weight streams at every row count, not
//    only at decode (costs over one row: `inferlab bench -p 1,2,4,8,16`, docs/performance.md);
//  - threads split the panels (contiguous ranges, one pool call); gemm_panels_f32_group runs
//    several matrices reading one x (wq/wk/wv, w1/w3) as one call over the union of their
//    panels (kernels/cpu/panel_union.h), x packed once.
// Each output is summed in a fixed order (k ascending within blocks of kDepth, blocks added in
// order), independent of n and of the thread count, so a token's row is the same whether it is
// computed alone (decode) or in a batch (prefill).
//
// Roofline: 2 * n * out * in flop per call against the machine's FMA peak
// (`inferlab_bench --benchmark_filter=PeakFma`); at n = 1 the panel layout streams W
// sequentially (4 bytes per multiply-add: memory bound). Benchmarks: `inferlab_bench
// --benchmark_filter=GemmPanelsF32`; parity with kernels/ref: tests/kernels/test_gemm_panels.cpp.
#pragma once
#include <cstddef>
#include <span>
#include <vector>

#include "inferlab/huge_pages.h"
#include "inferlab/thread_pool.h"

namespace inferlab::cpu {

// W [out, in] in panels: panel p covers output channels [p * kPanel, p * kPanel + cols) with
// cols = min(kPanel, out - p * kPanel), stored [in][cols] from data[p * kPanel * in]. Same
// bytes as W (no padding). kPanel is gemm::kPanel of kernels/cpu/gemm_vec.h, kept out of
// this header so that including it does not depend on the translation unit's -m flags.
struct PackedPanelsF32 {
  int out = 0, in = 0;
  HugeVector<float> data;  // [out * in], panel-major (2 MiB pages once large)
};

// Repacks w [out, in] (row-major) into panels. Throws inferlab::Error on non-positive sizes.
PackedPanelsF32 pack_panels_f32(const float* w, int out, int in);

// Row `row` of W (0 <= row < out) back in row-major order: out[in] (the embedding lookup of a
// tied classifier reads it).
void unpack_panel_row_f32(const PackedPanelsF32& w, int row, float* out);

// x: [n, in], y: [n, out] (y must not alias x). n <= 0 is a no-op.
void gemm_panels_f32(const float* x, const PackedPanelsF32& w, float* y, int n, ThreadPool& pool);

// One matrix of a group: y [n, w->out].
struct GemmPanelsF32Output {
  const PackedPanelsF32* w;
  float* y;
};
// Every member's y = x · Wᵀ (as gemm_panels_f32 on each, bit for bit) in one pool dispatch (none
// when the group is less than one grain of work). The members share in (throws inferlab::Error
// otherwise). n <= 0 is a no-op.
void gemm_panels_f32_group(const float* x, std::span<const GemmPanelsF32Output> group, int n, ThreadPool& pool);

}  // namespace inferlab::cpu
