// The int4 group panels on AVX2 without AVX-512 (see gemm_int4_panels.h): the passes for int8
// and int16 activations, and W4A16 with fp32 activations.
#include "kernels/cpu/gemm_int4_panels_impl.h"

#if INFERLAB_INT4_PANELS_AVX2
#include <immintrin.h>

#include <cstring>
#include <type_traits>
#include <vector>

#include "inferlab/huge_pages.h"
#include "kernels/cpu/simd.h"
#include "kernels/ref/matmul_int4.h"

namespace inferlab::cpu::int4_panels {
namespace {

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
// Token rows a pass takes: on one half R int sums, R group sums and R totals fit in 16 ymm beside
// the codes; on both halves (run_half_passes) 3-4 rows spill the group sums, and still win.
constexpr int kHalfPassRows = 4;
constexpr int kHalf = 8;  // weight rows per half

inline __m256i bcast4_avx2(const void* p) {
  std::int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}
inline __m256i load32_avx2(const std::uint8_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }

// Half h0 of panel p (its first row 8 h0): the codes, group scales and zero points from there.
struct HalfPanel {
  const std::uint8_t* codes;
  const float* sw;
  const std::uint8_t* zw;    // null when symmetric
  std::size_t panel_cells;   // group cells of a whole panel
  int h0;
};
[[gnu::always_inline]] inline HalfPanel half_panel(const Int4Panels& w, int blocks, int groups, int p, int h0) {
  const std::size_t pb = static_cast<std::size_t>(blocks) * kBlockBytes, pcells = static_cast<std::size_t>(groups) * P;
  return {w.codes.data() + p * pb + kHalf * 4 * h0, w.scale.data() + p * pcells + kHalf * h0,
          w.symmetric() ? nullptr : w.zero.data() + p * pcells + kHalf * h0, pcells, h0};
}
// Group g's cells ahead in the panel's stream.
[[gnu::always_inline]] inline void prefetch_half_group(HalfPanel hp, int g, int per, int ahead) {
  prefetch_group<1>(hp.sw, hp.zw, hp.panel_cells, g, per, ahead);
}
// Block b's codes (all 16 rows) ahead in the stream.
[[gnu::always_inline]] inline void prefetch_half_block(HalfPanel hp, const std::uint8_t* pc, int ahead) {
  prefetch_ahead(pc - kHalf * 4 * hp.h0, kBlockBytes, ahead);
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
// pass over a panel; 0 for the later ones, which find its codes in L1 / L2).
template <int R, int G, class T>
void half_pass(const Acts<T>& a, const Int4Panels& w, int p, int h0, int r0, float* y, std::size_t ys, int valid,
               int ahead) {
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
    prefetch_half_group(hp, g, a.per, ahead);
    // Each token row's block b. (Activations stored pre-broadcast, 32 bytes per 4, so that a step's
    // operand is a plain load: 1.12x faster hot in L2, 0.9x over weights streamed from memory, where
    // their 8x the bytes crowd L1; SmolLM2-shaped g128, 4 rows, one thread, Zen 3, 2026-12-07.)
    const T* xr[R];
    for (int r = 0; r < R; ++r)
      xr[r] = a.xq + static_cast<std::size_t>(r0 + r) * a.in + static_cast<std::size_t>(g * a.per) * kActBlock;
    for (int b = g * a.per; b < b1; ++b) {
      const std::uint8_t* pc = hp.codes + static_cast<std::size_t>(b) * kBlockBytes;
      prefetch_half_block(hp, pc, ahead);
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
                pin(d[q][r]);  // a chain, not GCC's reassociated tree over the block's products
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
              pin(d[q][r]);
              d[q][r] = _mm256_add_epi16(d[q][r], _mm256_maddubs_epi16(hi[q], xh));
              pin(d[q][r]);
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

// W4A16 with exact fp32 activations (gemm_int4_panels_f32; the arithmetic at F32Acts,
// gemm_int4_panels_impl.h) on half panels: one AND and one conversion per 8 weights, shared by the
// pass's token rows, and one FMA per 8 weights and row. Tried (2026-12-07, Zen 3, 1536 x 576 g128
// x150 streamed, one thread): 4 chains a row with the codes shifted into place (one mask
// register) spilled at one row and took 7.9-8.9 ms against 6.4-6.7 for this (f16's panels
// 11.4-14.3, matmul_int4 16.2).
template <int R, int G>
void f32_half_pass(const F32Acts& a, const Int4Panels& w, int p, int h0, int r0, float* y, std::size_t ys, int valid,
                   int ahead) {
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
    prefetch_half_group(hp, g, a.per, ahead);
    const float* xr[R];
    for (int r = 0; r < R; ++r)
      xr[r] = a.xw + static_cast<std::size_t>(r0 + r) * a.in + static_cast<std::size_t>(g * a.per) * kActBlock;
    for (int b = g * a.per; b < b1; ++b) {
      const std::uint8_t* pc = hp.codes + static_cast<std::size_t>(b) * kBlockBytes;
      prefetch_half_block(hp, pc, ahead);
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



// The AVX2 passes, split across the pool: pass.template operator()<R, G>(p, h0, r0, y, valid, ahead)
// runs R token rows from r0 against halves h0 .. h0 + G - 1 of panel p, y at (r0, 16p + 8h0). Up to
// kWholeRows token rows, each tile of kHalfPassRows reads a panel front to back, both halves a pass
// (the int8 / int16 activations: every row count); more rows (W4A16's fp32 FMAs: from 3, where
// both halves' chains outgrow the registers) take one half at a time, the other's codes waiting
// in L1 / L2. For the int8 / int16 passes one half at a time was the slower: the first half's pass
// brought every line from memory while using half of it, and the second found them cached, the
// two phases one after the other (1536 x 576 and 576 x 1536 g128 x100 streamed, one thread, Zen 3,
// 2026-12-07, in-process alternating, same bits: W4A8 whole / halves 0.75-0.78 at 2 rows,
// 0.80-0.82 at 3-16; int16 0.78-0.87 at 2-6, 0.85-0.92 at 8-16; W4A16 3-4 rows 1.38-1.47: kept as
// halves). (Tried: the second half's first pass prefetching the thread's next panel, 2 rows 0.97x,
// 4 rows 1.02-1.04x the time without it; not kept.)
constexpr int kAllRows = 1 << 30;
template <int kWholeRows, class Pass>
void run_half_passes(const Int4Panels& w, float* y, int n, ThreadPool& pool, const Pass& pass) {
  const int ahead = decode_prefetch_bytes();
  const std::size_t ys = static_cast<std::size_t>(w.out);
  parallel_for_panels(w, n, pool, [&](std::size_t p0, std::size_t p1) {
        for (int p = static_cast<int>(p0); p < static_cast<int>(p1); ++p) {
          const int valid = std::min(P, w.out - p * P);
          float* yp = y + static_cast<std::size_t>(p) * P;
          const bool whole = n <= kWholeRows;
          for (int h = 0; h < (whole ? 1 : 2) && kHalf * h < valid; ++h)
            for (int r0 = 0; r0 < n; r0 += kHalfPassRows) {
              float* yh = yp + static_cast<std::size_t>(r0) * ys + kHalf * h;
              const int ahead_once = h == 0 && r0 == 0 ? ahead : 0;
              const int rows = std::min(kHalfPassRows, n - r0);
              if (whole) {
                switch (rows) {
                  case 1: pass.template operator()<1, 2>(p, 0, r0, yh, valid, ahead_once); break;
                  case 2: pass.template operator()<2, 2>(p, 0, r0, yh, valid, ahead_once); break;
                  case 3: if constexpr (kWholeRows >= 3) pass.template operator()<3, 2>(p, 0, r0, yh, valid, ahead_once); break;
                  default: if constexpr (kWholeRows >= 4) pass.template operator()<4, 2>(p, 0, r0, yh, valid, ahead_once); break;
                }
                continue;
              }
              switch (rows) {
                case 1: pass.template operator()<1, 1>(p, h, r0, yh, valid, ahead_once); break;
                case 2: pass.template operator()<2, 1>(p, h, r0, yh, valid, ahead_once); break;
                case 3: pass.template operator()<3, 1>(p, h, r0, yh, valid, ahead_once); break;
                default: pass.template operator()<4, 1>(p, h, r0, yh, valid, ahead_once); break;
              }
            }
        }
      });
}

template <class T>
void run_half(const Acts<T>& a, const Int4Panels& w, float* y, int n, ThreadPool& pool) {
  const std::size_t ys = static_cast<std::size_t>(w.out);
  run_half_passes<kAllRows>(w, y, n, pool, [&]<int R, int G>(int p, int h0, int r0, float* yp, int valid, int ahead) {
    half_pass<R, G>(a, w, p, h0, r0, yp, ys, valid, ahead);
  });
}

}  // namespace

void run_avx2(const Acts<std::int8_t>& a, const Int4Panels& w, float* y, int n, ThreadPool& pool) {
  run_half(a, w, y, n, pool);
}
void run_avx2(const Acts<std::int16_t>& a, const Int4Panels& w, float* y, int n, ThreadPool& pool) {
  run_half(a, w, y, n, pool);
}

void run_avx2_f32(const float* x, const Int4Panels& w, float* y, int n, ThreadPool& pool) {
  const F32Acts a = make_f32_acts(x, w, n);
  const std::size_t ys = static_cast<std::size_t>(w.out);
  run_half_passes<2>(w, y, n, pool, [&]<int R, int G>(int p, int h0, int r0, float* yp, int valid, int ahead) {
    f32_half_pass<R, G>(a, w, p, h0, r0, yp, ys, valid, ahead);
  });
}

}  // namespace inferlab::cpu::int4_panels
#endif
