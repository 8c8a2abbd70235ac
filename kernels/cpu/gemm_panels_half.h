// The packed-panel GEMM (gemm_panels_f32.h: layout, blocking, summation order) with weights
// stored as IEEE f16 or bfloat16, 2 bytes each: the micro-kernel widens each weight vector as it
// loads it (F16C's vcvtph2ps for f16, a 16-bit shift for bf16) and multiplies in fp32, so a
// half-precision linear runs the fp32 GEMM's prefill tiles and its decode path at half the
// bytes. y equals gemm_panels_f32 over the widened weights exactly (same order of FMAs).
// Benchmarks: `inferlab_bench --benchmark_filter=GemmPanelsHalf`; parity:
// tests/kernels/test_gemm_panels_half.cpp.
#pragma once
#include <cstdint>
#include <vector>

#include "inferlab/huge_pages.h"
#include "inferlab/thread_pool.h"

namespace inferlab::cpu {

// The two half-precision weight formats: IEEE binary16 (1-5-10 bits) and bfloat16 (1-8-7).
enum class HalfFormat { kF16, kBF16 };

// W [out, in] as half-precision panels (same panel layout as PackedPanelsF32).
struct PackedPanelsHalf {
  int out = 0, in = 0;
  HalfFormat format = HalfFormat::kF16;
  HugeVector<std::uint16_t> data;  // [out * in], panel-major (2 MiB pages once large)
};

// Repacks w [out, in] (row-major, already in `format`'s bits) into panels. Throws
// inferlab::Error on non-positive sizes.
PackedPanelsHalf pack_panels_half(const std::uint16_t* w, int out, int in, HalfFormat format);

// Row `row` of W widened to fp32: out[in].
void unpack_panel_row_half(const PackedPanelsHalf& w, int row, float* out);

// x: [n, in] fp32, y: [n, out] fp32 (y must not alias x). n <= 0 is a no-op.
void gemm_panels_half(const float* x, const PackedPanelsHalf& w, float* y, int n, ThreadPool& pool);

}  // namespace inferlab::cpu
