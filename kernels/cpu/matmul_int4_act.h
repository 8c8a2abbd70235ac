// Threaded int4 x int8 matmul (W4A8 with dynamic activation quantisation): group-wise int4
// weights (kernels/ref/matmul_int4.h) against activation blocks of 32 with one scale each
// (cpu::quantize_act_rows, kernels/cpu/matmul_int8_act.h). group_size must be a multiple of 32.
//
// Roofline: decode streams half a byte per weight. Each 32-code block is unpacked from 16 bytes
// with two masks and an interleave, and its codes u in [0, 15] are exactly the unsigned operand
// `maddubs` wants: sum(u * x) in integer lanes, the zero point applied once per block as
// zero * sum(x). No int4 -> float widening, which bounds the fp32-activation kernel
// (matmul_int4.h). Parity with the reference: tests/kernels/test_matmul_int4.cpp.
#pragma once
#include <cstdint>

#include "inferlab/thread_pool.h"

namespace inferlab::cpu {

// xq: [n, in], xs: [n, act_blocks(in)]; packed/scale/zero as matmul_int4 (zero null: symmetric).
void matmul_int4_act(const std::int8_t* xq, const float* xs, const std::uint8_t* packed, const float* scale,
                     const std::uint8_t* zero, float* y, int n, int out, int in, int group_size, ThreadPool& pool);

}  // namespace inferlab::cpu
