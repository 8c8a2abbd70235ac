// Prefill GEMM of the half-precision linears on Intel AMX's bf16 tiles (`tdpbf16ps`: a 16 x 32
// bf16 tile times a 32 x 16 one into 16 x 16 fp32 sums, 16 times the fp32 FMA peak per core).
// Weights are repacked once, at load, into B tiles (16 rows of 32 bf16: input pairs interleaved,
// 16 output channels per tile row); each call rounds x to bf16 A tiles; sums are fp32.
//
// Precision is chosen by the number of bf16 terms per operand (a "split": v = hi + lo with
// hi = bf16(v), lo = bf16(v - hi), 16 significant bits):
//  - weight_terms = 1 holds bf16(w) (exact for bf16 weights, a rounding of f16 ones: 2^-8);
//    weight_terms = 2 holds hi + lo, exact for any f16 weight (11 bits <= 16).
//  - x_terms = 1 rounds x to bf16 (relative 2^-8); x_terms = 2 splits it (about 2^-16).
//  The products summed are x_hi*w_hi, x_lo*w_hi (x_terms = 2) and x_hi*w_lo (weight_terms = 2);
//  the dropped x_lo*w_lo is below 2^-16 relative.
// K (in) needs no alignment: the tiles are zero-padded to 32 inputs and 16 outputs.
// Runs where amx_bf16_enabled() (kernels/cpu/amx.h); callers keep their own path otherwise and
// for fewer than amx_bf16_min_rows(weight_terms) rows. Parity: tests/kernels/test_gemm_amx_bf16.cpp.
#pragma once
#include <cstdint>

#include "inferlab/huge_pages.h"
#include "inferlab/thread_pool.h"
#include "kernels/cpu/linear_plan.h"
#include "kernels/cpu/gemm_panels_half.h"

namespace inferlab::cpu {

// Rows from which it is worth running: amx_bf16_min_rows (linear_plan.h).

struct PackedAmxBf16 {
  int out = 0, in = 0;
  int weight_terms = 1;
  int out_tiles = 0, k_chunks = 0;  // ceil(out / 16), ceil(in / 32)
  // [out_tiles][k_chunks][weight_terms][16 pairs][16 outputs][2]: one 1 KiB B tile each.
  HugeVector<std::uint16_t> data;
};

// Packs w [out, in] (row-major, stored in `format`'s bits) into B tiles of weight_terms (1 or 2)
// bf16 terms. Throws inferlab::Error on non-positive sizes or another term count.
PackedAmxBf16 pack_amx_bf16(const std::uint16_t* w, int out, int in, HalfFormat format, int weight_terms);

// y[n, out] = x[n, in] · W^T as described above, x rounded to x_terms (1 or 2) bf16 terms.
// Requires amx_bf16_enabled() (throws inferlab::Error otherwise, or on x_terms not 1 or 2);
// n <= 0 is a no-op. y must not alias x.
void gemm_amx_bf16(const float* x, const PackedAmxBf16& w, int x_terms, float* y, int n, ThreadPool& pool);

}  // namespace inferlab::cpu
