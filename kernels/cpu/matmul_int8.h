// Threaded, vectorised weight-only int8 matmul: y[n, out] = x[n, in] · (scale ⊙ Q)^T with
// Q [out, in] int8 and one fp32 scale per output channel (format: kernels/ref/matmul_int8.h).
//
// Roofline: at n = 1 (decode) each weight is used once, so the kernel is bound by memory
// bandwidth; int8 moves 1 byte per multiply-add instead of fp32's 4, so decode can approach
// 4x the fp32 kernel if the int8 -> float conversion keeps up. Each weight vector is widened
// in registers once and reused for a block of up to 4 token rows; with AVX-512 and fewer than 8
// token rows (decode) each weight row is instead read front to back, 16 codes per step (one
// sequential stream per thread: interleaving 4 rows 8 bytes at a time stalled on loads and ran at
// a third of the speed on SmolLM2; from 2 token rows on, two weight rows side by side share each
// activation load); with the AMX bf16 tiles, 5 to 8 token rows (speculative
// verification, a few sequences) widen 16 weight rows at a time to bf16 tiles that one tile
// product per 32 inputs multiplies with all rows at once (matmul_int8_amx.h); from 9 rows on
// (prefill), blocks of 32 weight rows are widened once into bf16 tiles (exact: one term; the
// channel scale on the fp32 sums) that multiply every token row (gemm_amx_dequant.h; x as two bf16
// terms, ~1e-5 of sum |x w|; TinyLlama's 5632 x 2048, 2 threads, 2026-12-06: 9 rows 0.77x, 16 rows
// 0.46-0.69x, 128 rows 0.18-0.27x the time of the float-buffer path; rows of 32 inputs or more).
// Threads split the output channels. `inferlab_bench --benchmark_filter=MatmulInt8` reports
// weight GB/s against fp32; parity with the reference is tested in
// tests/kernels/test_matmul_int8.cpp and tests/kernels/test_gemm_amx_dequant.cpp.
#pragma once
#include <cstdint>

#include "inferlab/thread_pool.h"

namespace inferlab::cpu {

// x: [n, in], q: [out, in], scale: [out], y: [n, out]. y must not alias x.
void matmul_int8(const float* x, const std::int8_t* q, const float* scale, float* y, int n,
                 int out, int in, ThreadPool& pool);

}  // namespace inferlab::cpu
