// The few-row (decode) path of matmul_int4 on CPUs with AVX-512 BF16: the int4 codes are turned
// into bfloat16 in registers and multiplied by the activations with vdpbf16ps (32 multiply-adds
// per instruction, twice fp32 FMA's), the activations split into two bfloat16 halves (hi + lo,
// ~17 significant bits: the result is fp32 activations' within 1e-5 of sum |x w|, asserted), so it stays
// a weight-only (fp32-activation) kernel. Each weight row is read once, front to back, for all
// token rows (tiles of up to 4), 128 codes per 64-byte load, prefetched ahead. Internal to
// kernels/cpu; contract of the arguments: matmul_int4.h.
#pragma once
#include <cstdint>

#include "inferlab/thread_pool.h"

namespace inferlab::cpu {

// Token rows up to which matmul_int4 takes this path. Each token row reads 4 bytes of prepared
// activations per code against the weights' 0.5, so from 8 rows on dequantizing a block of weight
// rows once into floats shared by every row was faster (2026-12-05, Xeon, 16 rows: 0.6x the time).
constexpr int kInt4Bf16MaxRows = 7;

// Whether this build and group size have the path: AVX-512 F/BW/BF16 compiled in and
// group_size dividing 128 or a multiple of it (each 8-code lane then lies in one group).
bool int4_bf16_supported(int group_size);

// y[n, out] = x[n, in] · W^T as matmul_int4; requires int4_bf16_supported(group_size) and
// 1 <= n <= kInt4Bf16MaxRows (throws inferlab::Error otherwise).
void matmul_int4_bf16(const float* x, const std::uint8_t* packed, const float* scale, const std::uint8_t* zero,
                      float* y, int n, int out, int in, int group_size, ThreadPool& pool);

}  // namespace inferlab::cpu
