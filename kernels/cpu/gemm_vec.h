// The vector type the packed GEMMs (gemm_panels_*.h) are written in, chosen at compile time
// (-march=native, see CMakeLists.txt INFERLAB_NATIVE): AVX-512F (16 floats), AVX2+FMA (8
// floats) or a scalar fallback (1 float) from simd.h, each with the micro-kernel shape that fits
// its register file. The packed weight layout depends on the shape (kPanel columns per panel),
// so a PackedPanels built in one build is only read by kernels of the same build.
#pragma once

#include "kernels/cpu/simd.h"

namespace inferlab::cpu::gemm {

#if defined(__AVX512F__)
// 32 zmm registers: 8 rows x 2 vectors = 16 accumulators, 2 weight vectors, broadcasts.
using Vec = Vec512;
inline constexpr int kRows = 8, kVectors = 2;
inline constexpr const char* kIsaName = "avx512";
#elif defined(__AVX2__) && defined(__FMA__)
// 16 ymm registers: 6 rows x 2 vectors = 12 accumulators, 2 weight vectors, 1 broadcast.
using Vec = Vec256;
inline constexpr int kRows = 6, kVectors = 2;
inline constexpr const char* kIsaName = "avx2";
#else
using Vec = VecScalar;
inline constexpr int kRows = 4, kVectors = 4;
inline constexpr const char* kIsaName = "scalar";
#endif

// Output channels per packed weight panel (the micro-kernel's column count).
inline constexpr int kPanel = Vec::kWidth * kVectors;

}  // namespace inferlab::cpu::gemm
