// The few-row (decode) path of matmul_int4 on CPUs with AVX-512: the int4 codes become fp32 in
// registers (one vpermps lookup per 16 codes, no conversion) and meet the fp32 activations in FMAs,
// so the products are exact and the sums are fp32 ones (weight-only, W4A16 with fp32 activations).
// Each weight row is read once, front to back, for all token rows (tiles of up to 4 token rows and
// 2 weight rows), 128 codes per 64-byte load, prefetched ahead; no dequantised copy of the weights
// is written. Internal to kernels/cpu; contract of the arguments: matmul_int4.h.
#pragma once
#include <cstdint>

#include "inferlab/thread_pool.h"
#include "kernels/cpu/linear_plan.h"

namespace inferlab::cpu {

// matmul_int4 takes this path up to kInt4RowsMaxRows rows (linear_plan.h).

// Whether this build and group size have the path: AVX-512 F/BW/VL compiled in and group_size
// dividing 128 or a multiple of it (each 8-code lane then lies in one group).
bool int4_rows_supported(int group_size);

// y[n, out] = x[n, in] · W^T as matmul_int4; requires int4_rows_supported(group_size) and
// 1 <= n <= kInt4RowsMaxRows (throws inferlab::Error otherwise).
void matmul_int4_rows(const float* x, const std::uint8_t* packed, const float* scale, const std::uint8_t* zero,
                      float* y, int n, int out, int in, int group_size, ThreadPool& pool);

}  // namespace inferlab::cpu
