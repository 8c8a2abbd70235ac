// The few-row path of matmul_int8 (W8A16) on Intel AMX's bf16 tiles: each 64-byte step of 16
// weight rows is widened in registers to bfloat16 (every int8 is exact in bf16) and stored as two
// 1 KiB A tiles in a per-thread staging buffer (the L1-resident operand `tdpbf16ps` loads, never
// a dequantised row buffer); the activations, split once per call into three bfloat16 for up to 5
// token rows (x = hi + mid + lo exactly: every product exact, as on the FMAs) or two from 6 (hi +
// lo, ~16 significant bits: fp32 activations' result to ~1e-5 of sum |x w|, asserted by the
// parity test), form the B tiles, one column per part, in one set of 16 columns up to 8 rows and
// two from 9. So up to 16 token rows cost one or two tile products per A tile, the weights are
// read once for all rows, and the conversion is shared (TinyLlama, AMX Xeon, 2026-12-06: a 16-row
// pass took 3.98x a one-row pass on gemm_amx_dequant, which widens the weights once per call into
// tiles for every 16 token rows, and 2.2-2.4x here). Runs where amx_bf16_enabled() (kernels/cpu/amx.h); matmul_int8
// keeps its AVX-512 row stream otherwise. Internal to kernels/cpu; contract: matmul_int8.h.
#pragma once
#include <cstddef>
#include <cstdint>

#include "inferlab/thread_pool.h"
#include "kernels/cpu/linear_plan.h"

namespace inferlab::cpu {

// The rows matmul_int8 sends here (kInt8AmxMinRows .. kInt8AmxMaxRows, and from
// kInt8AmxWideMinRows for wide rows) are linear_plan.h's, with the measurements behind them.

// y[n, out] = x[n, in] · (scale ⊙ Q)^T as matmul_int8; requires amx_bf16_enabled() and
// 1 <= n <= kInt8AmxMaxRows (throws inferlab::Error otherwise).
void matmul_int8_amx(const float* x, const std::int8_t* q, const float* scale, float* y, int n, int out, int in,
                     ThreadPool& pool);

}  // namespace inferlab::cpu
