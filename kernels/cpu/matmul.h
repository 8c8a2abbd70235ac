// Threaded, vectorised fp32 matmul y[n, out] = x[n, in] · W^T (W row-major [out, in], one row
// per output channel — the layout of every Linear).
//
// Roofline: at n = 1 (decode) each weight is used once, so the kernel is bound by memory
// bandwidth (4 bytes per multiply-add); as n grows each weight row, once loaded, is reused
// for a block of token rows held in registers, and the kernel moves towards the FMA peak.
// Threads split the output channels; run `inferlab_bench --benchmark_filter=Matmul` for
// GFLOP/s and GB/s at real model shapes. Parity with kernels/ref/ops.h matmul is tested in
// tests/kernels/test_matmul.cpp.
#pragma once

#include "inferlab/thread_pool.h"

namespace inferlab::cpu {

// x: [n, in], w: [out, in], y: [n, out]. y must not alias x or w.
void matmul_f32(const float* x, const float* w, float* y, int n, int out, int in, ThreadPool& pool);

}  // namespace inferlab::cpu
