// Int8 activation tiles for the VNNI GEMMs: see act_tiles.h.
#include "kernels/cpu/act_tiles.h"

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "inferlab/error.h"
#include "inferlab/huge_pages.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
#include <immintrin.h>
#define INFERLAB_ACT_TILES_VNNI 1
#endif

namespace inferlab::cpu {
namespace {

// Σ p[0, len): 64 bytes at a time (the tail masked) through vpdpbusd against ones.
int code_sum(const std::int8_t* p, int len) {
  int k = 0, sum = 0;
#if INFERLAB_ACT_TILES_VNNI
  if (len >= 16) {
    const __m512i ones = _mm512_set1_epi8(1);
    __m512i acc = _mm512_setzero_si512();
    for (; k < len; k += 64) {
      const int left = std::min(64, len - k);
      const __mmask64 m = left == 64 ? ~__mmask64{0} : (__mmask64{1} << left) - 1;
      acc = _mm512_dpbusd_epi32(acc, ones, _mm512_maskz_loadu_epi8(m, p + k));
    }
    // The lanes' sum (not _mm512_reduce_add_epi32: GCC 12's trips -Werror=maybe-uninitialized).
    const __m256i h = _mm256_add_epi32(_mm512_maskz_extracti64x4_epi64(0xFF, acc, 0), _mm512_maskz_extracti64x4_epi64(0xFF, acc, 1));
    __m128i q = _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    q = _mm_add_epi32(q, _mm_shuffle_epi32(q, 0x4E));
    q = _mm_add_epi32(q, _mm_shuffle_epi32(q, 0xB1));
    return _mm_cvtsi128_si32(q);
  }
#endif
  for (; k < len; ++k) sum += p[k];
  return sum;
}

#if INFERLAB_ACT_TILES_VNNI
// The sums of p's 32-byte blocks, 8 blocks (256 bytes) at a time: sad against zero of the
// codes + 128 gives the sums of 8 bytes (+ 1024) in 8 u64 lanes per 64 bytes; two rounds of
// pairwise adds across registers (permutes of even / odd lanes) give the 16-byte sums (the
// half blocks) and then the blocks' sums in order. Writes block b's sum to sum[b * kTileRows]
// and, when half is not null, its halves to half[b * 2 kTileRows + h * kTileRows] (the tiles'
// layout for one row); returns how many blocks it wrote (whole groups of 8 within in).
int sums_of_32s(const std::int8_t* p, int in, int* sum, int* half) {
  const __m512i flip = _mm512_set1_epi8(static_cast<char>(0x80)), zero = _mm512_setzero_si512();
  const __m512i even = _mm512_set_epi64(14, 12, 10, 8, 6, 4, 2, 0), odd = _mm512_set_epi64(15, 13, 11, 9, 7, 5, 3, 1);
  const auto pairs = [&](__m512i a, __m512i b) {  // lanes 2i + 2i+1 of a, then of b
    return _mm512_add_epi64(_mm512_permutex2var_epi64(a, even, b), _mm512_permutex2var_epi64(a, odd, b));
  };
  int b = 0;
  for (; 32 * (b + 8) <= in; b += 8) {
    __m512i s[4];
    for (int i = 0; i < 4; ++i)
      s[i] = _mm512_sad_epu8(_mm512_xor_si512(_mm512_loadu_si512(p + 32 * b + 64 * i), flip), zero);
    const __m512i h01 = pairs(s[0], s[1]), h23 = pairs(s[2], s[3]);  // 16-byte sums + 2048: blocks b..b+3, b+4..b+7
    const __m512i blk = _mm512_sub_epi64(pairs(h01, h23), _mm512_set1_epi64(32 * 128));
    alignas(64) std::int64_t out[8];
    _mm512_store_si512(out, blk);
    for (int i = 0; i < 8; ++i) sum[(b + i) * kTileRows] = static_cast<int>(out[i]);
    if (half) {
      alignas(64) std::int64_t hs[16];
      _mm512_store_si512(hs, _mm512_sub_epi64(h01, _mm512_set1_epi64(16 * 128)));
      _mm512_store_si512(hs + 8, _mm512_sub_epi64(h23, _mm512_set1_epi64(16 * 128)));
      for (int i = 0; i < 16; ++i) half[(b + i / 2) * 2 * kTileRows + (i % 2) * kTileRows] = static_cast<int>(hs[i]);
    }
  }
  return b;
}
#endif

// Tile rows (row[r] null: a padding row, zeros) interleaved into dst [steps][kTileRows][4]: with
// AVX-512 16 steps at a time, the rows' 64 bytes transposed in dwords by masked permutes
// (output zmm k, lane j is dword i = 16 k + j: step i / kTileRows of row i % kTileRows); the
// steps past the last full 16 (and the bytes past in) one by one.
void interleave_tile(const std::int8_t* const* row, int in, int steps, std::int8_t* dst) {
  int s = 0;
#if INFERLAB_ACT_TILES_VNNI
  struct Perm {
    __m512i idx[kTileRows];
    __mmask16 mask[kTileRows][kTileRows];  // [output zmm k][row r]
  };
  static const Perm perm = [] {
    Perm p{};
    for (int k = 0; k < kTileRows; ++k) {
      alignas(64) std::int32_t idx[16];
      for (int j = 0; j < 16; ++j) {
        const int i = 16 * k + j;
        idx[j] = i / kTileRows;
        p.mask[k][i % kTileRows] = static_cast<__mmask16>(p.mask[k][i % kTileRows] | (1u << j));
      }
      p.idx[k] = _mm512_load_si512(idx);
    }
    return p;
  }();
  for (; 4 * (s + 16) <= in; s += 16) {
    __m512i src[kTileRows];
    for (int r = 0; r < kTileRows; ++r) src[r] = row[r] ? _mm512_loadu_si512(row[r] + 4 * s) : _mm512_setzero_si512();
    for (int k = 0; k < kTileRows; ++k) {
      __m512i o = _mm512_setzero_si512();
      for (int r = 0; r < kTileRows; ++r) o = _mm512_mask_permutexvar_epi32(o, perm.mask[k][r], perm.idx[k], src[r]);
      _mm512_storeu_si512(dst + static_cast<std::size_t>(s) * kTileRows * 4 + 64 * k, o);
    }
  }
#endif
  for (; s < steps; ++s)
    for (int r = 0; r < kTileRows; ++r) {
      std::int8_t four[4] = {0, 0, 0, 0};
      if (row[r])
        for (int t = 0; t < 4 && 4 * s + t < in; ++t) four[t] = row[r][4 * s + t];
      std::memcpy(dst + (static_cast<std::size_t>(s) * kTileRows + r) * 4, four, 4);
    }
}

}  // namespace

ActTiles pack_act_tiles(const std::int8_t* xq, const float* xs, int n, int in, int block, bool half_sums,
                        ThreadPool& pool) {
  check(block > 0 && block % 4 == 0 && (!half_sums || block % 8 == 0),
        [&] { return "pack_act_tiles: block must be a positive multiple of 4 (of 8 with half sums), got " + std::to_string(block); });
  const int steps = (in + 3) / 4, blocks = (in + block - 1) / block, tiles = n > 0 ? (n + kTileRows - 1) / kTileRows : 0;
  thread_local HugeVector<std::int8_t> xt;  // [tiles][steps][kTileRows][4]
  thread_local std::vector<float> xst;      // [tiles][blocks][kTileRows]
  thread_local std::vector<int> sums;       // [tiles][blocks][kTileRows]
  thread_local std::vector<float> xsums;    // [tiles][blocks][kTileRows]
  thread_local std::vector<int> halves;     // [tiles][blocks][2][kTileRows]
  const bool single = n == 1;  // one row: not interleaved
  const int step_bytes = single ? kRowStepBytes : kTileStepBytes;
  const std::size_t tile_bytes = static_cast<std::size_t>(steps) * step_bytes;
  const std::size_t slots = static_cast<std::size_t>(tiles) * blocks * kTileRows;
  const bool copy = !single || in % 4 != 0;  // else x is xq itself
  if (copy && xt.size() < tiles * tile_bytes) xt.assign(tiles * tile_bytes, 0);  // every byte is written below
  if (xst.size() < slots) xst.resize(slots);
  if (sums.size() < slots) sums.resize(slots);
  if (xsums.size() < slots) xsums.resize(slots);
  if (half_sums && halves.size() < 2 * slots) halves.resize(2 * slots);
  std::int8_t* xt_p = copy ? xt.data() : nullptr;
  float* xs_p = xst.data();
  int* sum_p = sums.data();
  float* xsum_p = xsums.data();
  int* half_p = half_sums ? halves.data() : nullptr;
  const auto pack = [&](std::size_t t0, std::size_t t1) {
    for (auto t = static_cast<int>(t0); t < static_cast<int>(t1); ++t) {
      const std::int8_t* rows[kTileRows];
      for (int r = 0; r < kTileRows; ++r) {
        const int row = t * kTileRows + r;
        rows[r] = row < n ? xq + static_cast<std::size_t>(row) * in : nullptr;
        if (single && r > 0) continue;  // a single row's micro-tiles read row 0 only
        int done = 0;  // blocks whose sums are written
#if INFERLAB_ACT_TILES_VNNI
        if (rows[r] && block == 32) {
          const std::size_t first = static_cast<std::size_t>(t) * blocks * kTileRows + r;  // block 0's slot
          done = sums_of_32s(rows[r], in, sum_p + first, half_p ? half_p + 2 * first - r : nullptr);
        }
#endif
        for (int b = 0; b < blocks; ++b) {
          const std::size_t at = (static_cast<std::size_t>(t) * blocks + b) * kTileRows + r;
          if (!rows[r]) {
            xs_p[at] = 0.0f;
            sum_p[at] = 0;
            if (half_p) half_p[2 * at - r] = half_p[2 * at - r + kTileRows] = 0;
            continue;
          }
          const std::int8_t* xb = rows[r] + static_cast<std::size_t>(b) * block;
          const int len = std::min(block, in - b * block);
          xs_p[at] = xs[static_cast<std::size_t>(row) * blocks + b];
          if (b < done) continue;
          if (half_p) {  // [t][b][half][r] = 2 at - r (+ kTileRows for the second half)
            const int h0 = code_sum(xb, std::min(len, block / 2)), h1 = code_sum(xb + block / 2, std::max(0, len - block / 2));
            half_p[2 * at - r] = h0;
            half_p[2 * at - r + kTileRows] = h1;
            sum_p[at] = h0 + h1;
          } else {
            sum_p[at] = code_sum(xb, len);
          }
        }
        for (int b = 0; b < blocks; ++b) {
          const std::size_t at = (static_cast<std::size_t>(t) * blocks + b) * kTileRows + r;
          xsum_p[at] = xs_p[at] * static_cast<float>(sum_p[at]);
        }
      }
      if (single) {
        if (copy) {
          std::memcpy(xt_p, xq, static_cast<std::size_t>(in));
          std::memset(xt_p + in, 0, tile_bytes - static_cast<std::size_t>(in));
        }
      } else {
        interleave_tile(rows, in, steps, xt_p + static_cast<std::size_t>(t) * tile_bytes);
      }
    }
  };
  // A chunk of at least 32 KiB of codes is worth a thread; less runs here, without a dispatch.
  const std::size_t grain = std::max<std::size_t>(1, (std::size_t{32} << 10) / std::max<std::size_t>(1, tile_bytes));
  if (static_cast<std::size_t>(tiles) <= grain) pack(0, static_cast<std::size_t>(tiles));
  else pool.parallel_for(static_cast<std::size_t>(tiles), pack, grain);
  return ActTiles{copy ? xt_p : xq, xs_p, sum_p, xsum_p, half_p, steps, blocks, block / 4, step_bytes};
}

}  // namespace inferlab::cpu
