// VNNI and AMX GEMM on repacked GGUF blocks (Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K): see gemm_gguf.h for
// the layout, the tiles and the contract; the packing: gemm_gguf_pack.cpp; the panel layout:
// gemm_gguf_layout.h.
#include "kernels/cpu/gemm_gguf.h"
#include "kernels/cpu/linear_plan.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "inferlab/error.h"
#include "kernels/cpu/act_tiles.h"
#include "kernels/cpu/amx.h"
#include "kernels/cpu/amx_blocks.h"
#include "kernels/cpu/decode_prefetch.h"
#include "kernels/cpu/gemm_gguf_avx2.h"
#include "kernels/cpu/gemm_gguf_layout.h"
#include "kernels/cpu/panel_union.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
#include <immintrin.h>
#define INFERLAB_GEMM_GGUF_VNNI 1
#if INFERLAB_AMX_INT8
#define INFERLAB_GEMM_GGUF_AMX 1
#endif
#endif

namespace inferlab::cpu {

using namespace gguf_panels;  // this file's own use of the panel layout

namespace {

#if INFERLAB_GEMM_GGUF_VNNI
constexpr int kRows = kTileRows;  // token rows per micro-tile

// The all-lanes zero-mask forms: GCC 12's plain conversions trip -Werror=maybe-uninitialized
// (their pass-through operand is undefined).
constexpr __mmask16 kAll = 0xFFFF;
inline __m512 to_float(__m512i v) { return _mm512_maskz_cvtepi32_ps(kAll, v); }
inline __m512 halves_to_float(const std::uint16_t* p) {
  return _mm512_maskz_cvtph_ps(kAll, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline __m512 u8_to_float(const std::uint8_t* p) {
  return to_float(_mm512_maskz_cvtepu8_epi32(kAll, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
inline __m512 s8_to_float(const std::uint8_t* p) {
  return to_float(_mm512_maskz_cvtepi8_epi32(kAll, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
inline __m512i broadcast4(const std::int8_t* p) {
  std::int32_t four;
  std::memcpy(&four, p, 4);
  return _mm512_set1_epi32(four);
}
inline __m512i load64(const std::uint8_t* p) { return _mm512_loadu_si512(p); }

// The codes of one 64-byte line of nibbles (16 rows x 4 bytes of step s): lo gets codes 4s ..
// 4s + 3 (the low nibbles), hi codes 16 + 4s .. (the high ones).
inline void nibbles(__m512i raw, __m512i& lo, __m512i& hi) {
  const __m512i low = _mm512_set1_epi8(0x0F);
  lo = _mm512_and_si512(raw, low);
  hi = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low);
}
// Q5_K: the fifth bits of step s's rows 16h .. 16h + 15 in the plane line hb (bit (s % 2) * 4 +
// 2h, + 1 for the high nibble's code) or-ed into lo / hi as bit 4 (16-bit shifts: what crosses
// from a neighbouring byte lands outside bit 4).
inline void fifth_bits(__m512i hb, int s, int h, __m512i& lo, __m512i& hi) {
  const __m512i bit4 = _mm512_set1_epi8(0x10);
  const int bit = (s % 2) * 4 + h * 2;
  auto to_bit4 = [&](int from) {
    return from <= 4 ? _mm512_slli_epi16(hb, static_cast<unsigned>(4 - from))
                     : _mm512_srli_epi16(hb, static_cast<unsigned>(from - 4));
  };
  lo = _mm512_or_si512(lo, _mm512_and_si512(to_bit4(bit), bit4));
  hi = _mm512_or_si512(hi, _mm512_and_si512(to_bit4(bit + 1), bit4));
}
// Q6_K: step s's 6-bit codes of half h (codes 4s .. 4s + 3 for h = 0, 16 + 4s .. for h = 1: the
// low / high nibbles) from its lines of nibbles (r0: rows 0-15, r1: rows 16-31) and its
// top-2-bit line hb: c[0] rows 0-15, c[1] rows 16-31. 16-bit shifts: what crosses into a byte
// from its neighbour lands outside the masks.
inline void q6_half(__m512i r0, __m512i r1, __m512i hb, int h, __m512i c[2]) {
  const __m512i low = _mm512_set1_epi8(0x0F), top = _mm512_set1_epi8(0x30);  // top: bits 4-5
  if (h == 0) {
    c[0] = _mm512_or_si512(_mm512_and_si512(r0, low), _mm512_and_si512(_mm512_slli_epi16(hb, 4), top));
    c[1] = _mm512_or_si512(_mm512_and_si512(r1, low), _mm512_and_si512(hb, top));
  } else {
    c[0] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(r0, 4), low), _mm512_and_si512(_mm512_slli_epi16(hb, 2), top));
    c[1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(r1, 4), low), _mm512_and_si512(_mm512_srli_epi16(hb, 2), top));
  }
}
// Both halves: c[0], c[1] half 0's rows 0-15, 16-31; c[2], c[3] half 1's.
inline void q6_codes(__m512i r0, __m512i r1, __m512i hb, __m512i c[4]) {
  q6_half(r0, r1, hb, 0, c);
  q6_half(r0, r1, hb, 1, c + 2);
}

// The codes' offsets, which start the int32 sums (so they come off with no instruction of the
// epilogue's): Q8_0's codes are held as c + 128, Q4_0's are w / d + 8; Q6_K's 32 is per half.
template <GgmlType T>
constexpr int kOffset = T == GgmlType::kQ8_0 ? -128 : T == GgmlType::kQ4_0 ? -8 : 0;

// y[r, j] (r < R, j < width) = the first R token rows of activation tile t (act_tiles.h) x the
// 32 G rows of panels [p, p + G), read packed as they are; SB: the tiles' ActTiles::step_bytes.
// y points at the tile's first element, rows ldc apart. Decode (one row, R = 1) and small
// batches run these: each panel streams from memory once while its codes are unpacked in
// registers. The K-quants' d (and dmin) are widened once per super-block at decode (the same
// values). At decode with one panel (G = 1) a second set of int32 sums takes every other step
// (Q8_0) or the high nibbles' codes, so each zmm has two dependency chains of half the length,
// and Q6_K runs its two halves as two sets in one pass over the codes; integer sums are exact,
// and the fp32 epilogue rounds as prefill_tile does, so a row gets the same bits in any tile.
// Each panel's head, slot (and Q6_K's plane) are prefetched `ahead` bytes on (decode_prefetch.h):
// with the hardware prefetcher alone TinyLlama's 4-row Q8_0 / Q4_0 passes took 1.42 / 1.46-1.52x a
// one-row pass, prefetching 1.13-1.18 / 1.23-1.40x, and one row 3-4 % less (AMX Xeon, 2026-12-06).
template <GgmlType T, int R, int G, int SB = kTileStepBytes>
void packed_tile(const ActTiles& a, int t, const PackedGguf& w, int p, float* y, std::size_t ldc, int width, int ahead) {
  constexpr int V = 2 * G;  // zmm per token row
  constexpr bool kQ8 = T == GgmlType::kQ8_0, kQ6 = T == GgmlType::kQ6_K, kQ5 = T == GgmlType::kQ5_K;
  constexpr bool kSplit = R == 1 && G == 1 && !kQ6;
  constexpr bool kHoist = is_kquant(T) && R == 1;  // tiles have no registers to spare for d / dmin
  constexpr Layout kL = layout(T);
  const std::size_t at0 = a.tile_blocks(t);  // the tile's (block, row) slots: at0 + b * kRows + r
  const std::size_t stride = panel_bytes(T, w.in);
  const std::uint8_t* panel[G];  // each panel one stream (gemm_gguf.h)
#pragma GCC unroll 16
  for (int g = 0; g < G; ++g) panel[g] = w.data.data() + static_cast<std::size_t>(p + g) * stride;
  __m512 facc[R][V];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int v = 0; v < V; ++v) facc[r][v] = _mm512_setzero_ps();
  [[maybe_unused]] __m512 dF[V] = {}, mF[V] = {};  // hoisted d and dmin
  for (int b = 0; b < a.blocks; ++b) {
    const std::size_t xb0 = at0 + static_cast<std::size_t>(b) * kRows;  // + r: row r's block slot
    __m512i iacc[R][V];
    [[maybe_unused]] __m512i jacc[V];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int v = 0; v < V; ++v) iacc[r][v] = _mm512_set1_epi32(kOffset<T> * a.sum[xb0 + r]);
    if constexpr (kSplit)
#pragma GCC unroll 16
      for (int v = 0; v < V; ++v) jacc[v] = _mm512_setzero_si512();
    // Per panel: the record's head (fp16 d, then m / dmin: 32 rows each), the block's slot.
    const std::uint8_t *head[G], *slot[G], *planes[G];
#pragma GCC unroll 16
    for (int g = 0; g < G; ++g) {
      head[g] = record_head(panel[g], kL, b);
      slot[g] = block_slot(panel[g], kL, b);
      planes[g] = plane_base(panel[g], slot[g], kL, w.in, b);
      if (b % kL.blocks_per_record == 0) prefetch_ahead(head[g], kL.head, ahead);
      prefetch_ahead(slot[g], kL.slot, ahead);
      if constexpr (kQ6) prefetch_ahead(planes[g], kL.apart, ahead);
    }
    auto head_d = [&](int v) { return reinterpret_cast<const std::uint16_t*>(head[v / 2]) + (v % 2) * 16; };
    auto head_m = [&](int v) { return reinterpret_cast<const std::uint16_t*>(head[v / 2] + 64) + (v % 2) * 16; };
    if constexpr (kHoist)
      if (b % kL.blocks_per_record == 0)
#pragma GCC unroll 16
        for (int v = 0; v < V; ++v) {
          dF[v] = halves_to_float(head_d(v));
          if constexpr (is_q45k(T)) mF[v] = halves_to_float(head_m(v));
        }
    auto d_of = [&](int v) {
      if constexpr (kHoist) return dF[v];
      else return halves_to_float(head_d(v));
    };
    auto m_of = [&](int v) {
      if constexpr (kHoist) return mF[v];
      else return halves_to_float(head_m(v));
    };
    const std::int8_t* x = a.tile_x(t) + static_cast<std::size_t>(b) * (kBlock / 4) * SB;  // step s: + s SB
    if constexpr (kQ8) {
#pragma GCC unroll 8
      for (int s = 0; s < 8; ++s) {
        __m512i wv[V];
#pragma GCC unroll 16
        for (int v = 0; v < V; ++v) wv[v] = load64(slot[v / 2] + kL.code(s) + (v % 2) * 64);
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          const __m512i xv = broadcast4(x + s * SB + 4 * r);
#pragma GCC unroll 16
          for (int v = 0; v < V; ++v) {
            if (kSplit && s % 2 == 1) jacc[v] = _mm512_dpbusd_epi32(jacc[v], wv[v], xv);
            else iacc[r][v] = _mm512_dpbusd_epi32(iacc[r][v], wv[v], xv);
          }
        }
      }
    } else if constexpr (kQ6 && R == 1) {
      // Both halves in one pass over the codes (each byte's two nibbles are a code of each
      // half), into two sets of int32 sums, so each line is loaded once.
      __m512i hacc[V];  // the second half's sums (iacc: the first's)
#pragma GCC unroll 16
      for (int v = 0; v < V; ++v) {
        iacc[0][v] = _mm512_set1_epi32(-32 * a.half_sum[2 * xb0]);
        hacc[v] = _mm512_set1_epi32(-32 * a.half_sum[2 * xb0 + kRows]);
      }
#pragma GCC unroll 4
      for (int s = 0; s < 4; ++s) {
        const __m512i x0 = broadcast4(x + s * SB), x1 = broadcast4(x + (4 + s) * SB);
#pragma GCC unroll 16
        for (int g = 0; g < G; ++g) {
          __m512i c[4];
          q6_codes(load64(slot[g] + kL.code(s)), load64(slot[g] + kL.code(s) + 64), load64(planes[g] + kL.plane(s)), c);
          iacc[0][2 * g] = _mm512_dpbusd_epi32(iacc[0][2 * g], c[0], x0);
          iacc[0][2 * g + 1] = _mm512_dpbusd_epi32(iacc[0][2 * g + 1], c[1], x0);
          hacc[2 * g] = _mm512_dpbusd_epi32(hacc[2 * g], c[2], x1);
          hacc[2 * g + 1] = _mm512_dpbusd_epi32(hacc[2 * g + 1], c[3], x1);
        }
      }
      // The tiles' order of roundings ((d sc) d_x per half, the first half first).
      const __m512 xs = _mm512_set1_ps(a.xs[xb0]);
#pragma GCC unroll 16
      for (int v = 0; v < V; ++v) {
        const std::uint8_t* sc = slot[v / 2] + kL.scale + (v % 2) * 16;
        const __m512 s0 = _mm512_mul_ps(d_of(v), s8_to_float(sc)), s1 = _mm512_mul_ps(d_of(v), s8_to_float(sc + 32));
        facc[0][v] = _mm512_fmadd_ps(to_float(iacc[0][v]), _mm512_mul_ps(s0, xs), facc[0][v]);
        facc[0][v] = _mm512_fmadd_ps(to_float(hacc[v]), _mm512_mul_ps(s1, xs), facc[0][v]);
      }
      continue;  // folded
    } else if constexpr (kQ6) {
      // The halves one after the other, each with its own scale: one set of int32 sums, folded
      // after each half.
      for (int half = 0; half < 2; ++half) {
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r)  // w = d sc (c - 32): 32 x the half's sum of x off
#pragma GCC unroll 16
          for (int v = 0; v < V; ++v) iacc[r][v] = _mm512_set1_epi32(-32 * a.half_sum[2 * xb0 + half * kRows + r]);
#pragma GCC unroll 4
        for (int s = 0; s < 4; ++s) {
          __m512i c[V];
#pragma GCC unroll 16
          for (int g = 0; g < G; ++g)
            q6_half(load64(slot[g] + kL.code(s)), load64(slot[g] + kL.code(s) + 64), load64(planes[g] + kL.plane(s)), half, c + 2 * g);
#pragma GCC unroll 16
          for (int r = 0; r < R; ++r) {
            const __m512i xv = broadcast4(x + (4 * half + s) * SB + 4 * r);
#pragma GCC unroll 16
            for (int v = 0; v < V; ++v) iacc[r][v] = _mm512_dpbusd_epi32(iacc[r][v], c[v], xv);
          }
        }
        // The half's own scale d sc d_x (the slot's int8 scales: [half][32 rows]).
#pragma GCC unroll 16
        for (int v = 0; v < V; ++v) {
          const __m512 sv = _mm512_mul_ps(d_of(v), s8_to_float(slot[v / 2] + kL.scale + half * 32 + (v % 2) * 16));
#pragma GCC unroll 16
          for (int r = 0; r < R; ++r)
            facc[r][v] = _mm512_fmadd_ps(to_float(iacc[r][v]), _mm512_mul_ps(sv, _mm512_set1_ps(a.xs[xb0 + r])), facc[r][v]);
        }
      }
      continue;  // folded
    } else {
#pragma GCC unroll 4
      for (int s = 0; s < 4; ++s) {
        __m512i lo[V], hi[V];
#pragma GCC unroll 16
        for (int v = 0; v < V; ++v) {
          nibbles(load64(slot[v / 2] + kL.code(s) + (v % 2) * 64), lo[v], hi[v]);
          if constexpr (kQ5) fifth_bits(load64(planes[v / 2] + kL.plane(s / 2)), s, v % 2, lo[v], hi[v]);
        }
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          const __m512i xlo = broadcast4(x + s * SB + 4 * r), xhi = broadcast4(x + (4 + s) * SB + 4 * r);
#pragma GCC unroll 16
          for (int v = 0; v < V; ++v)
            if constexpr (kSplit) {
              iacc[r][v] = _mm512_dpbusd_epi32(iacc[r][v], lo[v], xlo);
              jacc[v] = _mm512_dpbusd_epi32(jacc[v], hi[v], xhi);
            } else {
              iacc[r][v] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(iacc[r][v], lo[v], xlo), hi[v], xhi);
            }
        }
      }
    }
    if constexpr (kSplit)
#pragma GCC unroll 16
      for (int v = 0; v < V; ++v) iacc[0][v] = _mm512_add_epi32(iacc[0][v], jacc[v]);
#pragma GCC unroll 16
    for (int v = 0; v < V; ++v) {
      if constexpr (is_q45k(T)) {
        // w = d sc_j c - dmin m_j: a Q4_1 block of scale d sc_j and min -dmin m_j (the slot's
        // bytes: sc[32 rows], then m[32 rows]).
        const std::uint8_t* sub = slot[v / 2] + kL.scale + (v % 2) * 16;
        const __m512 dw = _mm512_mul_ps(d_of(v), u8_to_float(sub)), mw = _mm512_mul_ps(m_of(v), u8_to_float(sub + 32));
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          const float xs = a.xs[xb0 + r];
          facc[r][v] = _mm512_fmadd_ps(to_float(iacc[r][v]), _mm512_mul_ps(dw, _mm512_set1_ps(xs)), facc[r][v]);
          facc[r][v] = _mm512_fnmadd_ps(mw, _mm512_set1_ps(a.xsum[xb0 + r]), facc[r][v]);
        }
      } else {
        const __m512 dw = halves_to_float(head_d(v));
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          const float xs = a.xs[xb0 + r];
          facc[r][v] = _mm512_fmadd_ps(to_float(iacc[r][v]), _mm512_mul_ps(dw, _mm512_set1_ps(xs)), facc[r][v]);
          if constexpr (T == GgmlType::kQ4_1)
            facc[r][v] = _mm512_fmadd_ps(halves_to_float(head_m(v)), _mm512_set1_ps(a.xsum[xb0 + r]), facc[r][v]);
        }
      }
    }
  }
#pragma GCC unroll 16
  for (int v = 0; v < V; ++v) {
    const auto mask = static_cast<__mmask16>((1u << std::clamp(width - 16 * v, 0, 16)) - 1);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(y + r * ldc + 16 * v, mask, facc[r][v]);
  }
}

// Prefill: each panel unpacked once into plain codes in Q8_0's layout ([step][32 rows][4] bytes,
// vpdpbusd's unsigned operand as it is) with its blocks' scales widened to fp32 ([0]: the codes'
// scale, d or d sc_j, or Q6_K's first half's d sc; [1]: Q4_1's m, the K-quants' -dmin m_j, or
// Q6_K's second half's d sc), so every tile of token rows runs Q8_0's loop on it: the unpacking
// (for Q5_K more vector operations than its vpdpbusd, for Q6_K nearly as many) is paid once per
// panel instead of once per tile. A panel unpacked is 1.25 KiB per 32 inputs (80 KiB at in =
// 2048, 220 KiB at 5632), in L2 while the tiles pass, as the packed panel was; unpacking it a
// chunk at a time instead (8 or 16 blocks, in L1) was slower at 512 rows: the tiles' activations
// are then read in short pieces (Zen 4, 2026-12-02).
struct alignas(64) Line {
  std::uint8_t b[64];
};
struct Unpacked {
  std::vector<Line> code;   // [blocks][8 steps][2 lines: rows 0-15, 16-31]; Q8_0: unused
  std::vector<Line> scale;  // [blocks][2][2 lines of 16 floats]
  // Where block i's codes are: code[16 i], or for Q8_0 (already in that layout, held as c + 128)
  // its slot in the panel, read in place.
  const std::uint8_t* codes = nullptr;
  std::size_t codes_stride = 0;  // bytes from block i's codes to block i + 1's
  const std::uint8_t* block_codes(int i) const { return codes + static_cast<std::size_t>(i) * codes_stride; }
  std::uint8_t* code_line(int i, int s, int h) { return code[static_cast<std::size_t>(16 * i + 2 * s + h)].b; }
  float* scale_line(int i, int k, int h) { return reinterpret_cast<float*>(scale[static_cast<std::size_t>(4 * i + 2 * k + h)].b); }
  const float* scale_line(int i, int k, int h) const {
    return reinterpret_cast<const float*>(scale[static_cast<std::size_t>(4 * i + 2 * k + h)].b);
  }
  void reserve(int blocks) {
    if (code.size() < 16 * static_cast<std::size_t>(blocks)) code.resize(16 * static_cast<std::size_t>(blocks));
    if (scale.size() < 4 * static_cast<std::size_t>(blocks)) scale.resize(4 * static_cast<std::size_t>(blocks));
  }
};
// The calling thread's (each pool thread unpacks its own panels).
Unpacked& unpacked_scratch() {
  thread_local Unpacked u;
  return u;
}

// Panel p into u (u.reserve(blocks) first).
// kSigned (the AMX tiles' signed x signed product): the codes with their offset taken off, the
// weights' own integers (Q8_0's c, Q4_0's c - 8; the others' codes are below 128 already), so
// no offset's start is added to the sums; Q8_0 is then copied (its top bit flipped), not read
// in place.
template <GgmlType T, bool kSigned = false>
void unpack_panel(const PackedGguf& w, int p, Unpacked& u) {
  constexpr Layout kL = layout(T);
  const std::uint8_t* panel = w.data.data() + static_cast<std::size_t>(p) * panel_bytes(T, w.in);
  const __m512i sign = _mm512_set1_epi32(static_cast<int>(0x80000000u));
  if constexpr (T == GgmlType::kQ8_0 && !kSigned) {  // read in place: the slots are a record apart
    u.codes = block_slot(panel, kL, 0);
    u.codes_stride = kL.record();
  } else {
    u.codes = u.code_line(0, 0, 0);
    u.codes_stride = 16 * sizeof(Line);
  }
  for (int b = 0; b < w.in / kBlock; ++b) {
    const std::uint8_t* head = record_head(panel, kL, b);
    const std::uint8_t* slot = block_slot(panel, kL, b);
    const std::uint8_t* planes = plane_base(panel, slot, kL, w.in, b);
    auto put = [&](int s, int h, __m512i c) { _mm512_store_si512(u.code_line(b, s, h), c); };
    if constexpr (T == GgmlType::kQ6_K) {
      for (int s = 0; s < 4; ++s) {
        __m512i c[4];
        q6_codes(load64(slot + kL.code(s)), load64(slot + kL.code(s) + 64), load64(planes + kL.plane(s)), c);
        put(s, 0, c[0]);
        put(s, 1, c[1]);
        put(4 + s, 0, c[2]);
        put(4 + s, 1, c[3]);
      }
    } else if constexpr (T != GgmlType::kQ8_0) {
      for (int s = 0; s < 4; ++s)
        for (int h = 0; h < 2; ++h) {
          __m512i lo, hi;
          nibbles(load64(slot + kL.code(s) + 64 * h), lo, hi);
          if constexpr (T == GgmlType::kQ5_K) fifth_bits(load64(planes + kL.plane(s / 2)), s, h, lo, hi);
          if constexpr (kSigned && T == GgmlType::kQ4_0) {
            lo = _mm512_sub_epi8(lo, _mm512_set1_epi8(8));
            hi = _mm512_sub_epi8(hi, _mm512_set1_epi8(8));
          }
          put(s, h, lo);
          put(4 + s, h, hi);
        }
    } else if constexpr (kSigned) {  // Q8_0: c + 128 back to c
      for (int s = 0; s < 8; ++s)
        for (int h = 0; h < 2; ++h) put(s, h, _mm512_xor_si512(load64(slot + kL.code(s) + 64 * h), _mm512_set1_epi8(static_cast<char>(0x80))));
    }
    for (int h = 0; h < 2; ++h) {
      const __m512 d = halves_to_float(reinterpret_cast<const std::uint16_t*>(head) + 16 * h);
      const std::uint8_t* sub = slot + kL.scale + 16 * h;
      float* s0 = u.scale_line(b, 0, h);
      float* s1 = u.scale_line(b, 1, h);
      if constexpr (T == GgmlType::kQ6_K) {
        _mm512_store_ps(s0, _mm512_mul_ps(d, s8_to_float(sub)));
        _mm512_store_ps(s1, _mm512_mul_ps(d, s8_to_float(sub + 32)));
      } else if constexpr (is_q45k(T)) {
        const __m512 dmin = halves_to_float(reinterpret_cast<const std::uint16_t*>(head + 64) + 16 * h);
        _mm512_store_ps(s0, _mm512_mul_ps(d, u8_to_float(sub)));
        // Negated (the sign bit flipped: exact), so the epilogue's FMA adds it as decode's
        // fnmadd subtracts it.
        const __m512i mw = _mm512_castps_si512(_mm512_mul_ps(dmin, u8_to_float(sub + 32)));
        _mm512_store_ps(s1, _mm512_castsi512_ps(_mm512_xor_si512(mw, sign)));
      } else {
        _mm512_store_ps(s0, d);
        if constexpr (T == GgmlType::kQ4_1)
          _mm512_store_ps(s1, halves_to_float(reinterpret_cast<const std::uint16_t*>(head + 64) + 16 * h));
      }
    }
  }
}

// y[r, j] (r < R, j < width) = the first R token rows of activation tile t (act_tiles.h) x the
// 32 rows of the unpacked panel u. y points at the tile's first element, rows ldc apart. The
// fp32 sums stay in registers (12 zmm at R = 6, beside 12 of int32 sums and 2 of codes).
template <GgmlType T, int R>
void prefill_tile(const ActTiles& a, int t, const Unpacked& u, float* y, std::size_t ldc, int width) {
  constexpr int V = 2;
  constexpr int SB = kTileStepBytes;
  constexpr bool kQ6 = T == GgmlType::kQ6_K;
  constexpr bool kMins = T == GgmlType::kQ4_1 || is_q45k(T);
  constexpr int kHalves = kQ6 ? 2 : 1, kSteps = 8 / kHalves;  // Q6_K: each half its own scale
  __m512 facc[R][V];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int v = 0; v < V; ++v) facc[r][v] = _mm512_setzero_ps();
  const std::size_t at0 = a.tile_blocks(t);  // the tile's (block, row) slots: at0 + b * kRows + r
  for (int b = 0; b < a.blocks; ++b) {
    const std::size_t xb0 = at0 + static_cast<std::size_t>(b) * kRows;
    const std::int8_t* x = a.tile_x(t) + static_cast<std::size_t>(b) * (kBlock / 4) * SB;  // step s: + s SB
    for (int h = 0; h < kHalves; ++h) {
      __m512i iacc[R][V];
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        const int start = kQ6 ? -32 * a.half_sum[2 * xb0 + h * kRows + r] : kOffset<T> * a.sum[xb0 + r];
#pragma GCC unroll 16
        for (int v = 0; v < V; ++v) iacc[r][v] = _mm512_set1_epi32(start);
      }
#pragma GCC unroll 8
      for (int s = 0; s < kSteps; ++s) {
        const int step = h * kSteps + s;
        __m512i wv[V];
#pragma GCC unroll 16
        for (int v = 0; v < V; ++v) wv[v] = load64(u.block_codes(b) + step * 128 + 64 * v);  // unaligned: Q8_0's slots in place
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r) {
          const __m512i xv = broadcast4(x + step * SB + 4 * r);
#pragma GCC unroll 16
          for (int v = 0; v < V; ++v) iacc[r][v] = _mm512_dpbusd_epi32(iacc[r][v], wv[v], xv);
        }
      }
#pragma GCC unroll 16
      for (int v = 0; v < V; ++v) {
        const __m512 sv = _mm512_load_ps(u.scale_line(b, h, v));
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r)
          facc[r][v] = _mm512_fmadd_ps(to_float(iacc[r][v]), _mm512_mul_ps(sv, _mm512_set1_ps(a.xs[xb0 + r])), facc[r][v]);
      }
    }
    if constexpr (kMins)
#pragma GCC unroll 16
      for (int v = 0; v < V; ++v) {
        const __m512 mv = _mm512_load_ps(u.scale_line(b, 1, v));
#pragma GCC unroll 16
        for (int r = 0; r < R; ++r)
          facc[r][v] = _mm512_fmadd_ps(mv, _mm512_set1_ps(a.xsum[xb0 + r]), facc[r][v]);
      }
  }
#pragma GCC unroll 16
  for (int v = 0; v < V; ++v) {
    const auto mask = static_cast<__mmask16>((1u << std::clamp(width - 16 * v, 0, 16)) - 1);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(y + r * ldc + 16 * v, mask, facc[r][v]);
  }
}

#if INFERLAB_GEMM_GGUF_AMX
// AMX prefill (kernels/cpu/amx_blocks.h, shared with gemm_panels_int8). A panel unpacked with its
// offsets taken off (unpack_panel's kSigned: the weights' own integer codes, [step][32 rows][4]
// bytes) is the tiles' weight operand as it is, and its fp32 scale lines their block scales.
// The AMX tiles take over from the VNNI ones from kAmxBlocksMinRows rows (linear_plan.h: the
// plan). The types that run on them: not Q6_K, whose scales are per 16 inputs (two tile products
// of half the depth per block, each with its fold: slower than its VNNI tiles), as the plan says.
static_assert(kAmxBlocksMinRows == amx_blocks::kRows, "the AMX tiles start at one token tile");
constexpr bool kAmxType(GgmlType t) { return t != GgmlType::kQ6_K; }
#endif

using PackedTile = void (*)(const ActTiles&, int, const PackedGguf&, int, float*, std::size_t, int, int);
template <GgmlType T, std::size_t... I>
constexpr std::array<PackedTile, sizeof...(I)> packed_tiles(std::index_sequence<I...>) {
  return {&packed_tile<T, static_cast<int>(I) + 1, 1>...};
}
using PrefillTile = void (*)(const ActTiles&, int, const Unpacked&, float*, std::size_t, int);
template <GgmlType T, std::size_t... I>
constexpr std::array<PrefillTile, sizeof...(I)> prefill_tiles(std::index_sequence<I...>) {
  return {&prefill_tile<T, static_cast<int>(I) + 1>...};
}

// Panels a decode tile streams at once: two for Q8_0 (its codes need no unpacking: four
// chains) and Q6_K (already two streams per panel); for the nibble types (Q4_0, Q4_1, Q4_K,
// Q5_K) it depends on the core. On AMD's, one, so the thread reads one stream front to back,
// with two int32 chains per zmm (packed_tile's kSplit): on Zen 4 (2026-12-02) one panel took
// TinyLlama Q4_0's tg64 from 37-40 to 43-48 t/s and Q4_K_M's from 36-37 to 38-39, Q8_0's from 23
// to 21. On Intel's, two: on a Xeon with AMX (family 6 model 167, 2026-12-02) two panels took
// cold decode of Q4_0 / Q4_K / Q5_K at 5632 x 2048 and 2048 x 5632 from 22.6-26.6 to 28.4-31.8
// GB/s (probe 35.5-37.2).
template <GgmlType T>
bool two_decode_panels() {
  if constexpr (T == GgmlType::kQ8_0 || T == GgmlType::kQ6_K) return true;
  static const bool intel = __builtin_cpu_is("intel");
  return intel;
}

// A few token rows of the one-block types take two panels per tile, as decode does: two weight
// streams per thread and twice the independent sums. Up to 4 rows for Q8_0, 3 for Q4_0 / Q4_1
// (the int4 plugin's W4A8 g32 panels too); the nibble types at 4 rows and the K-quants keep one,
// their two-panel tiles spilling 11-12 zmm per block (tests/kernels/check_spills.py). TinyLlama,
// AMX Xeon, alternating, 2026-12-06: Q8_0 2 rows 45-48 -> 39-41 ms, 4 rows 45-47 -> 42-44; Q4_0
// 2-3 rows 25-27 -> 23-25. The nibble types take them where decode does (two_decode_panels: on
// Intel's cores); on the Zen 4 their 2- and 3-row passes cost more than the 4-row one with two
// panels (TinyLlama Q4_0, 2 threads, 2026-12-07: 1.19-1.35x a one-row pass against 1.12-1.13).
template <GgmlType T>
constexpr int kTwoPanelMaxRows = T == GgmlType::kQ8_0 ? 4 : T == GgmlType::kQ4_0 || T == GgmlType::kQ4_1 ? 3 : 0;

// Token tiles from which a thread unpacks each panel once (prefill_tile) instead of running
// packed_tile on it: with fewer (batched decode) the panel streams from memory while the tiles
// compute, and unpacking it first took the cold 8-row GEMM at 5632 x 2048 from 0.5-0.6 to 0.8-0.9
// ms and TinyLlama Q5_K_M's batched decode of 8 from 124 to 88 t/s; at 16 rows (3 tiles,
// 576 x 1536) unpacking was 5-25 % slower for Q8_0, Q4_0, Q4_K and Q5_K, level for Q6_K, cold
// and warm (Zen 4, 2026-12-02).
constexpr int kUnpackTiles = 4;

// Panels [p0, p1) of y [n, out]. One token row (decode) streams two_decode_panels<T>() ? 2 : 1 panels at once;
// a few rows meet each packed panel kRows at a time; more take each panel unpacked once.
template <GgmlType T>
void run_panels(const ActTiles& a, const void* amx, const PackedGguf& w, float* y, int n, int p0, int p1) {
  const auto ldc = static_cast<std::size_t>(w.out);
  const int tiles = (n + kRows - 1) / kRows;
  const int ahead = decode_prefetch_bytes();
#if INFERLAB_GEMM_GGUF_AMX
  if (amx != nullptr && kAmxType(T)) {  // AMX prefill: each panel unpacked once, then every 16-token tile
    const auto& k = *static_cast<const amx_blocks::Tokens*>(amx);
    amx_blocks::config().load();
    Unpacked& u = unpacked_scratch();
    u.reserve(w.in / kBlock);
    for (int p = p0; p < p1; ++p) {
      unpack_panel<T, true>(w, p, u);
      // GCC's tile loads are asm that names no memory operand: without this barrier the
      // unpacking's stores could be moved past the loads that read them.
      asm volatile("" ::: "memory");
      const amx_blocks::View v = amx_blocks::view(k, u.codes, u.codes_stride, u.scale_line(0, 0, 0), nullptr);
      const std::size_t pb = panel_bytes(T, w.in);
      // The next panel (this thread's next claim, as a rule) into L2 while this one computes.
      const SpreadPrefetch next = p + 1 < (w.out + kPanel - 1) / kPanel ? SpreadPrefetch(w.data.data() + static_cast<std::size_t>(p + 1) * pb, pb, amx_blocks::panel_steps(v))
                                             : SpreadPrefetch{};
      amx_blocks::panel<T == GgmlType::kQ4_1 || is_q45k(T), false>(v, y + static_cast<std::size_t>(p) * kPanel, ldc,
                                                                  std::min(kPanel, w.out - p * kPanel), next);
    }
    return;
  }
#else
  (void)amx;
#endif
  for (int p = p0; p < p1;) {
    float* yp = y + static_cast<std::size_t>(p) * kPanel;
    const int width = std::min(kPanel, w.out - p * kPanel);
    if (n == 1) {  // the row as it is (kRowStepBytes)
      if (two_decode_panels<T>() && p + 2 <= p1) {
        packed_tile<T, 1, 2, kRowStepBytes>(a, 0, w, p, yp, ldc, std::min(2 * kPanel, w.out - p * kPanel), ahead);
        p += 2;
      } else {
        packed_tile<T, 1, 1, kRowStepBytes>(a, 0, w, p, yp, ldc, width, ahead);
        ++p;
      }
      continue;
    }
    if (n <= kTwoPanelMaxRows<T> && two_decode_panels<T>() && p + 2 <= p1) {  // two streams, as decode
      const int both = std::min(2 * kPanel, w.out - p * kPanel);
      if (n == 2) packed_tile<T, 2, 2>(a, 0, w, p, yp, ldc, both, ahead);
      else if (n == 3) packed_tile<T, 3, 2>(a, 0, w, p, yp, ldc, both, ahead);
      else if constexpr (kTwoPanelMaxRows<T> >= 4) packed_tile<T, 4, 2>(a, 0, w, p, yp, ldc, both, ahead);
      p += 2;
      continue;
    }
    if (tiles < kUnpackTiles || !w.unpack || !gemm_gguf_unpack_enabled()) {
      static constexpr auto kPacked = packed_tiles<T>(std::make_index_sequence<kRows>{});
      for (int r0 = 0, t = 0; r0 < n; r0 += kRows, ++t)
        kPacked[static_cast<std::size_t>(std::min(kRows, n - r0) - 1)](a, t, w, p, yp + r0 * ldc, ldc, width, ahead);
    } else {
      static constexpr auto kUnpacked = prefill_tiles<T>(std::make_index_sequence<kRows>{});
      Unpacked& u = unpacked_scratch();
      u.reserve(w.in / kBlock);
      unpack_panel<T>(w, p, u);
      for (int r0 = 0, t = 0; r0 < n; r0 += kRows, ++t)
        kUnpacked[static_cast<std::size_t>(std::min(kRows, n - r0) - 1)](a, t, u, yp + r0 * ldc, ldc, width);
    }
    ++p;
  }
}
#endif

}  // namespace

namespace {
std::atomic<bool>& unpack_switch() {
  static std::atomic<bool> on{true};
  return on;
}
}  // namespace
bool set_gemm_gguf_unpack(bool on) { return unpack_switch().exchange(on); }
bool gemm_gguf_unpack_enabled() { return unpack_switch().load(std::memory_order_relaxed); }

bool gemm_gguf_available() {
#if INFERLAB_GEMM_GGUF_VNNI || INFERLAB_GEMM_GGUF_AVX2
  return true;
#else
  return false;
#endif
}

bool gemm_gguf_uses_amx(GgmlType type, int n) {
#if INFERLAB_GEMM_GGUF_AMX
  return plan_cpu_linear(CpuFormat::kGguf, n, CpuLinearShape{.type = type}, CpuIsa::host()) == CpuKernel::kGgufPanelsAmx;
#else
  (void)type, (void)n;
  return false;
#endif
}

void gemm_gguf(const std::int8_t* xq, const float* xs, const PackedGguf& w, float* y, int n, ThreadPool& pool) {
  const GemmGgufOutput one{&w, y};
  gemm_gguf_group(xq, xs, std::span<const GemmGgufOutput>(&one, 1), n, pool);
}

void gemm_gguf_group(const std::int8_t* xq, const float* xs, std::span<const GemmGgufOutput> group, int n,
                     ThreadPool& pool) {
  if (n <= 0 || group.empty()) return;
  const int in = group.front().w->in;
  thread_local std::vector<PanelSpan> spans;  // [members]
  spans.resize(group.size());
  bool needs_sum16 = false;
  for (std::size_t i = 0; i < group.size(); ++i) {
    const PackedGguf& w = *group[i].w;
    check(w.in == in, [&] {
      return "gemm_gguf_group: the matrices read one input, but their in differ (" + std::to_string(in) + " and " +
             std::to_string(w.in) + ")";
    });
    // What a thread streams per panel: all of its bytes (codes, scales, mins, top bits).
    const int panels = (w.out + kPanel - 1) / kPanel;
    spans[i] = {panels, panel_bytes(w.type, w.in)};
    needs_sum16 = needs_sum16 || w.type == GgmlType::kQ6_K;
  }
#if INFERLAB_GEMM_GGUF_VNNI || INFERLAB_GEMM_GGUF_AVX2
  // The activation tiles (act_tiles.h), made once for the group; the caller's (thread_local).
  const ActTiles a = pack_act_tiles(xq, xs, n, in, kBlock, needs_sum16, pool);
  // Runs of whole panels; at decode run_panels takes one or two panels of a run at a time (Q8_0's
  // and Q6_K's runs of odd length end with one single-panel tile), so a matrix of 6 panels
  // split 3 : 3 stays balanced. Claims of two panels: a decode tile's (each panel stands alone
  // in the others).
  const std::size_t per_panel = static_cast<std::size_t>(kPanel) * static_cast<std::size_t>(in) * static_cast<std::size_t>(n);
  const std::size_t grain = std::max<std::size_t>(1, (std::size_t{1} << 16) / per_panel);
#endif
#if INFERLAB_GEMM_GGUF_AVX2
  parallel_for_panel_union(spans, grain, 2, pool, [&](int member, int p0, int p1) {
    const GemmGgufOutput& o = group[static_cast<std::size_t>(member)];
    gemm_gguf_avx2_panels(a, *o.w, o.y, n, p0, p1);
  });
#elif INFERLAB_GEMM_GGUF_VNNI
  const void* amx = nullptr;  // the AMX tiles' activations (the VNNI tiles when null)
#if INFERLAB_GEMM_GGUF_AMX
  thread_local amx_blocks::Tokens tokens;
  bool amx_types = false;
  for (const GemmGgufOutput& o : group) amx_types = amx_types || gemm_gguf_uses_amx(o.w->type, n);
  if (amx_types) {
    amx_blocks::make_tokens(a, xq, n, in, tokens, pool);
    amx = &tokens;
  }
#endif
  parallel_for_panel_union(spans, grain, 2, pool,
                           [&](int member, int p0, int p1) {
                             const PackedGguf& w = *group[static_cast<std::size_t>(member)].w;
                             float* y = group[static_cast<std::size_t>(member)].y;
                             switch (w.type) {
                               case GgmlType::kQ8_0: return run_panels<GgmlType::kQ8_0>(a, amx, w, y, n, p0, p1);
                               case GgmlType::kQ4_0: return run_panels<GgmlType::kQ4_0>(a, amx, w, y, n, p0, p1);
                               case GgmlType::kQ4_K: return run_panels<GgmlType::kQ4_K>(a, amx, w, y, n, p0, p1);
                               case GgmlType::kQ5_K: return run_panels<GgmlType::kQ5_K>(a, amx, w, y, n, p0, p1);
                               case GgmlType::kQ6_K: return run_panels<GgmlType::kQ6_K>(a, amx, w, y, n, p0, p1);
                               default: return run_panels<GgmlType::kQ4_1>(a, amx, w, y, n, p0, p1);
                             }
                           });
#else
  (void)xq, (void)xs, (void)pool, (void)needs_sum16;
  check(false, "gemm_gguf: this build has neither AVX-512 VNNI nor AVX2 (use matmul_gguf_act)");
#endif
}

}  // namespace inferlab::cpu
