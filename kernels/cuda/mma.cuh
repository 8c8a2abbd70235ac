// Warp-level tensor-core instructions as inline functions (sm_80 and newer; the default build is
// sm_90), for int4_mma.cu, int8_mma.cu and any later tensor-core kernel. Fragment layouts:
// kernels/cuda/mma_fragments.h. Each call multiplies one 16 x K tile of A by one K x 8 tile of B
// and adds into the 16 x 8 accumulator c, in place.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/mma_fragments.h"

namespace inferlab::cuda::mma {

// bf16 x bf16 -> fp32, K = 16 (a: 4 registers of 2 bf16, b: 2 registers).
__device__ __forceinline__ void mma_bf16_16816(float* c, const std::uint32_t* a, const std::uint32_t* b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  (void)c, (void)a, (void)b;
  __trap();  // unreachable: the build targets sm_90 (cmake/InferlabCuda.cmake)
#endif
}

// s8 x s8 -> s32, K = 32 (a: 4 registers of 4 int8, b: 2 registers).
__device__ __forceinline__ void mma_s8_16832(int* c, const std::uint32_t* a, const std::uint32_t* b) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
  (void)c, (void)a, (void)b;
  __trap();
#endif
}

}  // namespace inferlab::cuda::mma
