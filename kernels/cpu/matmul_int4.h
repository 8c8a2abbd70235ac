// Threaded, vectorised weight-only int4 matmul with group-wise scales:
// y[n, out] = x[n, in] · W^T with W[o, i] = scale[o, g] * (u[o, i] - zero[o, g]), codes packed
// two per byte (format: kernels/ref/matmul_int4.h).
//
// Roofline: at n = 1 (decode) each weight is used once, so the kernel is bound by memory
// bandwidth if unpacking keeps up; int4 moves ~0.5 byte (+ a scale per group) per
// multiply-add instead of fp32's 4. Unpacking is the price: 8 codes are one 32-bit load,
// broadcast, shifted per lane, masked, offset by the zero point, converted and scaled in
// registers, then feed up to 4 token rows. From kDequantOnceRows token rows on, a block of
// weight rows is dequantized once into a float buffer shared by every token row. With AVX-512
// and up to kInt4RowsMaxRows token rows (decode, speculative verification, a few sequences) the
// codes become exact floats in registers by a vpermps lookup and meet the fp32 activations in
// FMAs, each weight row read once for all token rows (matmul_int4_rows.h). Threads split
// the output channels. `inferlab_bench --benchmark_filter=matmul_` compares it with int8 and fp32;
// parity with the reference is tested in tests/kernels/test_matmul_int4.cpp.
#pragma once
#include <cstdint>

#include "inferlab/thread_pool.h"
#include "kernels/cpu/linear_plan.h"

namespace inferlab::cpu {

// Which rows take which path (the register lookup up to kInt4RowsMaxRows; where the AMX bf16
// tiles run, gemm_amx_dequant from kInt4AmxCodesMinRows or kInt4AmxMinRows; the dequantising
// tiles otherwise) is plan_cpu_linear's (linear_plan.h, with the measurements behind it).

// x: [n, in], packed: [out, ceil(in / 2)], scale: [out, G], zero: [out, G] or nullptr
// (symmetric: zero point 8), y: [n, out], G = ceil(in / group_size). group_size must be a
// positive multiple of 8 (so every group starts on a 4-byte boundary of its row); throws
// inferlab::Error otherwise. y must not alias x.
void matmul_int4(const float* x, const std::uint8_t* packed, const float* scale,
                 const std::uint8_t* zero, float* y, int n, int out, int in, int group_size,
                 ThreadPool& pool);

}  // namespace inferlab::cpu
