// The few-row path of matmul_int8 (W8A16) on Intel AMX's bf16 tiles: each 64-byte step of 16
// weight rows is widened in registers to bfloat16 (every int8 is exact in bf16) and stored as two
// 1 KiB A tiles in a per-thread staging buffer (the L1-resident operand `tdpbf16ps` loads, never
// a dequantised row buffer); the activations, split once per call into two bfloat16 (hi + lo,
// ~16 significant bits: the result is fp32 activations' to ~1e-5 of sum |x w|, asserted by the
// parity test), form the B tiles, two columns per token row. So up to 8 token rows cost one tile
// product per step, the weights are read once for all rows, and the conversion is shared: a few
// rows cost about what one does. Runs where amx_bf16_enabled() (kernels/cpu/amx.h); matmul_int8
// keeps its AVX-512 row stream otherwise. Internal to kernels/cpu; contract: matmul_int8.h.
#pragma once
#include <cstdint>

#include "inferlab/thread_pool.h"

namespace inferlab::cpu {

// Token rows matmul_int8 sends here (two B-tile columns each: hi and lo, so at most 8). Below 5
// the AVX-512 row stream is as fast or faster: widening 16 weight rows into tiles costs about
// twice its work at one row. 16 TinyLlama layers streamed from DRAM, 2 threads, alternating, best
// of 5 (loaded AMX Xeon, 2026-12-06): 3 rows 1.38x, 4 rows 1.07x the row stream's time, 5 rows
// 0.86x, 6 rows 0.70x, 8 rows 0.51x.
constexpr int kInt8AmxMinRows = 5;
constexpr int kInt8AmxMaxRows = 8;

// y[n, out] = x[n, in] · (scale ⊙ Q)^T as matmul_int8; requires amx_bf16_enabled() and
// 1 <= n <= kInt8AmxMaxRows (throws inferlab::Error otherwise).
void matmul_int8_amx(const float* x, const std::int8_t* q, const float* scale, float* y, int n, int out, int in,
                     ThreadPool& pool);

}  // namespace inferlab::cpu
