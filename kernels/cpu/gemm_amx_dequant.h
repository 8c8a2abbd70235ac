// The prefill GEMM of the weight formats that dequantise rows of weights (int8 W8A16, int4 groups
// W4A16, GGUF blocks with fp32 activations) on Intel AMX's bf16 tiles (`tdpbf16ps`), instead of
// fp32 FMAs. One kernel for every format: the caller hands a row dequantiser (fp32 values of one
// weight row from the format's bytes) and the kernel, per thread and per block of 32 output
// channels, dequantises those rows once into this thread's buffer (fp32 one row at a time, then
// bf16 A tiles: 16 channels x 32 inputs; never a dequantised copy of the matrix), and multiplies
// them with x, split once per call into two bf16 terms (hi + lo: B tiles of 16 input pairs x 16
// token rows), for every token row. The weights are thus read and dequantised once per call for
// all n rows; the products run at the tile unit's rate (16x the fp32 FMA peak per core).
//
// Precision: each weight value as `weight_terms` bf16 terms — 1 when every value is exact in bf16
// (an int8 code with the per-channel scale, or an int4 code with its group's scale, applied to the
// fp32 sums), 3 (hi + mid + lo: exact for
// every fp32 value, so the weights applied are the format's bit for bit) for general values such
// as s * (q - z) of int4 groups of other sizes or a GGUF block's s * c + o; 2 (hi + lo, 16 significant bits) is
// ~1.25x faster at 128 rows but rounds such weights. x as hi + lo; x_lo meets only w_hi (the
// other products, below 2^-16 relative, are dropped); sums in fp32. The result is an
// fp32-activation matmul to ~1e-5 of sum |x w|.
// Runs where amx_bf16_enabled() (kernels/cpu/amx.h); callers keep their own paths otherwise
// (INFERLAB_AMX=0, CPUs or builds without AMX-BF16). Parity: tests/kernels/test_gemm_amx_dequant.cpp.
#pragma once
#include "inferlab/thread_pool.h"
#include "kernels/cpu/linear_plan.h"

namespace inferlab::cpu {

// Callers send rows of kAmxDequantMinIn inputs or more here (linear_plan.h): one tile's depth.
// Shorter rows would multiply mostly zero padding, and a sum of fewer terms averages less of the
// per-product error (up to ~3 * 2^-16 relative: x_lo and w_lo rounded, x_lo w_lo dropped) away.

// A weight matrix W [out, in] as the kernel reads it.
struct AmxDequantWeights {
  // Writes row o of W as `in` fp32 values to dst (called from the pool's threads, concurrently for
  // different rows; ctx is the caller's).
  using RowFn = void (*)(const void* ctx, int o, float* dst);
  RowFn row = nullptr;
  const void* ctx = nullptr;
  int out = 0, in = 0;
  int weight_terms = 3;                  // 1: every value exact in bf16; 2: hi + lo; 3: exact
  const float* channel_scale = nullptr;  // [out]: y[r, o] = channel_scale[o] * (x_r · W_o); or none
  // Group-scaled codes (int4 groups): row() writes each weight's integer code (u - z, exact in one
  // bf16 term: weight_terms 1) and W[o, k] = group_scale[o * G + k / group_size] * code, G =
  // ceil(in / group_size). The tiles sum x times the codes of one group (group_size a multiple of
  // 32: whole tile steps) and the vector units add scale * that sum to fp32 accumulators, so the
  // weights applied are the fp32 products s * (u - z) exactly, at one weight term's tile cost
  // instead of three.
  const float* group_scale = nullptr;  // [out, G] or none
  int group_size = 0;
};

// y[n, out] = x[n, in] · Wᵀ as described above. Requires amx_bf16_enabled(), out, in >= 1,
// weight_terms 1, 2 or 3 and, with group_scale, weight_terms 1 and group_size a positive multiple
// of 32 (throws inferlab::Error otherwise); n <= 0 is a no-op. y must not alias x.
void gemm_amx_dequant(const float* x, int n, const AmxDequantWeights& w, float* y, ThreadPool& pool);

}  // namespace inferlab::cpu
