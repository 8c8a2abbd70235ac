// Internals of the int4 group panels (gemm_int4_panels.h), shared by the format's files:
// gemm_int4_panels.cpp (packing, the public calls, the activations' zero-point sums),
// gemm_int4_panels_vnni.cpp (AVX-512 VNNI passes and the AMX prefill), gemm_int4_panels_avx2.cpp
// (AVX2 passes on half or whole panels, and W4A16 with fp32 activations). Internal to kernels/cpu.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "inferlab/thread_pool.h"
#include "kernels/cpu/decode_prefetch.h"
#include "kernels/cpu/gemm_int4_panels.h"
#include "kernels/ref/matmul_int8.h"

// Which kernels this build has (compile-time, -march=native): VNNI passes, else AVX2 ones.
#if defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define INFERLAB_INT4_PANELS 1
#define INFERLAB_INT4_PANELS_VNNI 1
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)  // CpuIsa::avx2
#define INFERLAB_INT4_PANELS 1
#define INFERLAB_INT4_PANELS_AVX2 1
#endif

namespace inferlab::cpu::int4_panels {

using ref::kActBlock;
constexpr int P = kInt4PanelRows;
constexpr int kVectors = 4;                    // per block and panel: 8 codes of each row
constexpr int kBlockBytes = kVectors * P * 4;  // 256: one panel's codes of one block


// A pass's activations: int8 (W4A8) or int16 in the pair order (gemm_int4_panels_int16).
template <class T>
struct Acts {
  const T* xq;      // [n, in]
  const float* xs;  // [n, blocks]
  const float* zc;  // [n, groups]: per group, sum over its blocks of xs * sum(xq)
  int in, blocks, groups, per;  // per: blocks per group
};
using PassArgs = Acts<std::int8_t>;

// The group scales and zero points of NP panels (streams of their own), group g's successors twice
// as far ahead as the codes: TinyLlama W4A8 g128 one row, 2 threads, alternating: 22.5-24.4 ->
// 22.0-22.8 ms (4 rows level).
template <int NP>
inline void prefetch_group(const float* sw, const std::uint8_t* zw, std::size_t panel_cells, int g, int per, int ahead) {
  if (ahead <= 0) return;
  const int sp = std::max(1, 2 * ahead / (per * kBlockBytes));
  for (int q = 0; q < NP; ++q) {
    prefetch_line(sw + q * panel_cells + static_cast<std::size_t>(g + sp) * P);
    if (zw) prefetch_line(zw + q * panel_cells + static_cast<std::size_t>(g + sp) * P);
  }
}

// The panels of w split across the pool for n token rows, grains of about 2^16 multiply-adds:
// fn(p0, p1) runs panels [p0, p1) (the VNNI and AVX2 passes' drivers).
template <class Fn>
void parallel_for_panels(const Int4Panels& w, int n, ThreadPool& pool, const Fn& fn) {
  const std::size_t per_panel = static_cast<std::size_t>(P) * w.in * static_cast<std::size_t>(n);
  pool.parallel_for(static_cast<std::size_t>(w.panels), fn, std::max<std::size_t>(1, (std::size_t{1} << 16) / per_panel));
}

// W4A16 with exact fp32 activations on the panels (gemm_int4_panels_f32): a code vector's byte t
// holds the codes of inputs 8j + t (low nibble) and 8j + 4 + t (high). `vpand` with 0xF << 8t
// leaves code * 2^8t in each row's int32 lane (the high nibbles the same from the vector shifted
// right by 4), which `vcvtdq2ps` makes an exact float, so the FMA takes the activation pre-scaled
// by 2^-8t (xw; exact for activations above 2^-102): the FMA's product is code * x, rounded once
// into the sum as with the codes' own floats. Per group the zero point's term is taken off the
// products' sum once: s (Σ x q - z Σ x), as the int8 passes fold theirs. Each row's products run
// in two chains (low and high nibbles) whatever the row count, so a row's bits do not depend on its
// pass (GemmInt4Panels.Fp32ActivationsMatchTheReference); the AVX2 half panels and the AVX-512
// whole ones run the same operations per lane in the same order (equal outputs across the two ISAs
// by construction: no machine here runs both).
struct F32Acts {
  const float* xw;    // [n, in]: x, input 8j + t and 8j + 4 + t scaled by 2^-8t (t < 4)
  const float* gsum;  // [n, groups]: Σ x over the group
  int in, blocks, groups, per;
};
// x [n, w.in] as F32Acts, in the calling thread's scratch (valid until its next call).
F32Acts make_f32_acts(const float* x, const Int4Panels& w, int n);

// y [n, w.out] for a's n token rows: the VNNI passes (with the AMX prefill where it runs) and the
// AVX2 passes; each is defined only where its ISA is built (INFERLAB_INT4_PANELS_*).
void run_vnni(const Acts<std::int8_t>& a, const Int4Panels& w, float* y, int n, ThreadPool& pool);
void run_vnni(const Acts<std::int16_t>& a, const Int4Panels& w, float* y, int n, ThreadPool& pool);
void run_avx2(const Acts<std::int8_t>& a, const Int4Panels& w, float* y, int n, ThreadPool& pool);
void run_avx2(const Acts<std::int16_t>& a, const Int4Panels& w, float* y, int n, ThreadPool& pool);
// W4A16 with fp32 activations x [n, in] (AVX2 and AVX-512 VNNI builds).
void run_avx2_f32(const float* x, const Int4Panels& w, float* y, int n, ThreadPool& pool);
void run_vnni_f32(const float* x, const Int4Panels& w, float* y, int n, ThreadPool& pool);

}  // namespace inferlab::cpu::int4_panels
