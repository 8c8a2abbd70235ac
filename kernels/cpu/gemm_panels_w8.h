// W8A16 on the packed-panel GEMM (gemm_panels_f32.h: layout, blocking, summation order): int8
// weight codes (kernels/ref/matmul_int8.h: symmetric, one fp32 scale per output channel) stored
// as panels, 1 byte each, widened to fp32 in the micro-kernel's load (vpmovsxbd + vcvtdq2ps) and
// multiplied with the exact fp32 activations in FMAs, one lane per output channel: the f16 /
// bf16 linears' kernel (gemm_panels_half.h) at half their bytes. y = (x · Qᵀ) ⊙ scale, the
// channel scales applied to the finished sums. Decode and few rows read each panel once for all
// rows, front to back, as one stream per thread. Parity: tests/kernels/test_gemm_panels_w8.cpp.
#pragma once
#include <cstdint>
#include <span>

#include "inferlab/huge_pages.h"
#include "inferlab/thread_pool.h"

namespace inferlab::cpu {

// Q [out, in] as int8 panels (the layout of PackedPanelsF32) and the channel scales.
struct PackedPanelsW8 {
  int out = 0, in = 0;
  HugeVector<std::int8_t> data;  // [out * in], panel-major (2 MiB pages once large)
  HugeVector<float> scale;       // [out]
};

// Repacks q [out, in] (row-major codes) with scale [out]. Throws inferlab::Error on non-positive
// sizes.
PackedPanelsW8 pack_panels_w8(const std::int8_t* q, const float* scale, int out, int in);

// x: [n, in] fp32, y: [n, out] (y must not alias x). n <= 0 is a no-op.
void gemm_panels_w8(const float* x, const PackedPanelsW8& w, float* y, int n, ThreadPool& pool);

// One matrix of a group: y [n, w->out].
struct GemmPanelsW8Output {
  const PackedPanelsW8* w;
  float* y;
};
// Every member's y = x · Wᵀ (as gemm_panels_w8 on each, bit for bit) in one pool dispatch
// (gemm_panels_impl.h's group: wq/wk/wv, w1/w3). The members share in (throws inferlab::Error
// otherwise).
void gemm_panels_w8_group(const float* x, std::span<const GemmPanelsW8Output> group, int n, ThreadPool& pool);

}  // namespace inferlab::cpu
