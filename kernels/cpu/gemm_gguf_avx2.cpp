// gemm_gguf on AVX2 (no VNNI): micro-tiles of R token rows x 8G weight rows over the packed
// panels (gemm_gguf.h, gemm_gguf_layout.h), a ymm of int lanes per 8 weight rows (byte 4j + t
// of a step's 32 bytes: input 4s + t of row j, as vpdpbusd reads it; here `vpmaddubsw` takes
// them against the token's 4 inputs broadcast, giving row j's two pair sums in int16 lanes 2j
// and 2j + 1, and `vpmaddwd` against ones adds those into int32 lane j).
//  - Q4_0 / Q4_1 / Q4_K: codes 0..15 against activations in [-127, 127] make a pair sum of at
//    most 3810 in magnitude, so a whole 32-block (8 pairs per lane) is summed in int16 lanes
//    (|sum| <= 30480 < 32767) with `vpaddw`, and widened by one `vpmaddwd` per block: one
//    multiply instruction and one add per 32 products, where maddubs + madd + add per step
//    (llama.cpp's and our row kernels' AVX2 dot) spends two multiplies and an add.
//  - Q5_K (codes to 31) widens its int16 sums every 2 lines, Q6_K (to 63) every 2 steps of each
//    half (its int32 sums started at -32 Σx_h); the K-quants then multiply the int32 sums by the
//    rows' integer sub-block scales and fold per super-block (ktile).
//  - Q8_0's codes are stored as c + 128 (the VNNI panels' unsigned operand), which would
//    saturate `vpmaddubsw`: the top bit is flipped back and the sign trick used (|c| against x
//    carrying c's sign; |pair| <= 128 * 127 * 2 = 32512), widened every step.
//  - Q8_0 / Q4_0 / Q4_1: one fp32 fold per block and (row, token): fma(float(int32 sum),
//    d_w * d_x, acc), Q4_1's m_w (d_x Σx) added after it (Q4_0's -8 Σx starts the int32 sum).
//    Every tile shape runs the same operations per (row, token) in the same order, so a row
//    gets the same bits in any tile (tested).
//  - prefill (4 full tiles or more) of the K-quants reads its codes from the panel unpacked
//    once per thread (unpack_panel below); batched decode and the last, short tile read the
//    packed panel.
//  - decode tiles prefetch their panel decode_prefetch_bytes() ahead (decode_prefetch.h;
//    docs/kernels.md: 1.17-1.27x cold on the nibble types at 2 threads, Zen 3).
// Register budget (16 ymm): R * G int accumulators + R * G fp32 sums + the codes; tiles are
// 6 x 8 (prefill: the 8-row group stays in L1 while every token tile passes), 1 x 32 (decode:
// the panel is read front to back once) and 2-5 x 16 or 32 (the last, short tile: short_tile). Q5_K and Q6_K's
// 6 x 8 tiles spill (an int32 sum beside each int16 one) and still beat two tiles of 3 x 8:
// gemm_gguf bench, n = 128, Zen 3, medians of alternating runs, 1.21x (Q5_K) and 1.34x (Q6_K).
#include "kernels/cpu/gemm_gguf_avx2.h"

#if INFERLAB_GEMM_GGUF_AVX2
#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/cpu/decode_prefetch.h"
#include "kernels/cpu/gemm_gguf_layout.h"
#include "kernels/cpu/simd.h"

namespace inferlab::cpu {

using namespace gguf_panels;

namespace {

inline __m256i broadcast4(const std::int8_t* p) {
  std::int32_t four;
  std::memcpy(&four, p, 4);
  return _mm256_set1_epi32(four);
}
inline __m256i load32(const std::uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline __m256 halves8(const std::uint8_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
// Bits `from` .. of every byte moved to bits `to` .. (16-bit shifts by at most 4: what crosses
// from the neighbouring byte lands in bits the caller's mask drops, as long as the field is
// narrower than the shift's complement: Q5_K's 1 bit to bit 4, Q6_K's 2 bits to bits 4-5).
inline __m256i bits_to(__m256i v, int from, int to) {
  return from <= to ? _mm256_sll_epi16(v, _mm_cvtsi32_si128(to - from)) : _mm256_srl_epi16(v, _mm_cvtsi32_si128(from - to));
}
// simd.h's pin: without it GCC's reassociation turns a block's chain of integer adds into one
// tree over all the block's products, each kept on the stack until it is summed (108 ymm stack
// accesses in Q4_0's 6 x 8 tile, 30 with it; objdump). Q5_K / Q6_K keep their int16 chains
// unpinned: in their 3 x 8 tiles the pin cost 18 % / 41 % (GCC stopped unrolling their halves).
inline __m256 u8x8_to_float(const std::uint8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

// Q5_K's codes of steps s and 4 + s (inputs 4s .. 4s + 3 and 16 + 4s ..) of weight rows 8q ..
// 8q + 7: the nibbles of line s with the fifth bit from the plane line leading each pair of
// steps (bit (s % 2) * 4 + 2 * (rows 16-31) + (high nibble) of byte 4 (j % 16) + t).
inline void q5_codes(const std::uint8_t* slot, const Layout& kL, int s, int q, __m256i& lo, __m256i& hi) {
  const __m256i low = _mm256_set1_epi8(0x0F), bit4 = _mm256_set1_epi8(0x10);
  const int bit = (s % 2) * 4 + (q / 2) * 2;
  const __m256i raw = load32(slot + kL.code(s) + 32 * q), hb = load32(slot + kL.plane(s / 2) + 32 * (q % 2));
  lo = _mm256_or_si256(_mm256_and_si256(raw, low), _mm256_and_si256(bits_to(hb, bit, 4), bit4));
  hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(raw, 4), low), _mm256_and_si256(bits_to(hb, bit + 1, 4), bit4));
}
// Q6_K's codes (0..63, unsigned: the -32 is the sums' start) of step s of half h (codes 16 h +
// 4s .. 16 h + 4s + 3) of weight rows 8q .. 8q + 7: the nibble with its top bits from the plane.
inline __m256i q6_code(const std::uint8_t* slot, const std::uint8_t* planes, const Layout& kL, int h, int s, int q) {
  const __m256i low = _mm256_set1_epi8(0x0F), top = _mm256_set1_epi8(0x30);
  const __m256i raw = load32(slot + kL.code(s) + 32 * q), hb = load32(planes + kL.plane(s) + 32 * (q % 2));
  const __m256i nib = h == 0 ? _mm256_and_si256(raw, low) : _mm256_and_si256(_mm256_srli_epi16(raw, 4), low);
  return _mm256_or_si256(nib, _mm256_and_si256(bits_to(hb, (q / 2) * 4 + 2 * h, 4), top));
}

// Prefill of the K-quants first unpacks each panel into plain codes, once per thread and
// panel, so the 6 x 8 tiles that pass over it load finished codes instead of rebuilding them
// (Q5_K: 10 operations per line of 8 rows beside the tile's 12 vpmaddubsw; Q6_K: 6 per step;
// Q4_K: 3); the fp32 epilogue, scales and mins still read from the packed panel. The unpacked
// panel is [group q of 8 rows][block][step][32 bytes]: byte 4j + t of step s is the code of
// input 4s + t of row 8q + j, a group's codes contiguous (in = 2048: 16 KiB, in L1 while the
// tiles pass). Integer sums are exact in any order, so a row keeps its bits (ktile's fp32
// fold). Q8_0 / Q4_0 / Q4_1 stay packed (their codes cost 0-3 operations per line, Q4_K's
// small gain says little is left there; not measured unpacked). inferlab_bench gemm_gguf_unpack (5632 x 2048 warm, n = 128
// / 512, call-by-call A/B, 2026-12-03): Q6_K 1.37 / 1.42x, Q5_K 1.06 / 1.08x, Q4_K 1.02 / 1.06x.
template <GgmlType T>
constexpr bool kUnpackAvx2 = T == GgmlType::kQ4_K || T == GgmlType::kQ5_K || T == GgmlType::kQ6_K;
constexpr int kUnpackMinTiles = 4;  // as the VNNI path: fewer tiles read the packed panel

struct alignas(32) Line32 {
  std::uint8_t b[32];
};
// The calling thread's unpacked panel (each pool thread unpacks its own panels).
std::vector<Line32>& unpacked_scratch() {
  thread_local std::vector<Line32> u;
  return u;
}
inline std::size_t unpacked_line(int blocks, int q, int b, int s) {
  return (static_cast<std::size_t>(q) * blocks + b) * 8 + s;
}

template <GgmlType T>
void unpack_panel(const std::uint8_t* panel, int in, std::vector<Line32>& u) {
  constexpr Layout kL = layout(T);
  const int blocks = in / kBlock;
  if (u.size() < static_cast<std::size_t>(kPanel / 8) * blocks * 8) u.resize(static_cast<std::size_t>(kPanel / 8) * blocks * 8);
  auto put = [&](int q, int b, int s, __m256i c) {
    _mm256_store_si256(reinterpret_cast<__m256i*>(u[unpacked_line(blocks, q, b, s)].b), c);
  };
  for (int q = 0; q < kPanel / 8; ++q)
    for (int b = 0; b < blocks; ++b) {
      const std::uint8_t* slot = block_slot(panel, kL, b);
      if constexpr (T != GgmlType::kQ6_K) {
        for (int s = 0; s < 4; ++s) {
          __m256i lo, hi;
          if constexpr (T == GgmlType::kQ5_K) {
            q5_codes(slot, kL, s, q, lo, hi);
          } else {
            const __m256i raw = load32(slot + kL.code(s) + 32 * q), low = _mm256_set1_epi8(0x0F);
            lo = _mm256_and_si256(raw, low);
            hi = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low);
          }
          put(q, b, s, lo);
          put(q, b, 4 + s, hi);
        }
      } else {
        const std::uint8_t* planes = plane_base(panel, slot, kL, in, b);
        for (int h = 0; h < 2; ++h)
          for (int s = 0; s < 4; ++s) put(q, b, 4 * h + s, q6_code(slot, planes, kL, h, s, q));
      }
    }
}

// A 4-bit block (Q4_0, Q4_1, Q4_K) added into acc's int16 pair sums: line s holds step s in the
// low nibbles and step 4 + s in the high ones; the whole block fits int16 (|sum| <= 30480).
// codes (unpacked: steps s and 4 + s of each group g at codes(g, s)) replaces the nibbles.
template <int R, int G, int SB, class Codes = std::nullptr_t>
[[gnu::always_inline]] inline void nibble_block(const std::uint8_t* slot, const Layout& kL, const std::int8_t* x, int q0,
                                                __m256i (&acc)[R][G], Codes codes = nullptr) {
  const __m256i low = _mm256_set1_epi8(0x0F);
#pragma GCC unroll 4
  for (int s = 0; s < 4; ++s) {
    __m256i lo[G], hi[G];
    for (int g = 0; g < G; ++g) {
      if constexpr (!std::is_same_v<Codes, std::nullptr_t>) {
        lo[g] = codes(g, s);
        hi[g] = codes(g, 4 + s);
      } else {
        const __m256i raw = load32(slot + kL.code(s) + 32 * (q0 + g));
        lo[g] = _mm256_and_si256(raw, low);
        hi[g] = _mm256_and_si256(_mm256_srli_epi16(raw, 4), low);
      }
    }
    for (int r = 0; r < R; ++r) {
      const __m256i xl = broadcast4(x + s * SB + 4 * r), xh = broadcast4(x + (4 + s) * SB + 4 * r);
      for (int g = 0; g < G; ++g) {
        acc[r][g] = _mm256_add_epi16(acc[r][g], _mm256_add_epi16(_mm256_maddubs_epi16(lo[g], xl),
                                                                 _mm256_maddubs_epi16(hi[g], xh)));
        pin(acc[r][g]);
      }
    }
  }
}

// Stores f[r][g] to y[r * ldc + 8 g + c] for c < 8 and 8 g + c < width.
template <int R, int G>
void store_tile(const __m256 (&f)[R][G], float* y, std::size_t ldc, int width) {
  for (int g = 0; g < G; ++g) {
    const int cols = std::clamp(width - 8 * g, 0, 8);
    if (cols == 0) break;
    const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(cols), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    for (int r = 0; r < R; ++r) {
      float* out = y + static_cast<std::size_t>(r) * ldc + 8 * g;
      if (cols == 8) _mm256_storeu_ps(out, f[r][g]);
      else _mm256_maskstore_ps(out, mask, f[r][g]);
    }
  }
}

// 8 rows' integer sub-block scales (Q4_K / Q5_K: unsigned 6-bit; Q6_K: int8) times the rows'
// int32 sums, read after the codes they scale (the slot's last bytes: a panel is read front to
// back; reading them first made cold decode 25 % slower, Zen 3).
inline __m128i load8(const std::uint8_t* p) { return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)); }
inline __m256i scale_u8(__m256i sum, const std::uint8_t* sc) { return _mm256_mullo_epi32(sum, _mm256_cvtepu8_epi32(load8(sc))); }
inline __m256i scale_s8(__m256i sum, const std::uint8_t* sc) { return _mm256_mullo_epi32(sum, _mm256_cvtepi8_epi32(load8(sc))); }

// The K-quants' tile: as `tile` below, but a block's int32 sums are multiplied by the rows'
// integer sub-block scales (`vpmulld`), so the block's int32 sum is already sc S; it is folded
// with the activation scale alone (fs += S xs) and with the super-block's d once per 8 blocks
// (f += d fs). The mins (Q4_K, Q5_K) run after each super-block's codes as a pass of their
// own: f -= dmin Σ_b m_b (xs Σx)_b, the products read from ActTiles::xsum. Q6_K's offset
// starts each half's int32 sum at -32 Σx_h. Per (row, token, block) the fold is a multiply, a
// conversion and an FMA, where `tile` spends a conversion, a multiply and an FMA, and the
// mins a conversion, a multiply and an FMA more.
// kU: the codes are read from `codes`, the panel unpacked (unpack_panel), not rebuilt here.
template <GgmlType T, int R, int G, int SB, bool kU = false>
void ktile(const ActTiles& a, int t, int r0, const std::uint8_t* panel, int in, int q0, float* y, std::size_t ldc,
           int width, const Line32* codes = nullptr, int ahead = 0, SpreadPrefetch* next = nullptr) {
  constexpr Layout kL = layout(T);
  const int blocks = in / kBlock;
  auto code_line = [&](int g, int b, int s) { return load32(codes[unpacked_line(blocks, q0 + g, b, s)].b); };
  constexpr bool kQ5 = T == GgmlType::kQ5_K, kQ6 = T == GgmlType::kQ6_K;
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 f[R][G];
  for (int r = 0; r < R; ++r)
    for (int g = 0; g < G; ++g) f[r][g] = _mm256_setzero_ps();
  const std::size_t at0 = a.tile_blocks(t) + static_cast<std::size_t>(r0);  // + b kTileRows: block b's slots
  const std::int8_t* x0 = a.tile_x(t) + 4 * r0;
  for (int b0 = 0; b0 < a.blocks; b0 += kL.blocks_per_record) {
    const std::uint8_t* head = record_head(panel, kL, b0);
    prefetch_ahead(head, kL.head, ahead);
    __m256 fs[R][G];
    for (int r = 0; r < R; ++r)
      for (int g = 0; g < G; ++g) fs[r][g] = _mm256_setzero_ps();
    for (int b = b0; b < b0 + kL.blocks_per_record; ++b) {
      const std::uint8_t* slot = block_slot(panel, kL, b);
      prefetch_ahead(slot, kL.slot, ahead);
      if (next != nullptr) next->step();
      if constexpr (kQ6) prefetch_ahead(plane_base(panel, slot, kL, in, b), kL.apart, ahead);
      const std::int8_t* x = x0 + static_cast<std::size_t>(b) * 8 * SB;  // step s of row r: + s SB + 4 r
      const std::size_t xb = at0 + static_cast<std::size_t>(b) * kTileRows;
      __m256i s32[R][G];  // the block's int32 sums, sc-weighted
      __m256i acc[R][G];  // int16 pair sums
      if constexpr (kQ6) {
        // Codes 0-15 of a block: the lines' low nibbles (half 0), 16-31: the high ones (half 1),
        // each 6-bit code made from its nibble and the top-bit plane (apart from the records);
        // pair sums (<= 63 * 127 * 2) widened every 2 steps.
        const std::uint8_t* planes = plane_base(panel, slot, kL, in, b);
        for (int h = 0; h < 2; ++h) {
          __m256i sum[R][G];
          for (int r = 0; r < R; ++r) {
            const __m256i start = _mm256_set1_epi32(-32 * a.half_sum[2 * xb - static_cast<std::size_t>(r0) + h * kTileRows + r]);
            for (int g = 0; g < G; ++g) sum[r][g] = start;
          }
#pragma GCC unroll 4
          for (int s = 0; s < 4; ++s) {
            __m256i c[G];
            for (int g = 0; g < G; ++g) {
              if constexpr (kU) c[g] = code_line(g, b, 4 * h + s);
              else c[g] = q6_code(slot, planes, kL, h, s, q0 + g);
            }
            for (int r = 0; r < R; ++r) {
              const __m256i xv = broadcast4(x + (4 * h + s) * SB + 4 * r);
              for (int g = 0; g < G; ++g) {
                const __m256i p = _mm256_maddubs_epi16(c[g], xv);
                acc[r][g] = s % 2 == 0 ? p : _mm256_add_epi16(acc[r][g], p);
                if (s % 2 == 1) sum[r][g] = _mm256_add_epi32(sum[r][g], _mm256_madd_epi16(acc[r][g], ones));
              }
            }
          }
          for (int g = 0; g < G; ++g) {
            const std::uint8_t* sc = slot + kL.scale + 32 * h + 8 * (q0 + g);
            for (int r = 0; r < R; ++r) {
              const __m256i part = scale_s8(sum[r][g], sc);
              s32[r][g] = h == 0 ? part : _mm256_add_epi32(s32[r][g], part);
            }
          }
        }
      } else {
        const std::uint8_t* sc = slot + kL.scale + 8 * q0;  // + 8 g: sc[32 rows]
        if constexpr (kQ5) {
          // Q4_K's nibbles with a fifth bit from the plane line leading each pair of steps (bit
          // (s % 2) * 4 + 2 * (rows 16-31) + (high nibble) of byte 4 (j % 16) + t); codes <= 31
          // make pair sums <= 7874, so the int16 sums are widened every 2 lines (4 pairs a lane).
          for (int r = 0; r < R; ++r)
            for (int g = 0; g < G; ++g) s32[r][g] = _mm256_setzero_si256();
#pragma GCC unroll 4
          for (int s = 0; s < 4; ++s) {
            __m256i lo[G], hi[G];
            for (int g = 0; g < G; ++g) {
              if constexpr (kU) {
                lo[g] = code_line(g, b, s);
                hi[g] = code_line(g, b, 4 + s);
              } else {
                q5_codes(slot, kL, s, q0 + g, lo[g], hi[g]);
              }
            }
            for (int r = 0; r < R; ++r) {
              const __m256i xl = broadcast4(x + s * SB + 4 * r), xh = broadcast4(x + (4 + s) * SB + 4 * r);
              for (int g = 0; g < G; ++g) {
                const __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(lo[g], xl), _mm256_maddubs_epi16(hi[g], xh));
                acc[r][g] = s % 2 == 0 ? p : _mm256_add_epi16(acc[r][g], p);
                if (s % 2 == 1) s32[r][g] = _mm256_add_epi32(s32[r][g], _mm256_madd_epi16(acc[r][g], ones));
              }
            }
          }
          for (int r = 0; r < R; ++r)
            for (int g = 0; g < G; ++g) s32[r][g] = scale_u8(s32[r][g], sc + 8 * g);
        } else {  // Q4_K: a whole block in int16 lanes (|sum| <= 30480), as Q4_0's
          for (int r = 0; r < R; ++r)
            for (int g = 0; g < G; ++g) acc[r][g] = _mm256_setzero_si256();
          if constexpr (kU) nibble_block<R, G, SB>(slot, kL, x, q0, acc, [&](int g, int s) { return code_line(g, b, s); });
          else nibble_block<R, G, SB>(slot, kL, x, q0, acc);
          for (int r = 0; r < R; ++r)
            for (int g = 0; g < G; ++g) s32[r][g] = scale_u8(_mm256_madd_epi16(acc[r][g], ones), sc + 8 * g);
        }
      }
      for (int r = 0; r < R; ++r) {
        const __m256 xs = _mm256_set1_ps(a.xs[xb + r]);
        for (int g = 0; g < G; ++g) fs[r][g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(s32[r][g]), xs, fs[r][g]);
      }
    }
    for (int g = 0; g < G; ++g) {
      const __m256 d = halves8(head + 16 * (q0 + g));
      for (int r = 0; r < R; ++r) f[r][g] = _mm256_fmadd_ps(fs[r][g], d, f[r][g]);
    }
    if constexpr (is_q45k(T)) {  // the mins: fs now sums m_b (xs Σx)_b over the super-block
      for (int r = 0; r < R; ++r)
        for (int g = 0; g < G; ++g) fs[r][g] = _mm256_setzero_ps();
      for (int b = b0; b < b0 + kL.blocks_per_record; ++b) {
        const std::uint8_t* m = block_slot(panel, kL, b) + kL.scale + 32;  // m[32 rows] after sc[32 rows]
        const std::size_t xb = at0 + static_cast<std::size_t>(b) * kTileRows;
        for (int g = 0; g < G; ++g) {
          const __m256 mv = u8x8_to_float(m + 8 * (q0 + g));
          for (int r = 0; r < R; ++r) fs[r][g] = _mm256_fmadd_ps(mv, _mm256_set1_ps(a.xsum[xb + r]), fs[r][g]);
        }
      }
      for (int g = 0; g < G; ++g) {
        const __m256 dmin = halves8(head + 64 + 16 * (q0 + g));
        for (int r = 0; r < R; ++r) f[r][g] = _mm256_fnmadd_ps(fs[r][g], dmin, f[r][g]);
      }
    }
  }
  store_tile<R, G>(f, y, ldc, width);
}

// y[r * ldc + 8 g + c] (r < R, g < G, c < 8, 8 g + c < width) = token rows r0 .. r0 + R - 1 of
// activation tile t x weight rows 8 (q0 + g) + c of the panel at `panel`. SB: a.step_bytes.
// Q8_0, Q4_0 and Q4_1 here; the K-quants in ktile.
template <GgmlType T, int R, int G, int SB>
void tile(const ActTiles& a, int t, int r0, const std::uint8_t* panel, int in, int q0, float* y, std::size_t ldc,
          int width, int ahead = 0, SpreadPrefetch* next = nullptr) {
  if constexpr (is_kquant(T)) {
    ktile<T, R, G, SB>(a, t, r0, panel, in, q0, y, ldc, width, nullptr, ahead, next);
  } else {
    constexpr Layout kL = layout(T);
    constexpr bool kQ8 = T == GgmlType::kQ8_0;
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 f[R][G];
    for (int r = 0; r < R; ++r)
      for (int g = 0; g < G; ++g) f[r][g] = _mm256_setzero_ps();
    const std::size_t at0 = a.tile_blocks(t) + static_cast<std::size_t>(r0);  // + b kTileRows: block b's slots
    const std::int8_t* x0 = a.tile_x(t) + 4 * r0;
    for (int b = 0; b < a.blocks; ++b) {
      const std::uint8_t* head = record_head(panel, kL, b);
      const std::uint8_t* slot = block_slot(panel, kL, b);
      prefetch_ahead(head, kL.record(), ahead);
      if (next != nullptr) next->step();
      const std::int8_t* x = x0 + static_cast<std::size_t>(b) * 8 * SB;  // step s of row r: + s SB + 4 r
      const std::size_t xb = at0 + static_cast<std::size_t>(b) * kTileRows;
      __m256i acc[R][G];  // int32 lanes (Q8_0) or int16 pair sums (the nibble types)
      for (int r = 0; r < R; ++r)
        for (int g = 0; g < G; ++g) acc[r][g] = _mm256_setzero_si256();
      if constexpr (kQ8) {
        const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
#pragma GCC unroll 8
        for (int s = 0; s < 8; ++s) {
          __m256i c[G], mag[G];
          for (int g = 0; g < G; ++g) {
            c[g] = _mm256_xor_si256(load32(slot + kL.code(s) + 32 * (q0 + g)), flip);
            mag[g] = _mm256_abs_epi8(c[g]);  // -128 -> 0x80, read as 128 by maddubs
          }
          for (int r = 0; r < R; ++r) {
            const __m256i xv = broadcast4(x + s * SB + 4 * r);
            for (int g = 0; g < G; ++g) {
              acc[r][g] = _mm256_add_epi32(
                  acc[r][g], _mm256_madd_epi16(_mm256_maddubs_epi16(mag[g], _mm256_sign_epi8(xv, c[g])), ones));
              pin(acc[r][g]);
            }
          }
        }
      } else {
        nibble_block<R, G, SB>(slot, kL, x, q0, acc);
      }
      for (int g = 0; g < G; ++g) {
        const int q = q0 + g;
        const __m256 dw = halves8(head + 16 * q);  // the rows' code scale
        for (int r = 0; r < R; ++r) {
          __m256i sum = acc[r][g];
          if constexpr (!kQ8) sum = _mm256_madd_epi16(sum, ones);
          if constexpr (T == GgmlType::kQ4_0) sum = _mm256_add_epi32(sum, _mm256_set1_epi32(-8 * a.sum[xb + r]));
          f[r][g] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sum), _mm256_mul_ps(dw, _mm256_set1_ps(a.xs[xb + r])), f[r][g]);
          if constexpr (T == GgmlType::kQ4_1)  // + m_w xs Σx
            f[r][g] = _mm256_fmadd_ps(halves8(head + 64 + 16 * q), _mm256_set1_ps(a.xsum[xb + r]), f[r][g]);
        }
      }
    }
    store_tile<R, G>(f, y, ldc, width);
  }
}

// Token rows [r0, r0 + R) of tile t against the panel's four groups of 8 rows, G at a time.
// Only the first group pass prefetches `ahead`: it brings the panel's lines (every pass reads
// every line), the later passes find them cached.
template <GgmlType T, int R, int G, int SB>
void tile_row_groups(const ActTiles& a, int t, int r0, const std::uint8_t* panel, int in, float* y, std::size_t ldc,
                     int width, int ahead = 0) {
  for (int q0 = 0; q0 < kPanel / 8 && 8 * q0 < width; q0 += G)
    tile<T, R, G, SB>(a, t, r0, panel, in, q0, y + 8 * q0, ldc, width - 8 * q0, q0 == 0 ? ahead : 0);
}

// The last tile's rows (fewer than kTileRows; batched decode, verification): 1 x 32, 2-3 x 16 (the
// K-quants 2-3 x 32), 4-5 x 16. A panel's step holds all 32 rows' codes, so every group pass
// reads every line; fewer, wider passes spill some sums but read each line fewer times: 4 x 16
// and 5 x 16 took 0.79-0.91x the time of 4 x 8 / 5 x 8 for every type, the K-quants' 2-3 x 32
// 0.69-0.91x that of 2-3 x 16, where Q8_0's took 1.04-1.18x and Q4_0's 0.84-1.13x (2048 x 2048
// and 2048 x 5632 / 5632 x 2048 streamed, one thread, Zen 3, 2026-12-07, in-process alternating,
// the same bits).
template <GgmlType T>
void short_tile(const ActTiles& a, int t, int rows, const std::uint8_t* panel, int in, float* y, std::size_t ldc,
                int width, int ahead) {
  constexpr int kFew = is_kquant(T) ? 4 : 2;  // groups of 8 rows a 2-3-row pass takes
  switch (rows) {
    case 1: return tile_row_groups<T, 1, 4, kTileStepBytes>(a, t, 0, panel, in, y, ldc, width, ahead);
    case 2: return tile_row_groups<T, 2, kFew, kTileStepBytes>(a, t, 0, panel, in, y, ldc, width, ahead);
    case 3: return tile_row_groups<T, 3, kFew, kTileStepBytes>(a, t, 0, panel, in, y, ldc, width, ahead);
    case 4: return tile_row_groups<T, 4, 2, kTileStepBytes>(a, t, 0, panel, in, y, ldc, width, ahead);
    default: return tile_row_groups<T, 5, 2, kTileStepBytes>(a, t, 0, panel, in, y, ldc, width, ahead);
  }
}

template <GgmlType T>
void run_panels(const ActTiles& a, const PackedGguf& w, float* y, int n, int p0, int p1) {
  const std::size_t stride = panel_bytes(T, w.in), ldc = static_cast<std::size_t>(w.out);
  const int full = n / kTileRows, rest = n % kTileRows;
  // Token tiles per chunk: 256 KiB of activation codes (half of Zen 3's 512 KiB L2 per core).
  // Without chunks every 8-row group streamed all the tiles' codes from L3 once n * in passed
  // the L2 (TinyLlama pp512: 1 MiB per group, 3 MiB for ffn_down).
  const int chunk = std::max(1, static_cast<int>((std::size_t{256} << 10) / (static_cast<std::size_t>(a.steps) * kTileStepBytes)));
  // Passes of one short tile (decode, 2-5 rows: a few sequences, a verification) stream the
  // panels front to back and prefetch ahead in that stream; with full tiles the next panel is
  // spread into L2 instead (below). Q8_0's few-row tiles, bound by their sign-trick multiplies,
  // gain nothing from it (4 rows 0.93-1.00x the time), so only its decode prefetches.
  const int ahead = full == 0 && (n == 1 || T != GgmlType::kQ8_0) ? decode_prefetch_bytes() : 0;
  for (int p = p0; p < p1; ++p) {
    const std::uint8_t* panel = w.data.data() + static_cast<std::size_t>(p) * stride;
    const int width = std::min(kPanel, w.out - kPanel * p);
    float* yp = y + static_cast<std::size_t>(kPanel) * p;
    if (n == 1) {  // decode: the row as it is (ActTiles::step_bytes 4), the panel front to back
      tile_row_groups<T, 1, 4, kRowStepBytes>(a, 0, 0, panel, w.in, yp, ldc, width, ahead);
      continue;
    }
    // Prefill: one group of 8 weight rows (a quarter of the panel, in L1) against every tile of
    // a chunk of tiles whose codes fit in L2, chunk after chunk (the panel stays in L2).
    const Line32* unpacked = nullptr;
    if constexpr (kUnpackAvx2<T>)
      if (full >= kUnpackMinTiles && w.unpack && gemm_gguf_unpack_enabled()) {
        std::vector<Line32>& u = unpacked_scratch();
        unpack_panel<T>(panel, w.in, u);
        unpacked = u.data();
      }
    // One or two tiles of rows (6-17: a small prefill, a long verification): their four group
    // passes each read every line of the panel, the first from memory; spreading the thread's next
    // panel into L2 over them, one share per block, overlaps that read with this panel's passes
    // (2048 x 2048 / 5632 x 2048 / 2048 x 5632 streamed, one thread, Zen 3, 2026-12-07, in-process
    // alternating, the same bits: 6-8 rows 0.92-0.98x the time, 12-18 rows 0.96-1.0x).
    SpreadPrefetch spread = unpacked == nullptr && full <= 2 && p + 1 < p1
                                ? SpreadPrefetch(panel + stride, stride, 4 * full * a.blocks)
                                : SpreadPrefetch{};
    for (int t0 = 0; t0 < full; t0 += chunk)
      for (int q = 0; q < kPanel / 8 && 8 * q < width; ++q)
        for (int t = t0; t < std::min(full, t0 + chunk); ++t) {
          float* yt = yp + static_cast<std::size_t>(t) * kTileRows * ldc + 8 * q;
          if constexpr (kUnpackAvx2<T>)
            if (unpacked != nullptr) {
              ktile<T, kTileRows, 1, kTileStepBytes, true>(a, t, 0, panel, w.in, q, yt, ldc, width - 8 * q, unpacked);
              continue;
            }
          tile<T, kTileRows, 1, kTileStepBytes>(a, t, 0, panel, w.in, q, yt, ldc, width - 8 * q, 0, &spread);
        }
    if (rest > 0)
      short_tile<T>(a, full, rest, panel, w.in, yp + static_cast<std::size_t>(full) * kTileRows * ldc, ldc, width, ahead);
  }
}

}  // namespace

void gemm_gguf_avx2_panels(const ActTiles& a, const PackedGguf& w, float* y, int n, int p0, int p1) {
  switch (w.type) {
    case GgmlType::kQ8_0: return run_panels<GgmlType::kQ8_0>(a, w, y, n, p0, p1);
    case GgmlType::kQ4_0: return run_panels<GgmlType::kQ4_0>(a, w, y, n, p0, p1);
    case GgmlType::kQ4_1: return run_panels<GgmlType::kQ4_1>(a, w, y, n, p0, p1);
    case GgmlType::kQ4_K: return run_panels<GgmlType::kQ4_K>(a, w, y, n, p0, p1);
    case GgmlType::kQ5_K: return run_panels<GgmlType::kQ5_K>(a, w, y, n, p0, p1);
    default: return run_panels<GgmlType::kQ6_K>(a, w, y, n, p0, p1);
  }
}

}  // namespace inferlab::cpu
#endif
