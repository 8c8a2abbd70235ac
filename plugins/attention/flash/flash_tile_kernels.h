// Register-blocked micro-kernels of the CPU flash attention (flash_attention.cpp). Each works on
// a block of up to kBlockVectors query vectors at once — query vectors of one (sequence, kv
// head) share every K/V tile — so one load of K^T (scores) or of a V row (P·V) feeds one FMA
// per vector of the block instead of one FMA in total, and the accumulators stay in registers
// for the whole reduction. With AVX-512 a block is 6 vectors x 64 columns: 24 zmm accumulators,
// and per step 4 vector loads + 6 broadcasts for 24 FMAs (per-vector code does 2 loads per 2
// FMAs, half the FMA peak at best). GCC/Clang vector types keep the code portable: without
// AVX-512 a Vec16 is two AVX2 registers and the block shrinks to fit 16 registers.
//   scores:  s[v][j]   = sum_c qs[v][c] * k_t[c][j]          (qs pre-scaled by 1/sqrt(d))
//   P·V:     acc[v][c] = alpha[v] * acc[v][c] + sum_j p[v][j] * v_rows[j][c]
#pragma once
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>

#include "kernels/cpu/vec_exp.h"
#if defined(__AVX__)
#include <immintrin.h>
#endif

namespace inferlab::plugins::flash {

using Vec16 = float __attribute__((vector_size(64)));
constexpr int kLanes = 16;  // floats per Vec16

#if defined(__AVX512F__)
constexpr int kBlockVectors = 6;  // query vectors per micro-kernel call
constexpr int kBlockChunks = 4;   // Vec16 columns per call: 64 positions (scores) or 64 of head_dim (P·V)
#else
constexpr int kBlockVectors = 3;
constexpr int kBlockChunks = 2;
#endif
constexpr int kBlockColumns = kBlockChunks * kLanes;

// exp(x) for x <= 0 on 16 lanes (explicit vector code: an `omp simd` loop around a scalar
// version stayed scalar in GCC 12): cpu::exp_lanes (kernels/cpu/vec_exp.h, ~2 ulp, far inside
// the attention tolerance; below e^-87 ~1e-38 instead of 0, which no softmax sum can see).
using Int16 = std::int32_t __attribute__((vector_size(64)));
inline void exp_nonpositive(Vec16& x) { cpu::exp_lanes<Vec16, Int16>(x); }  // kernels/cpu/vec_exp.h

// Lane c of the result = lane idx[c] of the 32 lanes a ++ b. GCC's __builtin_shuffle does not
// exist in Clang (the sanitizer build's compiler), so AVX-512 takes vpermt2ps directly. The
// result is written to `r`, not returned: a 64-byte vector returned by value changes the calling
// convention between AVX-512 and AVX2 builds (GCC's -Wpsabi, an error under -Werror on AVX2).
inline void shuffle2(const Vec16& a, const Vec16& b, const Int16& idx, Vec16& r) {
#if defined(__AVX512F__)
  r = reinterpret_cast<Vec16>(_mm512_permutex2var_ps(reinterpret_cast<__m512>(a), reinterpret_cast<__m512i>(idx),
                                                     reinterpret_cast<__m512>(b)));
#elif defined(__clang__)
  for (int c = 0; c < kLanes; ++c) r[c] = idx[c] < kLanes ? a[idx[c]] : b[idx[c] - kLanes];
#else
  r = __builtin_shuffle(a, b, idx);
#endif
}

// out[c][j] = rows[j][c] for j < 16, c < 16: a 16x16 block transposed in registers. Round b
// pairs rows r and r | 2^b (bit b of r clear) and swaps the off-diagonal 2^b x 2^b blocks of
// each 2^(b+1) block, which swaps bit b of the row and column index; after the 4 rounds every
// (r, c) sits at (c, r). 64 two-source shuffles replace 256 scalar loads and stores.
// rows: 16 pointers, each to 16 floats; out: [16, out_stride]
inline void transpose16(const float* const* rows, float* out, int out_stride) {
  Vec16 m[kLanes];
  for (int r = 0; r < kLanes; ++r) std::memcpy(&m[r], rows[r], sizeof(Vec16));
#pragma GCC unroll 4
  for (int b = 0; b < 4; ++b) {
    const int w = 1 << b;
    Int16 keep = {}, swap = {};  // the masks of new row r and new row r | w
    for (int c = 0; c < kLanes; ++c) {
      keep[c] = (c & w) == 0 ? c : kLanes + (c ^ w);
      swap[c] = (c & w) == 0 ? (c ^ w) : kLanes + c;
    }
#pragma GCC unroll 16
    for (int r = 0; r < kLanes; ++r) {
      if ((r & w) != 0) continue;
      Vec16 lo, hi;
      shuffle2(m[r], m[r | w], keep, lo);
      shuffle2(m[r], m[r | w], swap, hi);
      m[r] = lo;
      m[r | w] = hi;
    }
  }
  for (int c = 0; c < kLanes; ++c) std::memcpy(out + static_cast<std::size_t>(c) * out_stride, &m[c], sizeof(Vec16));
}

// k_t[c][j] = k_rows[j][c] for j < n, c < d: whole 16 x 16 blocks through transpose16, the
// edges (n or d not a multiple of 16) element by element.
// k_rows: [n] pointers to [d]; k_t: [d, stride]
inline void transpose_tile(const float* const* k_rows, int n, int d, float* k_t, int stride) {
  const int n_vec = n / kLanes * kLanes, d_vec = d / kLanes * kLanes;
  const float* block[kLanes];
  for (int j0 = 0; j0 < n_vec; j0 += kLanes)
    for (int c0 = 0; c0 < d_vec; c0 += kLanes) {
      for (int i = 0; i < kLanes; ++i) block[i] = k_rows[j0 + i] + c0;
      transpose16(block, k_t + static_cast<std::size_t>(c0) * stride + j0, stride);
    }
  for (int j = 0; j < n; ++j)
    for (int c = j < n_vec ? d_vec : 0; c < d; ++c) k_t[static_cast<std::size_t>(c) * stride + j] = k_rows[j][c];
}

// out[j] = sum of a[j]'s 16 lanes, j < 16 (a is consumed). Each round folds pairs of vectors:
// lane i < 8 of the result is the sum of lanes 2i, 2i+1 of the first, lane 8 + i that of the
// second, so after 4 rounds (15 folds of two shuffles and an add) lane j holds a[j]'s total, in
// order: 45 operations for 16 dot products where a horizontal sum each costs 16 x ~8. The sums
// are left in a[0] (returned by reference: see shuffle2).
inline const Vec16& lane_sums16(Vec16 (&a)[kLanes]) {
  const Int16 even = {0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30};
  const Int16 odd = even + 1;
  for (int width = kLanes; width > 1; width /= 2)
    for (int i = 0; i < width / 2; ++i) {
      const Vec16 x = a[2 * i], y = a[2 * i + 1];
      Vec16 e, o;
      shuffle2(x, y, even, e);
      shuffle2(x, y, odd, o);
      a[i] = e + o;
    }
  return a[0];
}

// s[j] = sum_c q[c] * k_rows[j][c] for j < n; s[n, n rounded up to 16) is written with zeros.
// Decode's scores (one row, a GQA group of a few vectors: too few to pay for transposing K):
// 16 positions at a time, each a Vec16 of partial products over head_dim, folded by
// lane_sums16 — no per-position horizontal sum. The d % 16 tail is added per position.
inline void dot_scores16(const float* q, int d, const float* const* k_rows, int n, float* s) {
  const int d_vec = d / kLanes * kLanes;
  const Int16 lane = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  for (int j0 = 0; j0 < n; j0 += kLanes) {
    const int m = std::min(kLanes, n - j0);
    // A short last block repeats its last row (no branch in the loop) and zeroes those lanes.
    const float* rows[kLanes];
    for (int j = 0; j < kLanes; ++j) rows[j] = k_rows[j0 + std::min(j, m - 1)];
    Vec16 acc[kLanes];
    for (int j = 0; j < kLanes; ++j) acc[j] = Vec16{};
    for (int c = 0; c < d_vec; c += kLanes) {
      Vec16 qc;
      std::memcpy(&qc, q + c, sizeof qc);
#pragma GCC unroll 16
      for (int j = 0; j < kLanes; ++j) {
        Vec16 kc;
        std::memcpy(&kc, rows[j] + c, sizeof kc);
        acc[j] += qc * kc;
      }
    }
    Vec16 sums = lane_sums16(acc);
    for (int j = 0; j < m && d_vec < d; ++j)
      for (int c = d_vec; c < d; ++c) sums[j] += q[c] * rows[j][c];
    sums = lane < m ? sums : Vec16{};
    std::memcpy(s + j0, &sums, sizeof sums);
  }
}

// The micro-kernels' register type: one machine vector (a zmm with AVX-512, a ymm otherwise),
// kPer of them per 16-float chunk. Vec16 itself is two ymm on AVX2, and GCC 12 kept the tile's
// Vec16 accumulators and broadcasts on the stack there (perf annotate, Zen 3: stores and reloads
// around every FMA; the two block kernels were 61 % of SmolLM2's pp512).
#if defined(__AVX512F__)
using VecN = Vec16;
using IntN = Int16;
#else
using VecN = float __attribute__((vector_size(32)));
using IntN = std::int32_t __attribute__((vector_size(32)));
#endif
constexpr int kNativeLanes = static_cast<int>(sizeof(VecN) / sizeof(float));
constexpr int kPer = kLanes / kNativeLanes;

// acc[v][k] += x[v * x_stride] * row[8k or 16k, ...) for v < MV and the NC chunks of 16 floats
// (kPer machine vectors each): one rank-1 update of the register tile, the step of both
// micro-kernels (NC * kPer vector loads and MV broadcasts feed MV * NC * kPer FMAs). Always
// inlined so the tile stays in registers.
template <int MV, int NC>
[[gnu::always_inline]] inline void rank1_update(VecN (&acc)[MV][NC * kPer], const float* row, const float* x,
                                                std::size_t x_stride) {
  VecN r[NC * kPer];
#pragma GCC unroll 8
  for (int k = 0; k < NC * kPer; ++k) std::memcpy(&r[k], row + k * kNativeLanes, sizeof(VecN));
#pragma GCC unroll 8
  for (int v = 0; v < MV; ++v) {
    const float w = x[static_cast<std::size_t>(v) * x_stride];
#pragma GCC unroll 8
    for (int k = 0; k < NC * kPer; ++k) acc[v][k] += w * r[k];
  }
}

// s[v][j] for v < MV, j < NC*16.
// qs:  [MV, d]          query vectors, already multiplied by the softmax scale
// k_t: [d, k_stride]    the tile's K transposed, from the block's first column
// s:   [MV, s_stride]
template <int MV, int NC>
struct ScoreBlock {
  static void run(const float* qs, int d, const float* k_t, int k_stride, float* s, int s_stride) {
    VecN acc[MV][NC * kPer] = {};
    for (int c = 0; c < d; ++c)
      rank1_update<MV, NC>(acc, k_t + static_cast<std::size_t>(c) * k_stride, qs + c, static_cast<std::size_t>(d));
#pragma GCC unroll 8
    for (int v = 0; v < MV; ++v)
#pragma GCC unroll 8
      for (int k = 0; k < NC * kPer; ++k)
        std::memcpy(s + static_cast<std::size_t>(v) * s_stride + k * kNativeLanes, &acc[v][k], sizeof(VecN));
  }
};

// acc[v][c0 + i] = alpha[v] * acc[v][c0 + i] + sum_{j < n} p[v][j] * v_rows[j][c0 + i], i < NC*16.
// p:      p[v][j] at p[v * p_stride + j * p_step]: softmax weights of the tile (0 where a vector
//         may not look), [MV, p_stride] (p_step 1) or, from the lane kernels, [n, lanes] (p_stride 1)
// v_rows: [n]              V vectors of the tile's positions, each [d]
// acc:    [MV, d]          running un-normalised outputs
template <int MV, int NC>
struct PvBlock {
  static void run(const float* p, int p_stride, int p_step, const float* const* v_rows, int n, int c0,
                  const float* alpha, float* acc, int d) {
    // Every loop over the tile unrolled, so that it stays in registers: a rolled one here left it
    // on the stack, each vector loaded as two halves and reloaded whole (a store-forwarding stall
    // per vector and call; a quarter of PvBlock's samples in SmolLM2's decode, perf, Zen 3).
    VecN a[MV][NC * kPer];
#pragma GCC unroll 8
    for (int v = 0; v < MV; ++v)
#pragma GCC unroll 8
      for (int k = 0; k < NC * kPer; ++k) {
        std::memcpy(&a[v][k], acc + static_cast<std::size_t>(v) * d + c0 + k * kNativeLanes, sizeof(VecN));
        a[v][k] *= alpha[v];
      }
    for (int j = 0; j < n; ++j) {
      if (j + 8 < n)  // the V row 8 positions on (see lane_scores_l)
        for (int k = 0; k < NC * kLanes; k += 16) __builtin_prefetch(v_rows[j + 8] + c0 + k);
      rank1_update<MV, NC>(a, v_rows[j] + c0, p + static_cast<std::size_t>(j) * p_step, static_cast<std::size_t>(p_stride));
    }
#pragma GCC unroll 8
    for (int v = 0; v < MV; ++v)
#pragma GCC unroll 8
      for (int k = 0; k < NC * kPer; ++k)
        std::memcpy(acc + static_cast<std::size_t>(v) * d + c0 + k * kNativeLanes, &a[v][k], sizeof(VecN));
  }
};

// table[mv - 1][nc - 1] = &Kernel<mv, nc>::run: a runtime block shape picks its instantiation.
template <template <int, int> class Kernel, int MV, int... NC>
constexpr auto kernel_row(std::integer_sequence<int, NC...>) {
  return std::array{&Kernel<MV, NC + 1>::run...};
}
template <template <int, int> class Kernel, int... MV>
constexpr auto kernel_table(std::integer_sequence<int, MV...>) {
  return std::array{kernel_row<Kernel, MV + 1>(std::make_integer_sequence<int, kBlockChunks>{})...};
}
inline constexpr auto kScoreKernels =
    kernel_table<ScoreBlock>(std::make_integer_sequence<int, kBlockVectors>{});
inline constexpr auto kPvKernels = kernel_table<PvBlock>(std::make_integer_sequence<int, kBlockVectors>{});

// Vec16 chunks per micro-kernel call for mv vectors: the most (up to kBlockChunks) whose
// accumulators (mv x nc x kPer), one row's nc x kPer vectors and a broadcast fit the register
// file. One register more and GCC 12 keeps an accumulator on the stack, chaining every step's FMA
// through a store and its reload: on AVX2, 3 vectors x 2 chunks need 17 ymm (PvBlock<3, 2> spent
// 45 % of its samples on that store, perf annotate, Zen 3).
constexpr int kVectorRegisters = kNativeLanes == 16 ? 32 : 16;
constexpr int fitting_chunks(int mv) {
  int nc = kBlockChunks;
  while (nc > 1 && mv * nc * kPer + nc * kPer + 1 > kVectorRegisters) --nc;
  return nc;
}

// Scores of `mv` vectors over tile columns [0, n), rounded up to whole Vec16s (the extra
// columns read stale but finite K^T columns; the softmax masks them).
inline void block_scores(const float* qs, int mv, int d, const float* k_t, int k_stride, int n,
                         float* s, int s_stride) {
  const int chunks = fitting_chunks(mv);
  for (int j0 = 0; j0 < n; j0 += chunks * kLanes) {
    const int nc = std::min(chunks, (n - j0 + kLanes - 1) / kLanes);
    kScoreKernels[static_cast<std::size_t>(mv - 1)][static_cast<std::size_t>(nc - 1)](
        qs, d, k_t + j0, k_stride, s + j0, s_stride);
  }
}

// P·V of `mv` vectors over the tile's first n positions, all d columns: whole Vec16 columns
// through the micro-kernel, the d % 16 tail per vector. p[v][j] at p[v * p_stride + j * p_step].
inline void block_pv(const float* p, int mv, int p_stride, const float* const* v_rows, int n,
                     const float* alpha, float* acc, int d, int p_step = 1) {
  const int d_vec = d / kLanes * kLanes;
  const int chunks = fitting_chunks(mv);
  for (int c0 = 0; c0 < d_vec; c0 += chunks * kLanes) {
    const int nc = std::min(chunks, (d_vec - c0) / kLanes);
    kPvKernels[static_cast<std::size_t>(mv - 1)][static_cast<std::size_t>(nc - 1)](
        p, p_stride, p_step, v_rows, n, c0, alpha, acc, d);
  }
  for (int v = 0; v < mv; ++v) {
    float* a = acc + static_cast<std::size_t>(v) * d;
    const float* w = p + static_cast<std::size_t>(v) * p_stride;
    for (int c = d_vec; c < d; ++c) {
      float sum = a[c] * alpha[v];
      for (int j = 0; j < n; ++j) sum += w[static_cast<std::size_t>(j) * p_step] * v_rows[j][c];
      a[c] = sum;
    }
  }
}

// The lane kernels: one token row's GQA group (up to kNativeLanes query vectors) against a tile,
// with K read as it is stored (no transposed copy). Decode's scores were a K transpose per tile
// and step (TinyLlama: 32 heads over 4 kv heads, so 8 vectors per item) that cost more than the
// scores themselves.
//   scores: st[j][v] = sum_c q_v[c] * k_rows[j][c]
//   softmax: per lane over the tile's positions, every vector seeing all of them (one row)
//   P·V: block_pv with p[v][j] = st[j][v] (p_stride 1, p_step lanes)
// A group smaller than the lanes spends them on channels: with L = lane_channels(group, d)
// (a power of two, group * L <= lanes), lane v * L + i of the queries' vector for channels
// [c, c + L) holds q_v[c + i] (lane_queries), a position's K is broadcast L channels at a time,
// and each position's L partial sums per vector are folded once at the end. SmolLM2's group of
// 3 then takes 32 FMAs a position where one vector a lane took 64 (L = 2 on AVX2), a group of one
// 8 (L = 8).
constexpr int kLanePositions = 8;  // positions per score step: 8 accumulators, one FMA chain each

// The channels a lane group holds for `group` vectors of head_dim d: the largest power of two L
// with group * L <= kNativeLanes that divides d (1 when group > kNativeLanes / 2).
constexpr int lane_channels(int group, int d) {
  int l = 1;
  while (2 * l * group <= kNativeLanes && d % (2 * l) == 0) l *= 2;
  return l;
}

// The most channels a lane group may hold for the lane kernels to be the faster decode path: each
// position's L partial sums per vector take log2(L) shuffles and adds and a gather, against d / L
// FMAs. With 16 lanes (AVX-512) groups of 1 and 2 (L = 16, 8) ran slower than the block path
// (Zen 4, one / two threads, head_dim 64, contexts 512 and 2048: group 1 1.42-2.16x, group 2
// 1.09-1.18x the block path's time; group 3 (L = 4) 0.78-1.01x, group 8 0.84-0.86x;
// 2026-12-07); with 8 lanes (AVX2, Zen 3) every group up to 8 lanes ran faster on them (group 1,
// L = 8: 0.69-0.72x; the flash README's table).
constexpr int kMaxLaneChannels = kNativeLanes == 16 ? 4 : kNativeLanes;

// qt [d / L, kNativeLanes]: qt[(c / L) * lanes + v * L + c % L] = qs[v * d + c] for v < group,
// 0 in the other lanes.
inline void lane_queries(const float* qs, int group, int d, int l, float* qt) {
  std::fill(qt, qt + static_cast<std::size_t>(d / l) * kNativeLanes, 0.0f);
  // No division by the runtime l per element: an idiv each had made this loop 1.5 µs an item.
  for (int v = 0; v < group; ++v) {
    const float* q = qs + static_cast<std::size_t>(v) * d;
    float* dst = qt + v * l;
    for (int c0 = 0; c0 < d; c0 += l, dst += kNativeLanes)
      for (int i = 0; i < l; ++i) dst[i] = q[c0 + i];
  }
}

// r = a with lane c taken from lane idx[c] (one-source shuffle; see shuffle2 for Clang).
inline void shuffle1(const VecN& a, const IntN& idx, VecN& r) {
#if defined(__clang__)
  for (int c = 0; c < kNativeLanes; ++c) r[c] = a[idx[c]];
#else
  r = __builtin_shuffle(a, idx);
#endif
}

// The L floats at p in every group of L lanes: [p0 .. pL-1, p0 .. pL-1, ...].
template <int L>
[[gnu::always_inline]] inline void broadcast_channels(const float* p, VecN& r) {
  if constexpr (L == 1) {
    r = VecN{} + *p;
  } else if constexpr (L == kNativeLanes) {
    std::memcpy(&r, p, sizeof r);
  } else if constexpr (L == 2) {  // one 8-byte broadcast (vbroadcastsd): the bits moved, no arithmetic
    double pair;
    std::memcpy(&pair, p, sizeof pair);
#if defined(__AVX512F__)
    const __m512d b = _mm512_set1_pd(pair);
#elif defined(__AVX__)
    const __m256d b = _mm256_set1_pd(pair);
#else
    using VecD = double __attribute__((vector_size(sizeof(VecN))));
    VecD b;
    for (int c = 0; c < kNativeLanes / 2; ++c) b[c] = pair;
#endif
    static_assert(sizeof b == sizeof r);
    std::memcpy(&r, &b, sizeof r);
#if defined(__AVX512F__)
  } else if constexpr (L == 4) {  // the all-lanes zero-mask forms: GCC 12's plain ones trip -Wmaybe-uninitialized
    const __m512 b = _mm512_maskz_broadcast_f32x4(__mmask16{0xFFFF}, _mm_loadu_ps(p));
    std::memcpy(&r, &b, sizeof r);
  } else if constexpr (L == 8) {
    const __m512d b = _mm512_maskz_broadcast_f64x4(__mmask8{0xFF}, _mm256_loadu_pd(reinterpret_cast<const double*>(p)));
    std::memcpy(&r, &b, sizeof r);
#elif defined(__AVX__)
  } else if constexpr (L == 4) {
    const __m256 b = _mm256_broadcast_ps(reinterpret_cast<const __m128*>(p));
    std::memcpy(&r, &b, sizeof r);
#endif
  } else {
    for (int c = 0; c < kNativeLanes; ++c) r[c] = p[c % L];
  }
}

// Lane v (v < kNativeLanes / L) = the sum of lanes v * L .. v * L + L - 1 of a: log2(L) rounds of
// a shuffle and an add, then one shuffle that gathers the groups' sums into the first lanes.
template <int L>
[[gnu::always_inline]] inline void fold_channels(VecN& a) {
  if constexpr (L > 1) {
#pragma GCC unroll 4
    for (int w = 1; w < L; w *= 2) {
      IntN swap;
      for (int c = 0; c < kNativeLanes; ++c) swap[c] = c ^ w;
      VecN b;
      shuffle1(a, swap, b);
      a += b;
    }
    IntN gather;
    for (int c = 0; c < kNativeLanes; ++c) gather[c] = (c % (kNativeLanes / L)) * L;
    VecN g;
    shuffle1(a, gather, g);
    a = g;
  }
}

// st[j][v] for j < n rounded up to kLanePositions (the rows past n repeat row n - 1: finite,
// unused), lanes v < kNativeLanes / L (the others finite, unused).
// qt: lane_queries' [d / L, kNativeLanes]; st: [n rounded up, kNativeLanes]
template <int L>
void lane_scores_l(const float* qt, int d, const float* const* k_rows, int n, float* st) {
  for (int j0 = 0; j0 < n; j0 += kLanePositions) {
    const float* rows[kLanePositions];
    for (int j = 0; j < kLanePositions; ++j) rows[j] = k_rows[j0 + std::min(j, n - j0 - 1)];
    VecN acc[kLanePositions];
    for (int j = 0; j < kLanePositions; ++j) acc[j] = VecN{};
    // The next 8 positions' K rows asked for now (the rows of a paged cache are scattered, so no
    // hardware prefetcher runs ahead of them): with the V rows' below, SmolLM2's decode attention
    // over 1500 positions, 4 sequences x 30 layers streamed from DRAM, 0.80-0.85x the time
    // (one thread, Zen 3, 2026-12-07; 16 or 32 positions ahead: 0.86-0.89x).
    for (int j = j0 + kLanePositions; j < std::min(n, j0 + 2 * kLanePositions); ++j)
      for (int c = 0; c < d; c += 16) __builtin_prefetch(k_rows[j] + c);
    for (int c = 0; c < d; c += L) {
      VecN q;
      std::memcpy(&q, qt + static_cast<std::size_t>(c / L) * kNativeLanes, sizeof q);
#pragma GCC unroll 8
      for (int j = 0; j < kLanePositions; ++j) {
        VecN k;
        broadcast_channels<L>(rows[j] + c, k);
        acc[j] += q * k;
      }
    }
#pragma GCC unroll 8
    for (int j = 0; j < kLanePositions; ++j) {
      fold_channels<L>(acc[j]);
      std::memcpy(st + static_cast<std::size_t>(j0 + j) * kNativeLanes, &acc[j], sizeof(VecN));
    }
  }
}

// lane_scores_l for l = lane_channels(...) (a power of two up to kNativeLanes).
inline void lane_scores(const float* qt, int d, const float* const* k_rows, int n, float* st, int l = 1) {
  switch (l) {
    case 1: lane_scores_l<1>(qt, d, k_rows, n, st); return;
    case 2: lane_scores_l<2>(qt, d, k_rows, n, st); return;
    case 4: lane_scores_l<4>(qt, d, k_rows, n, st); return;
    case 8: lane_scores_l<8>(qt, d, k_rows, n, st); return;
    default:
      if constexpr (kNativeLanes == 16) {
        lane_scores_l<kNativeLanes>(qt, d, k_rows, n, st);
        return;
      }
  }
}

// One online-softmax step of every lane over st[0, n) (as softmax_step, per lane): st becomes
// p = exp(st - max_new); max and denom [kNativeLanes] are updated and alpha [kNativeLanes] gets
// exp(max_old - max_new) (~0 on the first tile). n >= 1.
inline void lane_softmax_step(float* st, int n, float* max, float* denom, float* alpha) {
  VecN m, tile_max;
  std::memcpy(&m, max, sizeof m);
  std::memcpy(&tile_max, st, sizeof tile_max);
  for (int j = 1; j < n; ++j) {
    VecN x;
    std::memcpy(&x, st + static_cast<std::size_t>(j) * kNativeLanes, sizeof x);
    tile_max = x > tile_max ? x : tile_max;
  }
  const VecN new_max = tile_max > m ? tile_max : m;
  VecN a = m - new_max;  // -inf on the first tile: exp clamps it to ~0
  cpu::exp_lanes<VecN, IntN>(a);
  a = new_max > m ? a : VecN{} + 1.0f;
  VecN sum = {};
  for (int j = 0; j < n; ++j) {
    VecN x;
    std::memcpy(&x, st + static_cast<std::size_t>(j) * kNativeLanes, sizeof x);
    x -= new_max;
    cpu::exp_lanes<VecN, IntN>(x);
    sum += x;
    std::memcpy(st + static_cast<std::size_t>(j) * kNativeLanes, &x, sizeof x);
  }
  VecN dn;
  std::memcpy(&dn, denom, sizeof dn);
  dn = dn * a + sum;
  std::memcpy(denom, &dn, sizeof dn);
  std::memcpy(max, &new_max, sizeof new_max);
  std::memcpy(alpha, &a, sizeof a);
}

// One online-softmax step of one query vector over a tile (Milakov & Gimelshein): s[0, n_valid)
// holds its scores, which become p = exp(s - m_new); s[n_valid, n_pad) becomes 0 so a block's
// P·V may run over its widest vector's columns (n_pad: a multiple of 16; s[n_valid, n_pad) may
// hold anything). Updates the running max and denominator and returns alpha = exp(m_old - m_new),
// the factor for what was accumulated so far (0 on the first tile, 1 when the vector sees
// nothing of this tile).
inline float softmax_step(float* s, int n_valid, int n_pad, float& max, float& denom) {
  const Int16 lane = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
  const Vec16 zero = {};
  const Vec16 minus_inf = zero - INFINITY;
  Vec16 vmax = minus_inf;
  for (int j = 0; j < n_valid; j += kLanes) {
    Vec16 x;
    std::memcpy(&x, s + j, sizeof x);
    x = lane + j < n_valid ? x : minus_inf;
    vmax = x > vmax ? x : vmax;
  }
  float tile_max = -INFINITY;
  for (int i = 0; i < kLanes; ++i) tile_max = std::max(tile_max, vmax[i]);
  const float new_max = std::max(max, tile_max);
  const float alpha = new_max > max ? std::exp(max - new_max) : 1.0f;
  Vec16 sum = zero;
  for (int j = 0; j < n_pad; j += kLanes) {
    Vec16 x;
    std::memcpy(&x, s + j, sizeof x);
    Vec16 e = x - new_max;
    exp_nonpositive(e);
    x = lane + j < n_valid ? e : zero;
    sum += x;
    std::memcpy(s + j, &x, sizeof x);
  }
  if (n_valid <= 0) return 1.0f;
  float total = 0.0f;
  for (int i = 0; i < kLanes; ++i) total += sum[i];
  denom = denom * alpha + total;
  max = new_max;
  return alpha;
}

}  // namespace inferlab::plugins::flash
