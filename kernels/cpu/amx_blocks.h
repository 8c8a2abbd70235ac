// AMX int8 prefill over scale blocks of 32 inputs (kernels/cpu/amx.h), shared by the two
// block-scaled int8 GEMMs: cpu::gemm_gguf (GGUF Q8_0 / Q4_0 / Q4_1 / Q4_K / Q5_K, a weight scale
// per row and block) and cpu::gemm_panels_int8 (the int8 strategy's W8A8: one weight scale per
// channel). Internal to kernels/cpu.
//
// A panel of 32 weight rows whose block b holds signed codes as [8 steps][32 rows][4 bytes]
// (two 64-byte lines per step: rows 0-15, 16-31) is `tdpbssd`'s K x 16 operand as it is for 16
// weight rows (8 lines of a half, 128 bytes apart); the activations, copied once per call into
// runs of 16 token rows x 32 inputs (Tokens), are its 16 x K one. One tile product per 16 tokens
// x 16 weight rows x block gives exactly the int32 sums the VNNI micro-tiles reach (their codes'
// offsets included), and the fold into fp32 repeats their operations in their order, so both
// paths give the same bits:
//  - block scales (gemm_gguf): acc += float(sum) * (d_w * x_s), plus d_min-style mins
//    acc += m_w * (x_s Σx) where the format has them; y = acc;
//  - a channel scale (gemm_panels_int8): acc += float(sum) * x_s per block, y = acc ⊙ scale.
// The fold is the cost: per block 16 zmm of sums converted, scaled and added, about as long as
// the product itself (which takes as long at depth 32 as at 64), and the two do not overlap well;
// two C tiles alternate and each pair of blocks is folded one pair later, after its tile stores
// have left.
#pragma once
#include "kernels/cpu/amx.h"

#if INFERLAB_AMX_INT8
#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "inferlab/thread_pool.h"
#include "kernels/cpu/act_tiles.h"
#include "kernels/cpu/decode_prefetch.h"

namespace inferlab::cpu::amx_blocks {

constexpr int kRows = 16;   // tokens per tile (C rows), and weight rows per C column set
constexpr int kBlock = 32;  // inputs per scale block and tile product

// The activations' side, made once per call: per tile t of 16 token rows and block b, the rows'
// codes as one 512-byte run ([16 rows][32], what a tile load reads: 8 whole lines, where rows
// `in` apart were 16 lines from as many pages), their scales and scale x sum (the mins' term);
// zero rows past n.
struct Tokens {
  int n = 0, tiles = 0, blocks = 0;
  std::vector<std::int8_t> x;   // [tiles][blocks][16][32]
  std::vector<float> xs, xsum;  // [tiles][blocks][16]
};

// Fills k from xq [n, in] (in a multiple of 32) and its activation tiles a (pack_act_tiles with
// block 32: their scales and scale x sums), the rows split across the pool.
void make_tokens(const ActTiles& a, const std::int8_t* xq, int n, int in, Tokens& k, ThreadPool& pool);

// What the tiles read, as plain pointers copied onto the calling thread's stack: the Tokens and
// the unpacked panels callers keep are thread_local, and code that reaches a thread_local of a
// shared library through its address calls __tls_get_addr, a call that clobbers every zmm (GCC
// propagated that address into panel() and called it inside the unit loop, so the 16 fp32 sums
// lived in memory).
struct View {
  int n, tiles, blocks;
  const std::int8_t* x;
  const float *xs, *xsum;
  const std::uint8_t* codes;  // block 0's signed codes, [8 steps][32 rows][4]
  std::size_t codes_stride;   // bytes from block b's codes to block b + 1's
  // Block scales: lines of 16 floats [blocks][2 (scale, min)][2 halves] (kChannel: unused).
  const float* scale;
  // kChannel: the panel's 32 channel scales (block scales: unused).
  const float* channel;
  std::size_t at(int t, int b) const { return (static_cast<std::size_t>(t) * blocks + b) * kRows; }
  const std::int8_t* rows(int t, int b) const { return x + at(t, b) * kBlock; }
  const std::uint8_t* block_codes(int b) const { return codes + static_cast<std::size_t>(b) * codes_stride; }
  const float* scale_line(int b, int k, int h) const { return scale + static_cast<std::size_t>(4 * b + 2 * k + h) * 16; }
};
inline View view(const Tokens& k, const std::uint8_t* codes, std::size_t codes_stride, const float* scale,
                 const float* channel) {
  return {k.n, k.tiles, k.blocks, k.x.data(), k.xs.data(), k.xsum.data(), codes, codes_stride, scale, channel};
}

// The configuration panel() runs under (AmxConfig::load it on the thread first): C tiles 0, 1
// (16 x 16 int32); A (tokens) 2, 4: 16 rows x 32 inputs; B (weights) 3, 5: a row per 4 inputs.
const AmxConfig& config();

// The fp32 sums of a 16 x 16 output tile, one zmm per token row, as two arrays of 8: GCC kept
// an array of 16 zmm (1 KiB) in memory.
struct Acc {
  __m512 lo[kRows / 2], hi[kRows / 2];
  __m512& row(int r) { return r < kRows / 2 ? lo[r] : hi[r - kRows / 2]; }
};

inline __m512 to_float(__m512i v) { return _mm512_maskz_cvtepi32_ps(0xFFFF, v); }  // GCC 12: see gemm_gguf.cpp

// Block b of token tile t and weight rows 16h .. 16h + 15: its int32 sums (16 token rows of 16)
// folded into acc as the VNNI micro-tiles fold theirs.
template <bool kMins, bool kChannel>
[[gnu::always_inline]] inline void fold(Acc& acc, const std::int32_t (*sums)[16], const View& k, int t, int h, int b) {
  static_assert(!(kMins && kChannel), "a channel-scaled panel has no mins");
  const std::size_t at = k.at(t, b);
  if constexpr (kChannel) {
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r)
      acc.row(r) = _mm512_fmadd_ps(to_float(_mm512_load_si512(sums[r])), _mm512_set1_ps(k.xs[at + r]), acc.row(r));
    return;
  } else {
    const __m512 sv = _mm512_load_ps(k.scale_line(b, 0, h));
#pragma GCC unroll 16
    for (int r = 0; r < kRows; ++r) {
      const __m512i ci = _mm512_load_si512(sums[r]);
      acc.row(r) = _mm512_fmadd_ps(to_float(ci), _mm512_mul_ps(sv, _mm512_set1_ps(k.xs[at + r])), acc.row(r));
    }
    if constexpr (kMins) {
      const __m512 mv = _mm512_load_ps(k.scale_line(b, 1, h));
#pragma GCC unroll 16
      for (int r = 0; r < kRows; ++r) acc.row(r) = _mm512_fmadd_ps(mv, _mm512_set1_ps(k.xsum[at + r]), acc.row(r));
    }
  }
}

// y[r, j] (r < the tokens, j < width) for one panel against every token tile. Blocks run in
// pairs, into C tiles 0 and 1 stored into one of two buffers, and a pair is folded one pair
// later, in block order: a load that meets a tile store still in flight waits for it. `next`
// (the caller's next panel, say) is pulled into L2 a few lines per pair.
template <bool kMins, bool kChannel>
void panel(const View k, float* y, std::size_t ldc, int width, SpreadPrefetch next = {}) {
  constexpr long lda = kBlock;  // Tokens' rows
  alignas(64) std::int32_t c[2][2][kRows][16];  // [pair parity][C tile]
  const int pairs = k.blocks / 2;
  for (int t = 0; t < k.tiles; ++t) {
    const int rows = std::min(kRows, k.n - t * kRows);
    for (int h = 0; h < 2 && 16 * h < width; ++h) {
      auto b_of = [&](int b) { return k.block_codes(b) + 64 * h; };  // steps 128 bytes apart
      Acc acc;
      for (int r = 0; r < kRows; ++r) acc.row(r) = _mm512_setzero_ps();
      for (int p = 0; p < pairs; ++p) {
        const int q = p & 1, b = 2 * p;
        _tile_zero(0);
        _tile_loadd(2, k.rows(t, b), lda);
        _tile_loadd(3, b_of(b), 128);
        _tile_dpbssd(0, 2, 3);
        _tile_zero(1);
        _tile_loadd(4, k.rows(t, b + 1), lda);
        _tile_loadd(5, b_of(b + 1), 128);
        _tile_dpbssd(1, 4, 5);
        _tile_stored(0, c[q][0], 64);
        _tile_stored(1, c[q][1], 64);
        next.step();
        if (p > 0) {
          fold<kMins, kChannel>(acc, c[1 - q][0], k, t, h, b - 2);
          fold<kMins, kChannel>(acc, c[1 - q][1], k, t, h, b - 1);
        }
      }
      if (pairs > 0) {
        const int q = (pairs - 1) & 1;
        fold<kMins, kChannel>(acc, c[q][0], k, t, h, 2 * pairs - 2);
        fold<kMins, kChannel>(acc, c[q][1], k, t, h, 2 * pairs - 1);
      }
      if (k.blocks % 2 == 1) {
        _tile_zero(0);
        _tile_loadd(2, k.rows(t, k.blocks - 1), lda);
        _tile_loadd(3, b_of(k.blocks - 1), 128);
        _tile_dpbssd(0, 2, 3);
        _tile_stored(0, c[0][0], 64);
        fold<kMins, kChannel>(acc, c[0][0], k, t, h, k.blocks - 1);
      }
      const auto mask = static_cast<__mmask16>((1u << std::min(width - 16 * h, 16)) - 1);
      float* yt = y + static_cast<std::size_t>(t) * kRows * ldc + 16 * h;
      if constexpr (kChannel) {  // acc ⊙ scale, as the VNNI micro-tile's store rounds it
        const __m512 sw = _mm512_maskz_loadu_ps(mask, k.channel + 16 * h);
#pragma GCC unroll 16
        for (int r = 0; r < kRows; ++r) acc.row(r) = _mm512_mul_ps(acc.row(r), sw);
      }
#pragma GCC unroll 16
      for (int r = 0; r < kRows; ++r)  // constant indices: acc stays in registers
        if (r < rows) _mm512_mask_storeu_ps(yt + r * ldc, mask, acc.row(r));
    }
  }
  next.rest();
}
// Steps of panel()'s loop over a View: what a SpreadPrefetch over it is spread across.
inline int panel_steps(const View& k) { return k.tiles * 2 * std::max(1, k.blocks / 2); }

}  // namespace inferlab::cpu::amx_blocks
#endif
