// int4 group panels x int8 activation blocks (see gemm_int4_panels.h).
#include "kernels/cpu/gemm_int4_panels.h"
#include "kernels/cpu/linear_plan.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "inferlab/error.h"
#include "kernels/cpu/amx.h"
#include "kernels/cpu/amx_blocks.h"
#include "kernels/cpu/decode_prefetch.h"
#include "kernels/ref/matmul_int4.h"
#include "kernels/ref/matmul_int8.h"

#if defined(__AVX512VNNI__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#include <immintrin.h>
#define INFERLAB_INT4_PANELS 1
#define INFERLAB_INT4_PANELS_VNNI 1
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)  // CpuIsa::avx2
#include <immintrin.h>
#define INFERLAB_INT4_PANELS 1
#define INFERLAB_INT4_PANELS_AVX2 1
#endif

namespace inferlab::cpu {
namespace {

using ref::kActBlock;
constexpr int P = kInt4PanelRows;
constexpr int kVectors = 4;                          // per block and panel: 8 codes of each row
constexpr int kBlockBytes = kVectors * P * 4;        // 256: one panel's codes of one block

inline int code_at(const std::uint8_t* row, int i) {
  const std::uint8_t byte = row[i / 2];
  return (i % 2 == 0) ? (byte & 0x0F) : (byte >> 4);
}

inline std::size_t code_offset(int blocks, int p, int b, int j, int l, int t) {
  return ((static_cast<std::size_t>(p) * blocks + b) * kVectors + j) * (P * 4) + static_cast<std::size_t>(l) * 4 + t;
}

#if INFERLAB_INT4_PANELS_VNNI
// Token rows a pass takes: 8 accumulators, 8 group sums and the block's 8 code vectors stay in
// registers (kernels.accumulators_in_registers), each row's block sum one vpdpbusd chain; up to
// kTwoChainRows rows take two chains each, to hide the instruction's latency. Against passes of 4
// rows, two chains each (SmolLM2-shaped layers x30, g128, one thread, AMX Xeon, 2026-12-06,
// alternating): 4 rows level (3.1-3.2 ms), 6 rows 4.9-5.1 -> 4.0, 8 rows 5.9-6.3 -> 5.2-5.5, 16
// rows 13.5-13.9 -> 10.4-10.8.
constexpr int kPassRows = 8;
constexpr int kTwoChainRows = 3;
#endif

#if INFERLAB_INT4_PANELS

// A pass's activations: int8 (W4A8) or int16 in the pair order (gemm_int4_panels_int16).
template <class T>
struct Acts {
  const T* xq;      // [n, in]
  const float* xs;  // [n, blocks]
  const float* zc;  // [n, groups]: per group, sum over its blocks of xs * sum(xq)
  int in, blocks, groups, per;  // per: blocks per group
};
using PassArgs = Acts<std::int8_t>;
using PassArgs16 = Acts<std::int16_t>;

// Acts for xq [n, in], xs [n, in / 32] against w: the zero-point sums zc formed here, in the
// calling thread's buffer (the workers reach it through the pointer).
template <class T>
Acts<T> make_acts(const T* xq, const float* xs, const Int4Panels& w, int n) {
  const int in = w.in, blocks = in / kActBlock, per = w.group_size / kActBlock;
  thread_local std::vector<float> zc_buffer;
  zc_buffer.assign(static_cast<std::size_t>(n) * w.groups, 0.0f);
  float* const zc = zc_buffer.data();
  for (int r = 0; r < n; ++r)
    for (int b = 0; b < blocks; ++b) {
      const T* xb = xq + static_cast<std::size_t>(r) * in + static_cast<std::size_t>(b) * kActBlock;
      int s = 0;
      for (int i = 0; i < kActBlock; ++i) s += xb[i];
      zc[static_cast<std::size_t>(r) * w.groups + b / per] += xs[static_cast<std::size_t>(r) * blocks + b] * static_cast<float>(s);
    }
  return {xq, xs, zc, in, blocks, w.groups, per};
}

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
#endif

#if INFERLAB_INT4_PANELS_VNNI

// The 4 bytes at p in every 32-bit lane (4 int8 activations, or 2 int16 ones).
template <class T>
inline __m512i bcast4(const T* p) {
  std::int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
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
  const std::size_t panel_bytes = static_cast<std::size_t>(a.blocks) * kBlockBytes, panel_cells = static_cast<std::size_t>(a.groups) * P;
  const std::uint8_t* codes = w.codes.data() + static_cast<std::size_t>(p) * panel_bytes;
  const float* sw = w.scale.data() + static_cast<std::size_t>(p) * panel_cells;
  const std::uint8_t* zw = w.symmetric() ? nullptr : w.zero.data() + static_cast<std::size_t>(p) * panel_cells;
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
    prefetch_group<NP>(sw, zw, panel_cells, g, a.per, ahead);
    for (int b = g * a.per; b < b1; ++b) {
      if constexpr (kInt16) {
        const std::uint8_t* pc[NP];
  #pragma GCC unroll 2
        for (int q = 0; q < NP; ++q) {
          pc[q] = codes + q * panel_bytes + static_cast<std::size_t>(b) * kBlockBytes;
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
          const std::uint8_t* pc = codes + q * panel_bytes + static_cast<std::size_t>(b) * kBlockBytes;
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
      fold_group<R>(sw, zw, q * panel_cells + static_cast<std::size_t>(g) * P, zc + g, a.groups, accg[q], acc[q]);
  }
#pragma GCC unroll 2
  for (int q = 0; q < NP; ++q) store_panel<R>(acc[q], valid[q], y + q * P, ys);
}
#endif


#if INFERLAB_INT4_PANELS_AVX2
// Without AVX-512 VNNI: a panel's 16 rows as two halves of 8, one ymm lane per weight row (bytes
// 0-31 of each 64-byte code vector are rows 0-7, 32-63 rows 8-15), the same per-lane operations as
// the VNNI passes in the same order, so each output gets the same bits on either ISA.
//  - W4A8: `vpmaddubsw` takes a lane's 4 codes (0..15, the unsigned operand) against the token's 4
//    activations broadcast, giving two pair sums of at most 15 * 127 * 2 = 3810 in magnitude, so a
//    whole 32-block's 8 pair sums per lane stay in int16 (|sum| <= 30480) with `vpaddw`, widened
//    by one `vpmaddwd` per block: one multiply and one add per 32 products (gemm_gguf_avx2.cpp's
//    nibble blocks), where VNNI spends one vpdpbusd.
//  - int16 activations: the 4 planes of a vector's 16-bit words (as the VNNI pass) against the
//    activation pairs with `vpmaddwd`, summed in int32 (exact, |sum| <= 32 * 15 * 32767).
// Token rows a half pass takes: R int sums, R group sums and R totals in registers beside the
// codes (16 ymm).
constexpr int kHalfPassRows = 4;
constexpr int kHalf = 8;  // weight rows per half

inline __m256i bcast4_avx2(const void* p) {
  std::int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}
inline __m256i load32_avx2(const std::uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
// Holds v in a register here, so GCC keeps a block's int16 chain as a chain (gemm_gguf_avx2.cpp's pin).
inline void pin_avx2(__m256i& v) { asm("" : "+x"(v)); }

// Half h0 of panel p (its first row 8 h0): the codes, group scales and zero points from there.
struct HalfPanel {
  const std::uint8_t* codes;
  const float* sw;
  const std::uint8_t* zw;    // null when symmetric
  std::size_t panel_bytes;   // codes of a whole panel
  std::size_t panel_cells;   // group cells of a whole panel
  int h0;
};
[[gnu::always_inline]] inline HalfPanel half_panel(const Int4Panels& w, int blocks, int groups, int p, int h0) {
  const std::size_t pb = static_cast<std::size_t>(blocks) * kBlockBytes, pcells = static_cast<std::size_t>(groups) * P;
  return {w.codes.data() + p * pb + kHalf * 4 * h0, w.scale.data() + p * pcells + kHalf * h0,
          w.symmetric() ? nullptr : w.zero.data() + p * pcells + kHalf * h0, pb, pcells, h0};
}
// Group g's cells ahead in this panel's stream, or (next) the next panel's.
[[gnu::always_inline]] inline void prefetch_half_group(HalfPanel hp, int g, int per, int ahead, bool next) {
  if (!next) return prefetch_group<1>(hp.sw, hp.zw, hp.panel_cells, g, per, ahead);
  prefetch_line(hp.sw - kHalf * hp.h0 + hp.panel_cells + static_cast<std::size_t>(g) * P);
  if (hp.zw) prefetch_line(hp.zw - kHalf * hp.h0 + hp.panel_cells + static_cast<std::size_t>(g) * P);
}
// Block b's codes (all 16 rows) ahead in the stream, or the next panel's.
[[gnu::always_inline]] inline void prefetch_half_block(HalfPanel hp, const std::uint8_t* pc, int ahead, bool next) {
  prefetch_ahead(pc - kHalf * 4 * hp.h0, kBlockBytes, next ? static_cast<int>(hp.panel_bytes) : ahead);
}
// acc[q][r] += s ⊙ (sum[q][r] - z ⊙ zc[r * stride]) for group g of halves h0 .. h0 + G - 1 (the
// VNNI passes' fold_group, 8 lanes at a time).
template <int R, int G>
[[gnu::always_inline]] inline void fold_half_group(HalfPanel hp, int g, const float* zc, int stride, const __m256 (&sum)[G][R],
                            __m256 (&acc)[G][R]) {
  for (int q = 0; q < G; ++q) {
    const std::size_t cell = static_cast<std::size_t>(g) * P + kHalf * q;
    const __m256 z = hp.zw ? _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(hp.zw + cell))))
                           : _mm256_set1_ps(static_cast<float>(ref::kInt4SymmetricZero));
    const __m256 s = _mm256_loadu_ps(hp.sw + cell);
    for (int r = 0; r < R; ++r)
      acc[q][r] = _mm256_fmadd_ps(_mm256_fnmadd_ps(z, _mm256_set1_ps(zc[static_cast<std::size_t>(r) * stride + g]), sum[q][r]),
                                  s, acc[q][r]);
  }
}
// y[r * ys + 8 q + l] = lane l of acc[q][r] for the panel's `valid` rows.
template <int R, int G>
[[gnu::always_inline]] inline void store_halves(const __m256 (&acc)[G][R], int h0, int valid, float* y, std::size_t ys) {
  for (int q = 0; q < G; ++q) {
    const int cols = std::clamp(valid - kHalf * (h0 + q), 0, kHalf);
    if (cols == 0) break;
    const __m256i keep = _mm256_cmpgt_epi32(_mm256_set1_epi32(cols), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    for (int r = 0; r < R; ++r) {
      float* out = y + static_cast<std::size_t>(r) * ys + kHalf * q;
      if (cols == kHalf) _mm256_storeu_ps(out, acc[q][r]);
      else _mm256_maskstore_ps(out, keep, acc[q][r]);
    }
  }
}

// y[r * ys + 8 q + l] for the R token rows from r0 and halves h0 .. h0 + G - 1 of panel p (`valid`:
// the panel's real rows; lanes past it are not written).
// `ahead`: the codes and group cells are prefetched that many bytes on in the stream (the first
// pass over a panel); with `next` instead, the next panel's (a later pass over this panel, whose
// codes are in L1 / L2 already: the next panel arrives while it computes).
template <int R, int G, class T>
void half_pass(const Acts<T>& a, const Int4Panels& w, int p, int h0, int r0, float* y, std::size_t ys, int valid,
               int ahead, bool next = false) {
  constexpr bool kInt16 = std::is_same_v<T, std::int16_t>;
  const HalfPanel hp = half_panel(w, a.blocks, a.groups, p, h0);
  const float* xs = a.xs + static_cast<std::size_t>(r0) * a.blocks;
  const float* zc = a.zc + static_cast<std::size_t>(r0) * a.groups;
  const __m256i mask = kInt16 ? _mm256_set1_epi16(0x000F) : _mm256_set1_epi8(0x0F);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[G][R];
  for (int q = 0; q < G; ++q)
    for (int r = 0; r < R; ++r) acc[q][r] = _mm256_setzero_ps();
  for (int g = 0; g < a.groups; ++g) {
    __m256 accg[G][R];
    for (int q = 0; q < G; ++q)
      for (int r = 0; r < R; ++r) accg[q][r] = _mm256_setzero_ps();
    const int b1 = std::min(a.blocks, (g + 1) * a.per);
    prefetch_half_group(hp, g, a.per, ahead, next);
    // Each token row's block b. (Activations stored pre-broadcast, 32 bytes per 4, so that a step's
    // operand is a plain load: 1.12x faster hot in L2, 0.9x over weights streamed from memory, where
    // their 8x the bytes crowd L1; SmolLM2-shaped g128, 4 rows, one thread, Zen 3, 2026-12-07.)
    const T* xr[R];
    for (int r = 0; r < R; ++r)
      xr[r] = a.xq + static_cast<std::size_t>(r0 + r) * a.in + static_cast<std::size_t>(g * a.per) * kActBlock;
    for (int b = g * a.per; b < b1; ++b) {
      const std::uint8_t* pc = hp.codes + static_cast<std::size_t>(b) * kBlockBytes;
      prefetch_half_block(hp, pc, ahead, next);
      __m256i d[G][R];  // W4A8: int16 pair sums, widened after the block; int16: int32 sums
      for (int q = 0; q < G; ++q)
        for (int r = 0; r < R; ++r) d[q][r] = _mm256_setzero_si256();
#pragma GCC unroll 4
      for (int j = 0; j < kVectors; ++j) {
        if constexpr (kInt16) {
          // Plane t of each vector made as it is used.
          __m256i v[G];
          for (int q = 0; q < G; ++q) v[q] = load32_avx2(pc + 64 * j + 32 * q);
#pragma GCC unroll 4
          for (int t = 0; t < 4; ++t)
            for (int q = 0; q < G; ++q) {
              const __m256i u = t == 3 ? _mm256_srli_epi16(v[q], 12)
                                       : _mm256_and_si256(t == 0 ? v[q] : _mm256_srli_epi16(v[q], 4 * t), mask);
              for (int r = 0; r < R; ++r) {
                d[q][r] = _mm256_add_epi32(d[q][r], _mm256_madd_epi16(u, bcast4_avx2(xr[r] + 8 * j + 2 * t)));
                pin_avx2(d[q][r]);  // a chain, not GCC's reassociated tree over the block's products
              }
            }
        } else {
          __m256i lo[G], hi[G];
          for (int q = 0; q < G; ++q) {
            const __m256i v = load32_avx2(pc + 64 * j + 32 * q);
            lo[q] = _mm256_and_si256(v, mask);
            hi[q] = _mm256_and_si256(_mm256_srli_epi16(v, 4), mask);
          }
          for (int r = 0; r < R; ++r) {
            const T* xb = xr[r] + 8 * j;
            const __m256i xl = bcast4_avx2(xb), xh = bcast4_avx2(xb + 4);
            for (int q = 0; q < G; ++q) {  // one chain of adds (a tree of two cost 1.2-1.5x, hot loop, Zen 3)
              d[q][r] = _mm256_add_epi16(d[q][r], _mm256_maddubs_epi16(lo[q], xl));
              pin_avx2(d[q][r]);
              d[q][r] = _mm256_add_epi16(d[q][r], _mm256_maddubs_epi16(hi[q], xh));
              pin_avx2(d[q][r]);
            }
          }
        }
      }
      for (int r = 0; r < R; ++r) {
        const __m256 sx = _mm256_set1_ps(xs[static_cast<std::size_t>(r) * a.blocks + b]);
        for (int q = 0; q < G; ++q) {
          const __m256i sum = kInt16 ? d[q][r] : _mm256_madd_epi16(d[q][r], ones);
          accg[q][r] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), sx, accg[q][r]);
        }
        xr[r] += kActBlock;
      }
    }
    // The group: sum over its blocks of xs (dot - zero * sum(x)), times its scale (fold_group).
    fold_half_group<R, G>(hp, g, zc, a.groups, accg, acc);
  }
  store_halves<R, G>(acc, h0, valid, y, ys);
}

// W4A16 with exact fp32 activations on AVX2 (gemm_int4_panels_f32): a code vector's byte t holds
// the codes of inputs 8j + t (low nibble) and 8j + 4 + t (high). `vpand` with 0xF << 8t leaves
// code * 2^8t in each row's int32 lane (the high nibbles the same from the vector shifted right by
// 4), which `vcvtdq2ps` makes an exact float, so the FMA takes the activation pre-scaled by 2^-8t
// (F32Acts::xw; exact for activations above 2^-102): the FMA's product is code * x, rounded once
// into the sum as with the codes' own floats. One AND and one conversion per 8 weights, shared by
// the pass's token rows, and one FMA per 8 weights and row. Per group the zero point's term is
// taken off the products' sum once: s (Σ x q - z Σ x), as the int8 passes fold theirs. Each row's
// products run in two chains (low and high nibbles) whatever the row count, so a row's bits do
// not depend on its pass. Tried (2026-12-07, Zen 3, 1536 x 576 g128 x150 streamed, one thread):
// 4 chains a row with the codes shifted into place (one mask register) spilled at one row and
// took 7.9-8.9 ms against 6.4-6.7 for this (f16's panels 11.4-14.3, matmul_int4 16.2).
struct F32Acts {
  const float* xw;    // [n, in]: x, input 8j + t and 8j + 4 + t scaled by 2^-8t (t < 4)
  const float* gsum;  // [n, groups]: Σ x over the group
  int in, blocks, groups, per;
};

F32Acts make_f32_acts(const float* x, const Int4Panels& w, int n) {
  const int in = w.in, blocks = in / kActBlock, per = w.group_size / kActBlock;
  thread_local HugeVector<float> xw_buffer;
  thread_local std::vector<float> gsum_buffer;
  if (xw_buffer.size() < static_cast<std::size_t>(n) * in) xw_buffer.resize(static_cast<std::size_t>(n) * in);
  gsum_buffer.assign(static_cast<std::size_t>(n) * w.groups, 0.0f);
  for (int r = 0; r < n; ++r) {
    const float* xr = x + static_cast<std::size_t>(r) * in;
    float* dst = xw_buffer.data() + static_cast<std::size_t>(r) * in;
    for (int i = 0; i < in; ++i) dst[i] = std::ldexp(xr[i], -8 * (i % 4));
    for (int g = 0; g < w.groups; ++g) {
      const int i1 = std::min(in, (g + 1) * w.group_size);
      float sum = 0.0f;
      for (int i = g * w.group_size; i < i1; ++i) sum += xr[i];
      gsum_buffer[static_cast<std::size_t>(r) * w.groups + g] = sum;
    }
  }
  return {xw_buffer.data(), gsum_buffer.data(), in, blocks, w.groups, per};
}

template <int R, int G>
void f32_half_pass(const F32Acts& a, const Int4Panels& w, int p, int h0, int r0, float* y, std::size_t ys, int valid,
                   int ahead, bool next = false) {
  const HalfPanel hp = half_panel(w, a.blocks, a.groups, p, h0);
  const float* gsum = a.gsum + static_cast<std::size_t>(r0) * a.groups;
  const __m256i mask[4] = {_mm256_set1_epi32(0xF), _mm256_set1_epi32(0xF00), _mm256_set1_epi32(0xF0000),
                           _mm256_set1_epi32(0xF000000)};
  __m256 acc[G][R];
  for (int q = 0; q < G; ++q)
    for (int r = 0; r < R; ++r) acc[q][r] = _mm256_setzero_ps();
  for (int g = 0; g < a.groups; ++g) {
    __m256 c0[G][R], c1[G][R];  // the group's products: low nibbles, high nibbles
    for (int q = 0; q < G; ++q)
      for (int r = 0; r < R; ++r) c0[q][r] = c1[q][r] = _mm256_setzero_ps();
    const int b1 = std::min(a.blocks, (g + 1) * a.per);
    prefetch_half_group(hp, g, a.per, ahead, next);
    const float* xr[R];
    for (int r = 0; r < R; ++r)
      xr[r] = a.xw + static_cast<std::size_t>(r0 + r) * a.in + static_cast<std::size_t>(g * a.per) * kActBlock;
    for (int b = g * a.per; b < b1; ++b) {
      const std::uint8_t* pc = hp.codes + static_cast<std::size_t>(b) * kBlockBytes;
      prefetch_half_block(hp, pc, ahead, next);
#pragma GCC unroll 4
      for (int j = 0; j < kVectors; ++j) {
        __m256i v[G], vh[G];
        for (int q = 0; q < G; ++q) {
          v[q] = load32_avx2(pc + 64 * j + 32 * q);
          vh[q] = _mm256_srli_epi32(v[q], 4);
        }
#pragma GCC unroll 4
        for (int t = 0; t < 4; ++t) {
          __m256 lo[G], hi[G];
          for (int q = 0; q < G; ++q) {
            lo[q] = _mm256_cvtepi32_ps(_mm256_and_si256(v[q], mask[t]));
            hi[q] = _mm256_cvtepi32_ps(_mm256_and_si256(vh[q], mask[t]));
          }
          for (int r = 0; r < R; ++r) {
            const __m256 xl = _mm256_broadcast_ss(xr[r] + 8 * j + t), xh = _mm256_broadcast_ss(xr[r] + 8 * j + 4 + t);
            for (int q = 0; q < G; ++q) {
              c0[q][r] = _mm256_fmadd_ps(lo[q], xl, c0[q][r]);
              c1[q][r] = _mm256_fmadd_ps(hi[q], xh, c1[q][r]);
            }
          }
        }
      }
      for (int r = 0; r < R; ++r) xr[r] += kActBlock;
    }
    __m256 sum[G][R];
    for (int q = 0; q < G; ++q)
      for (int r = 0; r < R; ++r) sum[q][r] = _mm256_add_ps(c0[q][r], c1[q][r]);
    fold_half_group<R, G>(hp, g, gsum, a.groups, sum, acc);
  }
  store_halves<R, G>(acc, h0, valid, y, ys);
}
#endif


#if INFERLAB_INT4_PANELS_VNNI && INFERLAB_AMX_INT8
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
  const std::size_t panel_cells = static_cast<std::size_t>(a.groups) * P;
  const float* sw = w.scale.data() + static_cast<std::size_t>(p) * panel_cells;
  const std::uint8_t* zw = w.symmetric() ? nullptr : w.zero.data() + static_cast<std::size_t>(p) * panel_cells;
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

#if INFERLAB_INT4_PANELS_VNNI
// The VNNI passes over the panels, split across the pool: pass.template operator()<R, NP>(p, r0, y,
// valid, ahead) runs R token rows from r0 against NP panels from p, y at (r0, 16p).
template <class Pass>
void run_passes(const Int4Panels& w, float* y, int n, ThreadPool& pool, const Pass& pass) {
  const int ahead = decode_prefetch_bytes();
  const std::size_t ys = static_cast<std::size_t>(w.out);
  const std::size_t per_panel = static_cast<std::size_t>(P) * w.in * static_cast<std::size_t>(n);
  const std::size_t grain = std::max<std::size_t>(1, (std::size_t{1} << 16) / per_panel);
  pool.parallel_for(
      static_cast<std::size_t>(w.panels),
      [&](std::size_t p0, std::size_t p1) {
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
          // The panel once from memory, then from L1 / L2 for every further group of kPassRows rows.
          for (int r0 = 0; r0 < n; r0 += kPassRows) {
            float* yp = y + static_cast<std::size_t>(r0) * ys + static_cast<std::size_t>(p) * P;
            const int ahead_once = r0 == 0 ? ahead : 0;
            switch (std::min(kPassRows, n - r0)) {
              case 1: pass.template operator()<1, 1>(p, r0, yp, valid, ahead_once); break;
              case 2: pass.template operator()<2, 1>(p, r0, yp, valid, ahead_once); break;
              case 3: pass.template operator()<3, 1>(p, r0, yp, valid, ahead_once); break;
              case 4: pass.template operator()<4, 1>(p, r0, yp, valid, ahead_once); break;
              case 5: pass.template operator()<5, 1>(p, r0, yp, valid, ahead_once); break;
              case 6: pass.template operator()<6, 1>(p, r0, yp, valid, ahead_once); break;
              case 7: pass.template operator()<7, 1>(p, r0, yp, valid, ahead_once); break;
              default: pass.template operator()<8, 1>(p, r0, yp, valid, ahead_once); break;
            }
          }
        }
      },
      grain);
}
#endif

#if INFERLAB_INT4_PANELS_AVX2
// The AVX2 half passes, split across the pool: pass.template operator()<R, G>(p, h0, r0, y, valid,
// ahead, next) runs R token rows from r0 against halves h0 .. h0 + G - 1 of panel p, y at (r0, 16p +
// 8h0). Decode reads a panel front to back (both halves a pass); a few rows take one half at a time
// (the other's codes wait in L1 / L2), kHalfPassRows token rows a pass, and the second half's first
// pass prefetches the thread's next panel (without it the first pass waited for memory and the
// second for nothing: SmolLM2's 4-row pass, one thread, Zen 3, ...).
template <int kRows = kHalfPassRows, int kWholeRows = 1, class Pass>
void run_half_passes(const Int4Panels& w, float* y, int n, ThreadPool& pool, const Pass& pass) {
  const int ahead = decode_prefetch_bytes();
  const std::size_t ys = static_cast<std::size_t>(w.out);
  const std::size_t per_panel = static_cast<std::size_t>(P) * w.in * static_cast<std::size_t>(n);
  const std::size_t grain = std::max<std::size_t>(1, (std::size_t{1} << 16) / per_panel);
  pool.parallel_for(
      static_cast<std::size_t>(w.panels),
      [&](std::size_t p0, std::size_t p1) {
        for (int p = static_cast<int>(p0); p < static_cast<int>(p1); ++p) {
          const int valid = std::min(P, w.out - p * P);
          float* yp = y + static_cast<std::size_t>(p) * P;
          if (n == 1) {
            pass.template operator()<1, 2>(p, 0, 0, yp, valid, ahead, false);
            continue;
          }
          if constexpr (kWholeRows >= 2)
            if (n == 2) {
              pass.template operator()<2, 2>(p, 0, 0, yp, valid, ahead, false);
              continue;
            }
          for (int h = 0; h < 2 && kHalf * h < valid; ++h)
            for (int r0 = 0; r0 < n; r0 += kRows) {
              float* yh = yp + static_cast<std::size_t>(r0) * ys + kHalf * h;
              const int ahead_once = h == 0 && r0 == 0 ? ahead : 0;
              const bool next = ahead > 0 && h == 1 && r0 == 0 && p + 1 < static_cast<int>(p1);
              const int rows = std::min(kRows, n - r0);
              if (rows == 1) pass.template operator()<1, 1>(p, h, r0, yh, valid, ahead_once, next);
              if constexpr (kRows >= 2) if (rows == 2) pass.template operator()<2, 1>(p, h, r0, yh, valid, ahead_once, next);
              if constexpr (kRows >= 3) if (rows == 3) pass.template operator()<3, 1>(p, h, r0, yh, valid, ahead_once, next);
              if constexpr (kRows >= 4) if (rows == 4) pass.template operator()<4, 1>(p, h, r0, yh, valid, ahead_once, next);
              static_assert(kRows >= 1 && kRows <= 4, "passes of 1-4 token rows");
            }
        }
      },
      grain);
}
#endif

}  // namespace

bool int4_panels_available(int in, int group_size) {
#if INFERLAB_INT4_PANELS
  return in > 0 && in % kActBlock == 0 && group_size > 0 && group_size % kActBlock == 0;
#else
  (void)in, (void)group_size;
  return false;
#endif
}

Int4Panels pack_int4_panels(const std::uint8_t* packed, const float* scale, const std::uint8_t* zero, int out, int in,
                            int group_size) {
  check(out > 0 && int4_panels_available(in, group_size),
        "pack_int4_panels: needs an AVX2 or AVX-512 VNNI build, in and group_size multiples of 32; got in " +
            std::to_string(in) + ", group_size " + std::to_string(group_size));
  Int4Panels w;
  w.out = out, w.in = in, w.group_size = group_size, w.groups = ref::int4_groups(in, group_size);
  w.panels = (out + P - 1) / P;
  const int blocks = in / kActBlock;
  const std::size_t row_bytes = ref::int4_row_bytes(in);
  w.codes.assign(static_cast<std::size_t>(w.panels) * blocks * kBlockBytes, 0);
  w.scale.assign(static_cast<std::size_t>(w.panels) * w.groups * P, 0.0f);
  if (zero) w.zero.assign(w.scale.size(), 0);
  for (int o = 0; o < out; ++o) {
    const int p = o / P, l = o % P;
    const std::uint8_t* row = packed + static_cast<std::size_t>(o) * row_bytes;
    for (int b = 0; b < blocks; ++b)
      for (int j = 0; j < kVectors; ++j)
        for (int t = 0; t < 4; ++t) {
          const int i = b * kActBlock + 8 * j + t;
          w.codes[code_offset(blocks, p, b, j, l, t)] =
              static_cast<std::uint8_t>(code_at(row, i) | (code_at(row, i + 4) << 4));
        }
    for (int g = 0; g < w.groups; ++g) {
      const std::size_t dst = (static_cast<std::size_t>(p) * w.groups + g) * P + l;
      const std::size_t src = static_cast<std::size_t>(o) * w.groups + g;
      w.scale[dst] = scale[src];
      if (zero) w.zero[dst] = zero[src];
    }
  }
  return w;
}

void unpack_int4_panels_row(const Int4Panels& w, int row, std::uint8_t* packed_row, float* scale_row,
                            std::uint8_t* zero_row) {
  check(row >= 0 && row < w.out, "unpack_int4_panels_row: row " + std::to_string(row) + " outside [0, " +
                                     std::to_string(w.out) + ")");
  const int p = row / P, l = row % P, blocks = w.in / kActBlock;
  std::memset(packed_row, 0, ref::int4_row_bytes(w.in));
  for (int b = 0; b < blocks; ++b)
    for (int j = 0; j < kVectors; ++j)
      for (int t = 0; t < 4; ++t) {
        const std::uint8_t byte = w.codes[code_offset(blocks, p, b, j, l, t)];
        for (int h = 0; h < 2; ++h) {
          const int i = b * kActBlock + 8 * j + 4 * h + t, code = h == 0 ? byte & 0x0F : byte >> 4;
          packed_row[i / 2] |= static_cast<std::uint8_t>(i % 2 == 0 ? code : code << 4);
        }
      }
  for (int g = 0; g < w.groups; ++g) {
    const std::size_t src = (static_cast<std::size_t>(p) * w.groups + g) * P + l;
    scale_row[g] = w.scale[src];
    if (!w.symmetric()) zero_row[g] = w.zero[src];
  }
}

std::uint64_t int4_panels_bytes(const Int4Panels& w) {
  const std::uint64_t cells = static_cast<std::uint64_t>(w.out) * w.groups;
  return static_cast<std::uint64_t>(w.out) * ref::int4_row_bytes(w.in) + cells * sizeof(float) +
         (w.symmetric() ? 0 : cells);
}

void gemm_int4_panels(const std::int8_t* xq, const float* xs, const Int4Panels& w, float* y, int n, ThreadPool& pool) {
  if (n <= 0 || w.out <= 0) return;
#if INFERLAB_INT4_PANELS
  const PassArgs a = make_acts(xq, xs, w, n);  // the zero point's term per row and group
  const std::size_t ys = static_cast<std::size_t>(w.out);
#if INFERLAB_INT4_PANELS_VNNI && INFERLAB_AMX_INT8
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
#if INFERLAB_INT4_PANELS_VNNI
  run_passes(w, y, n, pool, [&]<int R, int NP>(int p, int r0, float* yp, const int* valid, int ahead) {
    panel_pass<R, NP>(a, w, p, r0, yp, ys, valid, ahead);
  });
#else
  run_half_passes(w, y, n, pool, [&]<int R, int G>(int p, int h0, int r0, float* yp, int valid, int ahead, bool next) {
    half_pass<R, G>(a, w, p, h0, r0, yp, ys, valid, ahead, next);
  });
#endif
#else
  (void)xq, (void)xs, (void)y, (void)pool;
  check(false, "gemm_int4_panels: this build has no AVX2 or AVX-512 VNNI kernel (int4_panels_available)");
#endif
}

void quantize_panel_acts_int16(const float* x, int n, int in, std::int16_t* xq, float* xs) {
  check(in > 0 && in % kActBlock == 0,
        "quantize_panel_acts_int16: in must be a positive multiple of 32, got " + std::to_string(in));
  const int blocks = in / kActBlock;
  for (int r = 0; r < n; ++r)
    for (int b = 0; b < blocks; ++b) {
      const float* xb = x + static_cast<std::size_t>(r) * in + static_cast<std::size_t>(b) * kActBlock;
      std::int16_t* qb = xq + static_cast<std::size_t>(r) * in + static_cast<std::size_t>(b) * kActBlock;
      float amax = 0.0f;
      for (int i = 0; i < kActBlock; ++i) amax = std::max(amax, std::fabs(xb[i]));
      const float inv = amax > 0.0f ? kInt16ActMax / amax : 0.0f;
      xs[static_cast<std::size_t>(r) * blocks + b] = amax / kInt16ActMax;
      for (int i = 0; i < kActBlock; ++i) {
        const float v = std::clamp(std::nearbyint(xb[i] * inv), -kInt16ActMax, kInt16ActMax);
        qb[int16_pair_slot(i)] = static_cast<std::int16_t>(v);
      }
    }
}

void gemm_int4_panels_int16(const std::int16_t* xq, const float* xs, const Int4Panels& w, float* y, int n,
                            ThreadPool& pool) {
  if (n <= 0 || w.out <= 0) return;
#if INFERLAB_INT4_PANELS
  const PassArgs16 a = make_acts(xq, xs, w, n);
  const std::size_t ys = static_cast<std::size_t>(w.out);
#if INFERLAB_INT4_PANELS_VNNI
  run_passes(w, y, n, pool, [&]<int R, int NP>(int p, int r0, float* yp, const int* valid, int ahead) {
    panel_pass<R, NP>(a, w, p, r0, yp, ys, valid, ahead);
  });
#else
  run_half_passes(w, y, n, pool, [&]<int R, int G>(int p, int h0, int r0, float* yp, int valid, int ahead, bool next) {
    half_pass<R, G>(a, w, p, h0, r0, yp, ys, valid, ahead, next);
  });
#endif
#else
  (void)xq, (void)xs, (void)y, (void)pool;
  check(false, "gemm_int4_panels_int16: this build has no AVX2 or AVX-512 VNNI kernel (int4_panels_available)");
#endif
}

bool int4_panels_f32_available(int in, int group_size) {
#if INFERLAB_INT4_PANELS_AVX2
  return int4_panels_available(in, group_size);
#else
  (void)in, (void)group_size;
  return false;
#endif
}

void gemm_int4_panels_f32(const float* x, const Int4Panels& w, float* y, int n, ThreadPool& pool) {
  if (n <= 0 || w.out <= 0) return;
#if INFERLAB_INT4_PANELS_AVX2
  const F32Acts a = make_f32_acts(x, w, n);
  const std::size_t ys = static_cast<std::size_t>(w.out);
  run_half_passes<kHalfPassRows, 2>(w, y, n, pool, [&]<int R, int G>(int p, int h0, int r0, float* yp, int valid, int ahead, bool next) {
    f32_half_pass<R, G>(a, w, p, h0, r0, yp, ys, valid, ahead, next);
  });
#else
  (void)x, (void)y, (void)pool;
  check(false, "gemm_int4_panels_f32: this build has no AVX2-only kernel (int4_panels_f32_available)");
#endif
}

}  // namespace inferlab::cpu
