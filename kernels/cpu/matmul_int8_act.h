// Threaded int8 x int8 matmul (W8A8 with dynamic activation quantisation):
// y[n, out] = per-block-scaled xq[n, in] · (scale ⊙ Q)^T, the format of kernels/ref/matmul_int8.h
// (per-channel int8 weights, Q8_0-style activation blocks of 32 with one fp32 scale each).
//
// The portable row kernel: an integer loop per 32-block, threads over the output channels. Every
// build with AVX2 or AVX-512 VNNI packs W8A8 weights into kernels/cpu/gemm_panels_int8.h's panels
// and runs them at every row count (the plan's `panels_int8`), so this serves the builds without
// either (the plan's `int8_act_rows`); its AVX2 row stream and tiles were retired on 2026-12-07,
// when the panels had served every AVX2 row count for a day. Parity with the reference:
// tests/kernels/test_matmul_int8.cpp. Beside it, the activation quantisation that every
// int8-activation kernel (panels, GGUF blocks, int4) shares.
#pragma once
#include <cstdint>

#include "inferlab/thread_pool.h"

namespace inferlab::cpu {

// Quantises one row xr [in] into qr [in] and xs [ceil(in / block)]: per block of `block` values
// (ref::kActBlock = 32 by default; 256 for the K-quant kernels of matmul_gguf),
// s = max|x| / 127 and q = clamp(lround(x / s), -127, 127) (the fused RMSNorm/SwiGLU +
// quantisation ops of kernels/cpu/ops_fused.h call it too).
void quantize_act_row(const float* xr, int in, std::int8_t* qr, float* xs, int block = 32);
// Quantises x [n, in] into xq [n, in] and xs [n, ceil(in / block)] (threaded by rows).
void quantize_act_rows(const float* x, int n, int in, std::int8_t* xq, float* xs, ThreadPool& pool, int block = 32);

// xq: [n, in], xs: [n, act_blocks(in)], q: [out, in], scale: [out], y: [n, out].
void matmul_int8_act(const std::int8_t* xq, const float* xs, const std::int8_t* q, const float* scale, float* y,
                     int n, int out, int in, ThreadPool& pool);

}  // namespace inferlab::cpu
