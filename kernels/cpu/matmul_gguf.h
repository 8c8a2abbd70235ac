// Native matmuls over a GGUF checkpoint's own blocks (inferlab/gguf_blocks.h): Q8_0, Q4_0,
// Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K and IQ4_XS rows are read as stored,
// never dequantised into an fp32 copy (matmul_gguf_formats.h: one struct per format).
//
// Every format is seen as chunks of 32 codes c_i (unsigned 0..63, or signed int8 for Q8_0) with,
// per half-chunk of 16, a scale s and offset o such that w_i = s * c_i + o (Q4_0: s = d,
// o = -8d; Q4_K: s = d * sc_j, o = -dmin * m_j; Q6_K: s = d * sc, o = -32 d * sc). Then
//   sum_i w_i x_i = sum_halves ( s * sum_i c_i x_i + o * sum_i x_i ),
// so a chunk costs its unpacking plus one dot; the offsets need only per-16 sums of x.
//
// Roofline: decode (n = 1) streams the blocks once — 4.5 (Q4_0), 5 (Q4_1), 4.5 (Q4_K), 6.56 (Q6_K)
// or 8.5 (Q8_0) bits per weight. matmul_gguf_act takes x quantised per 32-block (per 256 for the
// K-quants: llama.cpp's Q8_0 / Q8_K activation blocks) and does the dots in integer lanes
// (`maddubs` + `madd`), so it is bound by the bytes; matmul_gguf keeps x in fp32 and widens each code to float (bounded by the widening,
// but equal to dequantise-then-matmul up to float rounding). Threads split the output rows; a
// chunk's codes are unpacked once for up to 4 token rows; where the AMX bf16 tiles run, prefill
// from kGgufAmxMinRows rows goes to gemm_amx_dequant instead (below).
// Parity with dequantize + fp32 matmul: tests/kernels/test_matmul_gguf.cpp; GB/s:
// `inferlab_bench --benchmark_filter=MatmulGguf`.
#pragma once
#include <cstdint>

#include "inferlab/ggml_types.h"
#include "inferlab/thread_pool.h"
#include "kernels/cpu/linear_plan.h"

namespace inferlab::cpu {

// From kGgufAmxMinRows token rows (linear_plan.h), where the AMX bf16 tiles run
// (kernels/cpu/amx.h), both kernels multiply on them instead (gemm_amx_dequant.h): each weight
// row dequantised once, as two bf16 terms, for all rows against x split into two bf16 terms
// (matmul_gguf_act: x = xq * xs first), so the sums are fp32 ones to ~1e-5 of sum |x w|.

// True for the types these kernels run: Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, Q4_K,
// Q5_K, Q6_K, IQ4_XS.
bool gguf_native_kernel(GgmlType type);

// y[n, out] = x[n, in] · Wᵀ. w: W [out, in] as `out` rows of ggml_tensor_bytes(type, in) bytes;
// in must be a multiple of the type's block (32 or 256). x: [n, in] fp32, y: [n, out].
void matmul_gguf(GgmlType type, const std::uint8_t* w, const float* x, float* y, int n, int out, int in,
                 ThreadPool& pool);

// Values per activation block matmul_gguf_act wants for `type`: 32, or 256 for the 256-blocks,
// whose super-block then meets one activation scale and sums its 8 sub-block dots in integers
// weighted by their integer scales (as llama.cpp's Q8_K blocks).
int gguf_act_block(GgmlType type);

// The same against activation blocks: xq [n, in], xs [n, in / gguf_act_block(type)] from
// cpu::quantize_act_rows(x, n, in, xq, xs, pool, gguf_act_block(type)).
void matmul_gguf_act(GgmlType type, const std::uint8_t* w, const std::int8_t* xq, const float* xs, float* y, int n,
                     int out, int in, ThreadPool& pool);

}  // namespace inferlab::cpu
