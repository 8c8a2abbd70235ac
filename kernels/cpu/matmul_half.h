// Half-precision-weight matmul on the CPU: y[n, out] = x[n, in] · W^T with W [out, in] stored
// as f16 or bf16 (2 bytes per weight) and x, y fp32. Each thread takes a range of output
// channels; a weight row is widened to fp32 once per call (F16C's vcvtph2ps for f16, a 16-bit
// shift for bf16, scalar bit conversions without AVX2/F16C) and dotted with every row of x
// with fp32 FMAs. Memory-bound at decode (n small): 2 bytes per weight, half of fp32's traffic.
#pragma once
#include <cstdint>

#include "inferlab/thread_pool.h"

namespace inferlab::cpu {

enum class HalfFormat { kF16, kBF16 };

void matmul_half(const float* x, const std::uint16_t* w, float* y, int n, int out, int in, HalfFormat format,
                 ThreadPool& pool);

}  // namespace inferlab::cpu
