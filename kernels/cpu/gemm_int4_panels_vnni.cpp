// The int4 group panels on AVX-512 VNNI (see gemm_int4_panels.h), with the AMX int8 prefill
// where the tiles run.
#include "kernels/cpu/gemm_int4_panels_impl.h"

#if INFERLAB_INT4_PANELS_VNNI
#include <immintrin.h>

#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/cpu/amx.h"
#include "kernels/cpu/amx_blocks.h"
#include "kernels/cpu/linear_plan.h"
#include "kernels/ref/matmul_int4.h"

namespace inferlab::cpu::int4_panels {
namespace {

// Token rows a pass takes: 8 accumulators, 8 group sums and the block's 8 code vectors stay in
// registers (kernels.accumulators_in_registers), each row's block sum one vpdpbusd chain; up to
// kTwoChainRows rows take two chains each, to hide the instruction's latency. Against passes of 4
// rows, two chains each (SmolLM2-shaped layers x30, g128, one thread, AMX Xeon, 2026-12-06,
// alternating): 4 rows level (3.1-3.2 ms), 6 rows 4.9-5.1 -> 4.0, 8 rows 5.9-6.3 -> 5.2-5.5, 16
// rows 13.5-13.9 -> 10.4-10.8.
constexpr int kPassRows = 8;
constexpr int kTwoChainRows = 3;


// The 4 bytes at p in every 32-bit lane (4 int8 activations, or 2 int16 ones).
template <class T>
inline __m512i bcast4(const T* p) {
  std::int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// Panel p's codes, group scales and zero points (null when symmetric), and the strides from one
// panel to the next (a pass over NP panels reads panel p + q at q strides on).
struct PanelAt {
  const std::uint8_t* codes;
  const float* sw;
  const std::uint8_t* zw;
  std::size_t panel_bytes, panel_cells;
  // Panel p + q's codes of block b, and the cell of its group g in sw / zw.
  const std::uint8_t* block(int q, int b) const {
    return codes + q * panel_bytes + static_cast<std::size_t>(b) * kBlockBytes;
  }
  std::size_t cell(int q, int g) const { return q * panel_cells + static_cast<std::size_t>(g) * P; }
};
inline PanelAt panel_at(const Int4Panels& w, int blocks, int groups, int p) {
  const std::size_t pb = static_cast<std::size_t>(blocks) * kBlockBytes, pc = static_cast<std::size_t>(groups) * P;
  return {w.codes.data() + static_cast<std::size_t>(p) * pb, w.scale.data() + static_cast<std::size_t>(p) * pc,
          w.symmetric() ? nullptr : w.zero.data() + static_cast<std::size_t>(p) * pc, pb, pc};
}

// acc[r] += s ⊙ (accg[r] - z ⊙ zc[r * zc_stride]) for the group whose 16 scales and zero points
// sit at `cell` of the panel's sw and zw.
template <int R>
inline void fold_group(const float* sw, const std::uint8_t* zw, std::size_t cell, const float* zc, int zc_stride,
                       const __m512 (&accg)[R], __m512 (&acc)[R]) {
  constexpr __mmask16 kAll = 0xFFFF;  // zero-mask forms: GCC 12 (see gemm_panels_int8.cpp)
  const __m512 z =
      zw ? _mm512_maskz_cvtepi32_ps(
               kAll, _mm512_maskz_cvtepu8_epi32(kAll, _mm_loadu_si128(reinterpret_cast<const __m128i*>(zw + cell))))
         : _mm512_set1_ps(static_cast<float>(ref::kInt4SymmetricZero));
  const __m512 s = _mm512_loadu_ps(sw + cell);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
    acc[r] = _mm512_fmadd_ps(
        _mm512_fnmadd_ps(z, _mm512_set1_ps(zc[static_cast<std::size_t>(r) * zc_stride]), accg[r]), s, acc[r]);
}

// y[r * ys + l] = lane l of acc[r] for the panel's `valid` rows.
template <int R>
inline void store_panel(const __m512 (&acc)[R], int valid, float* y, std::size_t ys) {
  const __mmask16 keep = valid >= P ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << valid) - 1u);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(y + static_cast<std::size_t>(r) * ys, keep, acc[r]);
}

// y[r * ys + q * 16 + l] for the R token rows from r0 and the valid[q] rows of the NP panels from
// p (one pass over the blocks: NP weight streams per thread).
//
// With int16 activations (W4A16 in integers, gemm_int4_panels_int16): each 16-bit word of a
// code vector holds 4 nibbles (inputs 8j + t, 8j + 4 + t, 8j + t + 1, 8j + t + 5 for t = 0 or 2 by
// the word), so plane s = (word >> 4s) & 0xF holds one code per word, and vpdpwssd takes a lane's
// two words against the 32-bit broadcast of the activation pair that the panels' pair order
// (quantize_panel_acts_int16) puts there. 4 planes (6 operations) and 4 vpdpwssd per vector and
// token row, against 2 masks and 2 vpdpbusd for int8; one row takes 4 chains, up to kTwoChainRows
// rows 2, to hide the instruction's latency. Block sums as panel_pass (|sum| <= 32 * 15 * 32767
// fits int32).
template <int R, int NP, class T>
void panel_pass(const Acts<T>& a, const Int4Panels& w, int p, int r0, float* y, std::size_t ys, const int* valid,
                int ahead) {
  constexpr bool kInt16 = std::is_same_v<T, std::int16_t>;
  [[maybe_unused]] constexpr __mmask32 kAll32 = ~__mmask32{0};
  [[maybe_unused]] constexpr int kChains = R == 1 ? 4 : R <= kTwoChainRows ? 2 : 1;  // int16: chains per row
  constexpr __mmask16 kAll = 0xFFFF;  // zero-mask forms: GCC 12 (see gemm_panels_int8.cpp)
  const PanelAt at = panel_at(w, a.blocks, a.groups, p);
  const T* xq = a.xq + static_cast<std::size_t>(r0) * a.in;
  const float* xs = a.xs + static_cast<std::size_t>(r0) * a.blocks;
  const float* zc = a.zc + static_cast<std::size_t>(r0) * a.groups;
  const __m512i mask = kInt16 ? _mm512_set1_epi16(0x000F) : _mm512_set1_epi8(0x0F);
  __m512 acc[NP][R];
#pragma GCC unroll 16
  for (int q = 0; q < NP; ++q)
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) acc[q][r] = _mm512_setzero_ps();
  for (int g = 0; g < a.groups; ++g) {
    __m512 accg[NP][R];
#pragma GCC unroll 16
    for (int q = 0; q < NP; ++q)
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) accg[q][r] = _mm512_setzero_ps();
    const int b1 = std::min(a.blocks, (g + 1) * a.per);
    prefetch_group<NP>(at.sw, at.zw, at.panel_cells, g, a.per, ahead);
    for (int b = g * a.per; b < b1; ++b) {
      if constexpr (kInt16) {
        const std::uint8_t* pc[NP];
  #pragma GCC unroll 2
        for (int q = 0; q < NP; ++q) {
          pc[q] = at.block(q, b);
          prefetch_ahead(pc[q], kBlockBytes, ahead);
        }
        __m512i d[NP][R][kChains];
  #pragma GCC unroll 2
        for (int q = 0; q < NP; ++q)
  #pragma GCC unroll 16
          for (int r = 0; r < R; ++r)
  #pragma GCC unroll 4
            for (int c = 0; c < kChains; ++c) d[q][r][c] = _mm512_setzero_si512();
  #pragma GCC unroll 4
        for (int j = 0; j < kVectors; ++j) {
          __m512i u[NP][4];
  #pragma GCC unroll 2
          for (int q = 0; q < NP; ++q) {
            const __m512i v = _mm512_loadu_si512(pc[q] + 64 * j);
            u[q][0] = _mm512_and_si512(v, mask);
            u[q][1] = _mm512_and_si512(_mm512_maskz_srli_epi16(kAll32, v, 4), mask);
            u[q][2] = _mm512_and_si512(_mm512_maskz_srli_epi16(kAll32, v, 8), mask);
            u[q][3] = _mm512_maskz_srli_epi16(kAll32, v, 12);
          }
  #pragma GCC unroll 16
          for (int r = 0; r < R; ++r) {
            const std::int16_t* xb =
                xq + static_cast<std::size_t>(r) * a.in + static_cast<std::size_t>(b) * kActBlock + 8 * j;
  #pragma GCC unroll 2
            for (int q = 0; q < NP; ++q)
  #pragma GCC unroll 4
              for (int t = 0; t < 4; ++t)
                d[q][r][t % kChains] = _mm512_dpwssd_epi32(d[q][r][t % kChains], u[q][t], bcast4(xb + 2 * t));
          }
        }
  #pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          const __m512 sx = _mm512_set1_ps(xs[static_cast<std::size_t>(r) * a.blocks + b]);
  #pragma GCC unroll 2
          for (int q = 0; q < NP; ++q) {
            __m512i sum = d[q][r][0];
  #pragma GCC unroll 4
            for (int c = 1; c < kChains; ++c) sum = _mm512_add_epi32(sum, d[q][r][c]);
            accg[q][r] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(kAll, sum), sx, accg[q][r]);
          }
        }
      } else {
        __m512i u[NP][2 * kVectors];
  #pragma GCC unroll 2
        for (int q = 0; q < NP; ++q) {
          const std::uint8_t* pc = at.block(q, b);
          prefetch_ahead(pc, kBlockBytes, ahead);
  #pragma GCC unroll 4
          for (int j = 0; j < kVectors; ++j) {
            const __m512i v = _mm512_loadu_si512(pc + 64 * j);
            u[q][2 * j] = _mm512_and_si512(v, mask);
            u[q][2 * j + 1] = _mm512_and_si512(_mm512_maskz_srli_epi16(~__mmask32{0}, v, 4), mask);
          }
        }
  #pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          const std::int8_t* xb = xq + static_cast<std::size_t>(r) * a.in + static_cast<std::size_t>(b) * kActBlock;
          const __m512 sx = _mm512_set1_ps(xs[static_cast<std::size_t>(r) * a.blocks + b]);
  #pragma GCC unroll 2
          for (int q = 0; q < NP; ++q) {
            __m512i d;
            if constexpr (R <= kTwoChainRows) {  // two chains: few rows hide vpdpbusd's latency
              __m512i d0 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[q][0], bcast4(xb));
              __m512i d1 = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[q][1], bcast4(xb + 4));
  #pragma GCC unroll 4
              for (int j = 1; j < kVectors; ++j) {
                d0 = _mm512_dpbusd_epi32(d0, u[q][2 * j], bcast4(xb + 8 * j));
                d1 = _mm512_dpbusd_epi32(d1, u[q][2 * j + 1], bcast4(xb + 8 * j + 4));
              }
              d = _mm512_add_epi32(d0, d1);
            } else {
              d = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u[q][0], bcast4(xb));
  #pragma GCC unroll 8
              for (int k = 1; k < 2 * kVectors; ++k) d = _mm512_dpbusd_epi32(d, u[q][k], bcast4(xb + 4 * k));
            }
            accg[q][r] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(kAll, d), sx, accg[q][r]);
          }
        }
      }
    }
    // The group: sum over its blocks of xs (dot - zero * sum(x)), times its scale.
#pragma GCC unroll 2
    for (int q = 0; q < NP; ++q)
      fold_group<R>(at.sw, at.zw, at.cell(q, g), zc + g, a.groups, accg[q], acc[q]);
  }
#pragma GCC unroll 2
  for (int q = 0; q < NP; ++q) store_panel<R>(acc[q], valid[q], y + q * P, ys);
}

#if INFERLAB_AMX_INT8
// Prefill on the AMX int8 tiles: a panel's block, its codes masked apart into 8 lines of 16 rows x
// 4 codes (vector j's low nibbles, then its high ones: inputs 4k .. 4k + 3 in line k), is
// `tdpbsud`'s unsigned K x 16 operand as it stands; 16 token rows x the block's 32 int8
// activations are its signed 16 x K one. One tile product gives the 16 x 16 int32 block sums the
// VNNI pass forms lane by lane, and the fold repeats the pass's operations in its order, so both
// paths give the same bits (row-count invariance across the threshold). The fold is the cost (a
// tile store, then 16 loads, conversions and FMAs per block); it keeps 16 group sums in
// registers and the tile's outputs in y. Tried and not kept (2026-12-06): 8-token tiles with
// every sum in registers, with or without two C tiles folded one block late (128 rows of
// SmolLM2-shaped layers x30: 1.06-1.10x the VNNI passes, against 1.15-1.27x for this).
// Token rows from which prefill takes the AMX int8 tiles where they run (below;
// kInt4PanelsAmxMinRows, linear_plan.h, from these measurements): TinyLlama W4A8
// g128, 2 threads, AMX Xeon, 2026-12-06, alternating, t/s VNNI passes -> tiles: pp16 287-293 ->
// 210-240, pp32 323-328 -> 290-306, pp64 321-333 -> 359-372, pp128 319-335 -> 385-409. With the
// next panel's codes prefetched during the tile products (21:50 UTC, two rounds, 32-row pass):
// from 48 rows 106-109 ms, from 32 99-102, from 16 97-101 (16 rows level with the passes).
constexpr int kAmxRows = 16;  // token rows per tile
// C tile 0: 16 token rows x 16 int32; A tile 2: 16 token rows x 32 activations; B tile 3: 8 lines.
const AmxConfig& amx_config() {
  static const AmxConfig c = AmxConfig{}.tile(0, kAmxRows, 64).tile(2, kAmxRows, kActBlock).tile(3, kActBlock / 4, 64);
  return c;
}
constexpr int kAmxLine = 64;  // bytes per B line: 16 rows x 4 codes

// The token side, made once per call: per tile of 16 token rows (zero rows past n) and block, the
// rows' 32 activations as one 512-byte run, their scales; per tile and group the zero-point sums.
struct AmxTokens {
  int tiles = 0;
  std::vector<std::int8_t> x;  // [tiles][blocks][16][32]
  std::vector<float> xs;       // [tiles][blocks][16]
  std::vector<float> zc;       // [tiles][groups][16]
};

void make_amx_tokens(const PassArgs& a, int n, AmxTokens& k) {
  k.tiles = (n + kAmxRows - 1) / kAmxRows;
  k.x.assign(static_cast<std::size_t>(k.tiles) * a.blocks * kAmxRows * kActBlock, 0);
  k.xs.assign(static_cast<std::size_t>(k.tiles) * a.blocks * kAmxRows, 0.0f);
  k.zc.assign(static_cast<std::size_t>(k.tiles) * a.groups * kAmxRows, 0.0f);
  for (int r = 0; r < n; ++r) {
    const int t = r / kAmxRows, i = r % kAmxRows;
    for (int b = 0; b < a.blocks; ++b) {
      const std::size_t at = (static_cast<std::size_t>(t) * a.blocks + b) * kAmxRows + i;
      std::memcpy(k.x.data() + at * kActBlock, a.xq + static_cast<std::size_t>(r) * a.in + static_cast<std::size_t>(b) * kActBlock,
                  kActBlock);
      k.xs[at] = a.xs[static_cast<std::size_t>(r) * a.blocks + b];
    }
    for (int g = 0; g < a.groups; ++g)
      k.zc[(static_cast<std::size_t>(t) * a.groups + g) * kAmxRows + i] = a.zc[static_cast<std::size_t>(r) * a.groups + g];
  }
}

// Panel p's codes as B lines: [blocks][8 lines][64 bytes] into u.
void unpack_amx_panel(const Int4Panels& w, int blocks, int p, std::uint8_t* u) {
  const std::uint8_t* codes = w.codes.data() + static_cast<std::size_t>(p) * blocks * kBlockBytes;
  const __m512i mask = _mm512_set1_epi8(0x0F);
  for (int b = 0; b < blocks; ++b)
    for (int j = 0; j < kVectors; ++j) {
      const __m512i v = _mm512_loadu_si512(codes + static_cast<std::size_t>(b) * kBlockBytes + 64 * j);
      std::uint8_t* dst = u + (static_cast<std::size_t>(b) * 2 * kVectors + 2 * j) * kAmxLine;
      _mm512_storeu_si512(dst, _mm512_and_si512(v, mask));
      _mm512_storeu_si512(dst + kAmxLine, _mm512_and_si512(_mm512_maskz_srli_epi16(~__mmask32{0}, v, 4), mask));
    }
}

// y[r * ys + l] for every token row and the `valid` rows of panel p, its codes unpacked in u.
void amx_panel(const PassArgs& a, const Int4Panels& w, const AmxTokens& k, int n, const std::uint8_t* u, int p,
               float* y, std::size_t ys, int valid, SpreadPrefetch next) {
  constexpr __mmask16 kAll = 0xFFFF;
  const PanelAt at = panel_at(w, a.blocks, a.groups, p);
  const float* sw = at.sw;
  const std::uint8_t* zw = at.zw;
  const std::int8_t* kx = k.x.data();
  const float* kxs = k.xs.data();
  const float* kzc = k.zc.data();
  alignas(64) std::int32_t c[kAmxRows][16];
  const __mmask16 keep = valid >= P ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << valid) - 1u);
  for (int t = 0; t < k.tiles; ++t) {
    // The 16 group sums in registers; the tile's outputs accumulate in y, one load and store per
    // row and group (16 more sums would not fit the registers).
    const int rows = std::min(kAmxRows, n - t * kAmxRows);
    float* yt = y + static_cast<std::size_t>(t) * kAmxRows * ys;
    for (int r = 0; r < rows; ++r) _mm512_mask_storeu_ps(yt + r * ys, keep, _mm512_setzero_ps());
    amx_blocks::Acc accg;
    for (int g = 0; g < a.groups; ++g) {
#pragma GCC unroll 16
      for (int r = 0; r < kAmxRows; ++r) accg.row(r) = _mm512_setzero_ps();
      const int b1 = std::min(a.blocks, (g + 1) * a.per);
      for (int b = g * a.per; b < b1; ++b) {
        const std::size_t at = (static_cast<std::size_t>(t) * a.blocks + b) * kAmxRows;
        _tile_zero(0);
        _tile_loadd(2, kx + at * kActBlock, kActBlock);
        _tile_loadd(3, u + static_cast<std::size_t>(b) * 2 * kVectors * kAmxLine, kAmxLine);
        _tile_dpbsud(0, 2, 3);
        _tile_stored(0, c, 64);
        next.step();
#pragma GCC unroll 16
        for (int r = 0; r < kAmxRows; ++r)
          accg.row(r) = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(kAll, _mm512_load_si512(c[r])), _mm512_set1_ps(kxs[at + r]),
                                        accg.row(r));
      }
      const std::size_t cell = static_cast<std::size_t>(g) * P;
      const __m512 z =
          zw ? _mm512_maskz_cvtepi32_ps(
                   kAll, _mm512_maskz_cvtepu8_epi32(kAll, _mm_loadu_si128(reinterpret_cast<const __m128i*>(zw + cell))))
             : _mm512_set1_ps(static_cast<float>(ref::kInt4SymmetricZero));
      const __m512 s = _mm512_loadu_ps(sw + cell);
      const float* zc = kzc + (static_cast<std::size_t>(t) * a.groups + g) * kAmxRows;
#pragma GCC unroll 16
      for (int r = 0; r < kAmxRows; ++r)
        if (r < rows)
          _mm512_mask_storeu_ps(yt + r * ys, keep,
                                _mm512_fmadd_ps(_mm512_fnmadd_ps(z, _mm512_set1_ps(zc[r]), accg.row(r)), s,
                                                _mm512_maskz_loadu_ps(keep, yt + r * ys)));
    }
  }
  next.rest();
}
#endif

// W4A16 with exact fp32 activations (gemm_int4_panels_f32; F32Acts in gemm_int4_panels_impl.h) on
// whole panels, a zmm lane per row: the AVX2 half passes' operations per lane in the same order
// (two chains a row, the group fold). Per 64
// bytes of codes (16 rows x 8 inputs): a shift, 8 ANDs and 8 conversions shared by the pass's
// rows, 8 FMAs a row. Up to kF32PassRows rows a pass (3 x R accumulators beside the 4 masks and
// the codes).
constexpr int kF32PassRows = 4;
template <int R, int NP>
void f32_panel_pass(const F32Acts& a, const Int4Panels& w, int p, int r0, float* y, std::size_t ys, const int* valid,
                    int ahead) {
  constexpr __mmask16 kAll = 0xFFFF;  // zero-mask forms: GCC 12 (see gemm_panels_int8.cpp)
  const PanelAt at = panel_at(w, a.blocks, a.groups, p);
  const float* gsum = a.gsum + static_cast<std::size_t>(r0) * a.groups;
  const __m512i mask[4] = {_mm512_set1_epi32(0xF), _mm512_set1_epi32(0xF00), _mm512_set1_epi32(0xF0000),
                           _mm512_set1_epi32(0xF000000)};
  __m512 acc[NP][R];
#pragma GCC unroll 2
  for (int q = 0; q < NP; ++q)
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) acc[q][r] = _mm512_setzero_ps();
  for (int g = 0; g < a.groups; ++g) {
    __m512 c0[NP][R], c1[NP][R];  // the group's products: low nibbles, high nibbles
#pragma GCC unroll 2
    for (int q = 0; q < NP; ++q)
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) c0[q][r] = c1[q][r] = _mm512_setzero_ps();
    const int b1 = std::min(a.blocks, (g + 1) * a.per);
    prefetch_group<NP>(at.sw, at.zw, at.panel_cells, g, a.per, ahead);
    const float* xr[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
      xr[r] = a.xw + static_cast<std::size_t>(r0 + r) * a.in + static_cast<std::size_t>(g * a.per) * kActBlock;
    for (int b = g * a.per; b < b1; ++b) {
      const std::uint8_t* pc[NP];
#pragma GCC unroll 2
      for (int q = 0; q < NP; ++q) {
        pc[q] = at.block(q, b);
        prefetch_ahead(pc[q], kBlockBytes, ahead);
      }
#pragma GCC unroll 4
      for (int j = 0; j < kVectors; ++j) {
        __m512i v[NP], vh[NP];
#pragma GCC unroll 2
        for (int q = 0; q < NP; ++q) {
          v[q] = _mm512_loadu_si512(pc[q] + 64 * j);
          vh[q] = _mm512_maskz_srli_epi32(kAll, v[q], 4);
        }
#pragma GCC unroll 4
        for (int t = 0; t < 4; ++t) {
          __m512 lo[NP], hi[NP];
#pragma GCC unroll 2
          for (int q = 0; q < NP; ++q) {
            lo[q] = _mm512_maskz_cvtepi32_ps(kAll, _mm512_and_si512(v[q], mask[t]));
            hi[q] = _mm512_maskz_cvtepi32_ps(kAll, _mm512_and_si512(vh[q], mask[t]));
          }
#pragma GCC unroll 8
          for (int r = 0; r < R; ++r) {
            const __m512 xl = _mm512_set1_ps(xr[r][8 * j + t]), xh = _mm512_set1_ps(xr[r][8 * j + 4 + t]);
#pragma GCC unroll 2
            for (int q = 0; q < NP; ++q) {
              c0[q][r] = _mm512_fmadd_ps(lo[q], xl, c0[q][r]);
              c1[q][r] = _mm512_fmadd_ps(hi[q], xh, c1[q][r]);
            }
          }
        }
      }
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) xr[r] += kActBlock;
    }
#pragma GCC unroll 2
    for (int q = 0; q < NP; ++q) {
      __m512 sum[R];
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) sum[r] = _mm512_add_ps(c0[q][r], c1[q][r]);
      fold_group<R>(at.sw, at.zw, at.cell(q, g), gsum + g, a.groups, sum, acc[q]);
    }
  }
#pragma GCC unroll 2
  for (int q = 0; q < NP; ++q) store_panel<R>(acc[q], valid[q], y + q * P, ys);
}

// The VNNI passes over the panels, split across the pool: pass.template operator()<R, NP>(p, r0, y,
// valid, ahead) runs R token rows from r0 (R <= kRows) against NP panels from p, y at (r0, 16p).
template <int kRows = kPassRows, class Pass>
void run_passes(const Int4Panels& w, float* y, int n, ThreadPool& pool, const Pass& pass) {
  const int ahead = decode_prefetch_bytes();
  const std::size_t ys = static_cast<std::size_t>(w.out);
  parallel_for_panels(w, n, pool, [&](std::size_t p0, std::size_t p1) {
        int p = static_cast<int>(p0);
        // Decode: two panels a pass, two weight streams per thread (TinyLlama W4A8 g128 one row, 2
        // threads, AMX Xeon, 2026-12-06, alternating: 26.2-27.1 -> 24.8-25.6 ms).
        if (n == 1)
          for (; p + 2 <= static_cast<int>(p1); p += 2) {
            const int valid[2] = {std::min(P, w.out - p * P), std::min(P, w.out - (p + 1) * P)};
            pass.template operator()<1, 2>(p, 0, y + static_cast<std::size_t>(p) * P, valid, ahead);
          }
        for (; p < static_cast<int>(p1); ++p) {
          const int valid[1] = {std::min(P, w.out - p * P)};
          // The panel once from memory, then from L1 / L2 for every further group of kRows rows.
          for (int r0 = 0; r0 < n; r0 += kRows) {
            float* yp = y + static_cast<std::size_t>(r0) * ys + static_cast<std::size_t>(p) * P;
            const int ahead_once = r0 == 0 ? ahead : 0;
            switch (std::min(kRows, n - r0)) {
              case 1: pass.template operator()<1, 1>(p, r0, yp, valid, ahead_once); break;
              case 2: pass.template operator()<2, 1>(p, r0, yp, valid, ahead_once); break;
              case 3: pass.template operator()<3, 1>(p, r0, yp, valid, ahead_once); break;
              case 4: pass.template operator()<4, 1>(p, r0, yp, valid, ahead_once); break;
              case 5: if constexpr (kRows >= 5) pass.template operator()<5, 1>(p, r0, yp, valid, ahead_once); break;
              case 6: if constexpr (kRows >= 6) pass.template operator()<6, 1>(p, r0, yp, valid, ahead_once); break;
              case 7: if constexpr (kRows >= 7) pass.template operator()<7, 1>(p, r0, yp, valid, ahead_once); break;
              default: if constexpr (kRows >= 8) pass.template operator()<8, 1>(p, r0, yp, valid, ahead_once); break;
            }
          }
        }
      });
}

}  // namespace

void run_vnni(const Acts<std::int8_t>& a, const Int4Panels& w, float* y, int n, ThreadPool& pool) {
  const std::size_t ys = static_cast<std::size_t>(w.out);
#if INFERLAB_AMX_INT8
  if (plan_cpu_linear(CpuFormat::kW4A8, n, CpuLinearShape{.out = w.out, .in = w.in, .group_size = w.group_size},
                      CpuIsa::host()) == CpuKernel::kInt4PanelsAmx) {
    thread_local AmxTokens tokens_buffer;
    make_amx_tokens(a, n, tokens_buffer);
    const AmxTokens& tokens = tokens_buffer;  // the workers reach the caller's buffer through this
    const std::size_t grain = std::max<std::size_t>(1, (std::size_t{1} << 18) / (static_cast<std::size_t>(P) * a.in * n));
    pool.parallel_for(
        static_cast<std::size_t>(w.panels),
        [&](std::size_t p0, std::size_t p1) {
          amx_config().load();
          thread_local std::vector<std::uint8_t> unpacked;
          unpacked.resize(static_cast<std::size_t>(a.blocks) * 2 * kVectors * kAmxLine);
          std::uint8_t* u = unpacked.data();
          for (int p = static_cast<int>(p0); p < static_cast<int>(p1); ++p) {
            unpack_amx_panel(w, a.blocks, p, u);
            asm volatile("" ::: "memory");  // the tile loads name no memory operand (gemm_gguf.cpp)
            // The next panel's codes (this thread's next, as a rule) into L2 while this one computes
            // (amx_blocks.h's panel does the same; docs/kernels.md "Next panel into L2").
            const std::size_t cb = static_cast<std::size_t>(a.blocks) * kBlockBytes;
            const SpreadPrefetch next = p + 1 < w.panels ? SpreadPrefetch(w.codes.data() + (p + 1) * cb, cb, tokens.tiles * a.blocks)
                                                         : SpreadPrefetch{};
            amx_panel(a, w, tokens, n, u, p, y + static_cast<std::size_t>(p) * P, ys, std::min(P, w.out - p * P), next);
          }
        },
        grain);
    return;
  }
#endif
  run_passes(w, y, n, pool, [&]<int R, int NP>(int p, int r0, float* yp, const int* valid, int ahead) {
    panel_pass<R, NP>(a, w, p, r0, yp, ys, valid, ahead);
  });
}

void run_vnni(const Acts<std::int16_t>& a, const Int4Panels& w, float* y, int n, ThreadPool& pool) {
  const std::size_t ys = static_cast<std::size_t>(w.out);
  run_passes(w, y, n, pool, [&]<int R, int NP>(int p, int r0, float* yp, const int* valid, int ahead) {
    panel_pass<R, NP>(a, w, p, r0, yp, ys, valid, ahead);
  });
}

void run_vnni_f32(const float* x, const Int4Panels& w, float* y, int n, ThreadPool& pool) {
  const F32Acts a = make_f32_acts(x, w, n);
  const std::size_t ys = static_cast<std::size_t>(w.out);
  run_passes<kF32PassRows>(w, y, n, pool, [&]<int R, int NP>(int p, int r0, float* yp, const int* valid, int ahead) {
    f32_panel_pass<R, NP>(a, w, p, r0, yp, ys, valid, ahead);
  });
}

}  // namespace inferlab::cpu::int4_panels
#endif
