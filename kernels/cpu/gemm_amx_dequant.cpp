// The AMX bf16 GEMM over dequantised weight rows: see gemm_amx_dequant.h.
//
// Tiles (all 16 rows x 64 bytes): C 0..3 (16 channels x 16 token rows of fp32 sums: channel tile
// r, token tile c at 2r + c), A 4..5 (16 channels x 32 inputs of one weight term, row-major as
// the rows are dequantised), B 6..7 (16 input pairs x 16 token rows x 2: one term of x). The
// weights being A keeps them in their rows' order (no transpose per weight); x is laid out as B
// once per call. C holds y transposed; it is written out once per channel block and token tile.
// With group scales the C tiles are zeroed per group and their sums, scaled per channel, added to
// fp32 accumulators in L1 (16 channels x 16 token rows per C tile, as C).
#include "kernels/cpu/gemm_amx_dequant.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "inferlab/error.h"
#include "kernels/cpu/amx.h"

#if INFERLAB_AMX_BF16
#include <immintrin.h>

#include "kernels/cpu/amx_bf16_split.h"
#endif

namespace inferlab::cpu {

#if INFERLAB_AMX_BF16
namespace {

constexpr int kTile = 16;                   // channels per A tile, token rows per B tile
constexpr int kChunk = 32;                  // inputs per A tile row
constexpr int kTileElems = kTile * kChunk;  // bf16 per tile

// What every thread of one call reads.
struct Job {
  const AmxDequantWeights* w;
  const std::uint16_t* xb;  // x as B tiles: [token tiles][k_chunks][hi, lo][kTileElems]
  int n, k_chunks, k_pad, token_tiles;
  int groups, group_chunks;  // scale groups and input chunks per group (1 group of all without group_scale)
  float* y;
};

// Offset of the B tile of token tile t, input chunk kc, term (0: hi, 1: lo).
std::size_t x_tile_at(const Job& j, int t, int kc, int term) {
  return ((static_cast<std::size_t>(t) * j.k_chunks + kc) * 2 + term) * kTileElems;
}

// Token rows [16 t0, 16 t1) of x as B tiles (the buffer zeroed: padding rows and inputs stay 0).
void lay_out_x(const float* x, int in, const Job& j, std::uint16_t* xb, int t0, int t1) {
  for (int r = t0 * kTile; r < std::min(j.n, t1 * kTile); ++r)
    for (int k0 = 0; k0 < in; k0 += 16) {
      const __mmask16 m = in - k0 >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << (in - k0)) - 1);
      __m256i terms[2];
      split_bf16(_mm512_maskz_loadu_ps(m, x + static_cast<std::size_t>(r) * in + k0), terms[0], terms[1]);
      // 8 input pairs of this row: u32 (pair p, token column r % 16) of its chunk's tiles
      const int kc = k0 / kChunk, p0 = (k0 % kChunk) / 2;
      for (int t = 0; t < 2; ++t) {
        alignas(32) std::uint32_t pairs[8];
        _mm256_store_si256(reinterpret_cast<__m256i*>(pairs), terms[t]);
        auto* tile = reinterpret_cast<std::uint32_t*>(xb + x_tile_at(j, r / kTile, kc, t));
        for (int i = 0; i < 8; ++i) tile[(p0 + i) * kTile + r % kTile] = pairs[i];
      }
    }
}

// Rows [o0, o0 + 16 R) of W as A-tile rows: a [R][weight_terms][16][k_pad] bf16; rows past `out`
// and inputs past `in` zero. With group scales also sc [R][groups][16] (the broadcast reads of
// the sums' rows; 0 past `out`). f: an fp32 row buffer of k_pad values.
void dequantize_block(const Job& j, int o0, int R, std::uint16_t* a, float* sc, float* f) {
  const AmxDequantWeights& w = *j.w;
  const std::size_t plane = static_cast<std::size_t>(kTile) * j.k_pad;  // one term of one channel tile
  std::fill(f + w.in, f + j.k_pad, 0.0f);
  for (int i = 0; i < R * kTile; ++i) {
    const int o = o0 + i, ct = i / kTile;
    std::uint16_t* hi = a + static_cast<std::size_t>(ct) * w.weight_terms * plane + static_cast<std::size_t>(i % kTile) * j.k_pad;
    if (w.group_scale)
      for (int g = 0; g < j.groups; ++g)
        sc[(ct * j.groups + g) * kTile + i % kTile] =
            o < w.out ? w.group_scale[static_cast<std::size_t>(o) * j.groups + g] : 0.0f;
    if (o >= w.out) {
      for (int t = 0; t < w.weight_terms; ++t) std::fill(hi + t * plane, hi + t * plane + j.k_pad, std::uint16_t{0});
      continue;
    }
    w.row(w.ctx, o, f);
    for (int k = 0; k < j.k_pad; k += kChunk) {
      if (w.weight_terms == 1) {
        _mm512_storeu_si512(hi + k, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(_mm512_loadu_ps(f + k + 16),
                                                                                   _mm512_loadu_ps(f + k))));
        continue;
      }
      if (w.weight_terms == 3) {
        __m256i h[2];
        __m512i mid, lo;
        split_bf16_3x32(_mm512_loadu_ps(f + k), _mm512_loadu_ps(f + k + 16), h, mid, lo);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(hi + k), h[0]);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(hi + k + 16), h[1]);
        _mm512_storeu_si512(hi + plane + k, mid);
        _mm512_storeu_si512(hi + 2 * plane + k, lo);
        continue;
      }
      for (int h = 0; h < kChunk; h += 16) {
        __m256i t[2];
        split_bf16(_mm512_loadu_ps(f + k + h), t[0], t[1]);
        for (int i = 0; i < 2; ++i) _mm256_storeu_si256(reinterpret_cast<__m256i*>(hi + i * plane + k + h), t[i]);
      }
    }
  }
}

// acc[2r + c] (+)= sc's scale of each channel row (group g) times sums[2r + c]: one group's
// sums added to the accumulators (set by the first group).
template <int R, int C>
void add_scaled_group(const Job& j, const float* sc, int g, const float (*sums)[kTile][kTile], float (*acc)[kTile][kTile]) {
  for (int r = 0; r < R; ++r) {
    const float* s = sc + (static_cast<std::size_t>(r) * j.groups + g) * kTile;
    for (int i = 0; i < kTile; ++i) {
      const __m512 scale = _mm512_set1_ps(s[i]);  // one broadcast for the C token tiles
      for (int c = 0; c < C; ++c) {
        const __m512 sum = _mm512_load_ps(sums[2 * r + c][i]);
        _mm512_store_ps(acc[2 * r + c][i], g == 0 ? _mm512_mul_ps(scale, sum)
                                                  : _mm512_fmadd_ps(scale, sum, _mm512_load_ps(acc[2 * r + c][i])));
      }
    }
  }
}

// y for channel tiles [o0 / 16, + R) x token tiles [t0, t0 + C): C tiles 2r + c, per scale group
// (all inputs without group scales).
template <int R, int C>
void block(const Job& j, const std::uint16_t* a, const float* sc, int o0, int t0) {
  const int terms = j.w->weight_terms;
  const std::size_t plane = static_cast<std::size_t>(kTile) * j.k_pad, lda = static_cast<std::size_t>(j.k_pad) * 2;
  const auto a_at = [&](int ct, int term, int kc) {
    return a + (static_cast<std::size_t>(ct) * terms + term) * plane + static_cast<std::size_t>(kc) * kChunk;
  };
  const auto products = [] {
    _tile_dpbf16ps(0, 4, 6);
    if constexpr (C > 1) _tile_dpbf16ps(1, 4, 7);
    if constexpr (R > 1) _tile_dpbf16ps(2, 5, 6);
    if constexpr (R > 1 && C > 1) _tile_dpbf16ps(3, 5, 7);
  };
  const auto load_a = [&](int term, int kc) {
    _tile_loadd(4, a_at(0, term, kc), lda);
    if constexpr (R > 1) _tile_loadd(5, a_at(1, term, kc), lda);
  };
  const auto load_b = [&](int term, int kc) {
    _tile_loadd(6, j.xb + x_tile_at(j, t0, kc, term), 64);
    if constexpr (C > 1) _tile_loadd(7, j.xb + x_tile_at(j, t0 + 1, kc, term), 64);
  };
  alignas(64) float sums[4][kTile][kTile];
  alignas(64) float acc[4][kTile][kTile];
  for (int g = 0; g < j.groups; ++g) {
    // The tile ops are asm naming no memory operand: the plain stores of a and xb and the reads
    // of the previous group's sums come first.
    asm volatile("" ::: "memory");
    _tile_zero(0);
    if constexpr (C > 1) _tile_zero(1);
    if constexpr (R > 1) _tile_zero(2);
    if constexpr (R > 1 && C > 1) _tile_zero(3);
    const int kc1 = std::min(j.k_chunks, (g + 1) * j.group_chunks);
    for (int kc = g * j.group_chunks; kc < kc1; ++kc) {  // x_lo w_hi, x_hi w_hi, then x_hi times the smaller terms
      load_a(0, kc);
      load_b(1, kc);
      products();
      load_b(0, kc);
      products();
      for (int t = 1; t < terms; ++t) {
        load_a(t, kc);
        products();
      }
    }
    _tile_stored(0, sums[0], 64);
    if constexpr (C > 1) _tile_stored(1, sums[1], 64);
    if constexpr (R > 1) _tile_stored(2, sums[2], 64);
    if constexpr (R > 1 && C > 1) _tile_stored(3, sums[3], 64);
    asm volatile("" ::: "memory");  // keep the reads below after the tile stores
    if (j.w->group_scale) add_scaled_group<R, C>(j, sc, g, sums, acc);
  }
  const float(*result)[kTile][kTile] = j.w->group_scale ? acc : sums;
  const AmxDequantWeights& w = *j.w;
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) {
      const int ch0 = o0 + r * kTile, row0 = (t0 + c) * kTile;
      const int chans = std::min(kTile, w.out - ch0), rows = std::min(kTile, j.n - row0);
      for (int t = 0; t < rows; ++t) {
        float* yr = j.y + static_cast<std::size_t>(row0 + t) * w.out + ch0;
        for (int i = 0; i < chans; ++i)
          yr[i] = w.channel_scale ? w.channel_scale[ch0 + i] * result[2 * r + c][i][t] : result[2 * r + c][i][t];
      }
    }
}

// Channel blocks [b0, b1) of 32 channels: each dequantised once, then multiplied with every token tile.
void run_channels(const Job& j, int b0, int b1) {
  amx_full_tiles().load();
  const AmxDequantWeights& w = *j.w;
  thread_local std::vector<std::uint16_t> a;
  thread_local std::vector<float> f, sc;
  a.resize(std::max(a.size(), static_cast<std::size_t>(2) * w.weight_terms * kTile * j.k_pad));
  f.resize(std::max(f.size(), static_cast<std::size_t>(j.k_pad)));
  sc.resize(std::max(sc.size(), static_cast<std::size_t>(2) * j.groups * kTile));
  for (int b = b0; b < b1; ++b) {
    const int o0 = b * 2 * kTile;
    const int R = w.out - o0 > kTile ? 2 : 1;
    dequantize_block(j, o0, R, a.data(), sc.data(), f.data());
    for (int t = 0; t < j.token_tiles; t += 2) {
      const bool two = t + 1 < j.token_tiles;
      if (R == 2 && two) block<2, 2>(j, a.data(), sc.data(), o0, t);
      else if (R == 2) block<2, 1>(j, a.data(), sc.data(), o0, t);
      else if (two) block<1, 2>(j, a.data(), sc.data(), o0, t);
      else block<1, 1>(j, a.data(), sc.data(), o0, t);
    }
  }
}

}  // namespace
#endif

void gemm_amx_dequant(const float* x, int n, const AmxDequantWeights& w, float* y, ThreadPool& pool) {
  check(w.row != nullptr && w.out >= 1 && w.in >= 1 && w.weight_terms >= 1 && w.weight_terms <= 3, [&] {
    return "gemm_amx_dequant: needs a row dequantiser, out, in >= 1 and weight_terms 1, 2 or 3, got out=" +
           std::to_string(w.out) + " in=" + std::to_string(w.in) + " weight_terms=" + std::to_string(w.weight_terms);
  });
  check(amx_bf16_enabled(),
        "gemm_amx_dequant: the AMX bf16 tiles are not available (not built, refused by the kernel, or INFERLAB_AMX=0)");
  check(!w.group_scale || (w.weight_terms == 1 && w.group_size > 0 && w.group_size % 32 == 0), [&] {
    return "gemm_amx_dequant: group scales need weight_terms 1 and a group_size that is a positive multiple of 32, "
           "got weight_terms=" + std::to_string(w.weight_terms) + " group_size=" + std::to_string(w.group_size);
  });
  if (n <= 0) return;
#if INFERLAB_AMX_BF16
  Job j{};
  j.w = &w;
  j.n = n;
  j.k_chunks = (w.in + kChunk - 1) / kChunk;
  j.k_pad = j.k_chunks * kChunk;
  j.token_tiles = (n + kTile - 1) / kTile;
  j.group_chunks = w.group_scale ? w.group_size / kChunk : j.k_chunks;
  j.groups = (j.k_chunks + j.group_chunks - 1) / j.group_chunks;
  j.y = y;
  thread_local std::vector<std::uint16_t> xb;  // reused across calls: no page faults per call
  const std::size_t tiles = static_cast<std::size_t>(j.token_tiles) * j.k_chunks * 2;
  xb.resize(std::max(xb.size(), tiles * kTileElems));
  std::fill(xb.begin(), xb.begin() + static_cast<std::ptrdiff_t>(tiles * kTileElems), std::uint16_t{0});
  std::uint16_t* tiles_of_x = xb.data();  // this thread's buffer (a worker naming xb gets its own)
  j.xb = tiles_of_x;
  pool.parallel_for(static_cast<std::size_t>(j.token_tiles), [&](std::size_t t0, std::size_t t1) {
    lay_out_x(x, w.in, j, tiles_of_x, static_cast<int>(t0), static_cast<int>(t1));
  });
  const std::size_t blocks = static_cast<std::size_t>((w.out + 2 * kTile - 1) / (2 * kTile));
  pool.parallel_for(blocks, [&](std::size_t b0, std::size_t b1) {
    run_channels(j, static_cast<int>(b0), static_cast<int>(b1));
  });
#else
  (void)x;
  (void)y;
  (void)pool;
#endif
}

}  // namespace inferlab::cpu
