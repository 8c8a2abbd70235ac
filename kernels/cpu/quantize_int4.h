// ref::quantize_int4_groups at the speed of the machine: the same packed codes, scales and zero
// points (kernels/ref/matmul_int4.h defines them), rows split across a pool, each group's range
// and codes 8 values at a time on AVX2 builds (an exact division, rounding half away from zero
// as std::lround); a group holding a NaN or an infinity, and the values past the group's last
// multiple of 8, take the reference's scalar rule. The int4 linears quantize with it at load
// (TinyLlama's 155 linears had spent half of a `bench` run's 17 s in the scalar loop).
// Parity: tests/kernels/test_matmul_int4.cpp.
#pragma once
#include <cstdint>

#include "inferlab/thread_pool.h"

namespace inferlab::cpu {

void quantize_int4_groups(const float* w, int out, int in, int group_size, std::uint8_t* packed, float* scale,
                          std::uint8_t* zero, ThreadPool& pool);

}  // namespace inferlab::cpu
