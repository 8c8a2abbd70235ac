// The AMX few-row path of matmul_int8 (matmul_int8_amx.h).
//
// Tiles (all 16 rows x 64 bytes): C 0 and 5 (16 output channels x 16 columns of fp32 sums: column
// set 0 and 1), A 1..2 (16 channels x 32 inputs, bf16), B 3..4 (set 0) and 6..7 (set 1) (16 input
// pairs x 16 columns x 2, bf16). Token row r takes `parts` columns parts * r .. parts * r + parts
// - 1 (column c in set c / 16): bf16(x_r) and what is left of x_r after it, again as bf16 — three
// parts (x = hi + mid + lo exactly, up to 5 rows) or two (hi + lo, ~16 bits, 6 to 16 rows);
// columns past parts * n are zero, so y[r, o] = scale[o] · Σ_p C[o][parts r + p] once every step
// of the row is summed. The second set's tile products run only where a row uses it. The inputs
// past `in` are zero on both sides (masked weight loads, zero-padded activations).
#include "kernels/cpu/matmul_int8_amx.h"

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "inferlab/error.h"
#include "kernels/cpu/amx.h"
#include "kernels/cpu/decode_prefetch.h"

#if INFERLAB_AMX_BF16
#include <immintrin.h>

#include "kernels/cpu/amx_bf16_split.h"
#endif

namespace inferlab::cpu {

#if INFERLAB_AMX_BF16
namespace {

constexpr int kTile = 16;
constexpr int kChunk = 32;            // inputs per A tile row
constexpr int kStep = 2 * kChunk;     // inputs per 64-byte weight load
constexpr int kTileElems = kTile * kChunk;

// x [n, in] as B tiles: [sets][chunks][16 pairs][16 columns][2] bf16 (thread-local buffer of the
// caller), `parts` columns per token row: part p is bf16 of what parts 0 .. p - 1 left of x (±inf:
// 0 after the first part, not inf - inf).
const std::uint16_t* prepare(const float* x, int n, int in, int chunks, int parts, int sets) {
  thread_local std::vector<std::uint16_t> b;
  const std::size_t set_elems = static_cast<std::size_t>(chunks) * kTileElems;
  b.assign(static_cast<std::size_t>(sets) * set_elems, 0);
  for (int r = 0; r < n; ++r)
    for (int k0 = 0; k0 < in; k0 += 16) {
      const __mmask16 m = in - k0 >= 16 ? __mmask16{0xFFFF} : static_cast<__mmask16>((1u << (in - k0)) - 1);
      __m512 left = _mm512_maskz_loadu_ps(m, x + static_cast<std::size_t>(r) * in + k0);
      // 16 inputs are 8 (even, odd) pairs: each pair of bf16 one 32-bit word of the B layout, the
      // words of consecutive pairs 2 * kTile halves apart.
      std::uint16_t* dst = b.data() + static_cast<std::size_t>(k0 / kChunk) * kTileElems +
                           static_cast<std::size_t>((k0 % kChunk) / 2) * 2 * kTile;
      for (int p = 0; p < parts; ++p) {
        const __m256i bits = reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(left));
        alignas(32) std::uint32_t words[8];
        _mm256_store_si256(reinterpret_cast<__m256i*>(words), bits);
        const int column = parts * r + p;
        std::uint16_t* col = dst + static_cast<std::size_t>(column / kTile) * set_elems +
                             static_cast<std::size_t>(column % kTile) * 2;
        for (int i = 0; i < 8; ++i)
          std::memcpy(col + static_cast<std::size_t>(i) * 2 * kTile, &words[i], sizeof words[i]);
        left = bf16_residual(left, bf16_to_ps(bits));
      }
    }
  return b.data();
}

// 16 int8 weights as fp32 (zero-mask forms: GCC 12, see gemm_panels_int8.cpp).
inline __m512 widen16(const std::int8_t* p) {
  return _mm512_maskz_cvtepi32_ps(0xFFFF, _mm512_maskz_cvtepi8_epi32(0xFFFF, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
inline __m512 widen16(const std::int8_t* p, __mmask16 m) {
  return _mm512_maskz_cvtepi32_ps(0xFFFF, _mm512_maskz_cvtepi8_epi32(0xFFFF, _mm_maskz_loadu_epi8(m, p)));
}

// Inputs [k, k + 64) of `rows` weight rows from q as bf16 into the two A tiles a[0], a[1]
// (rows x 32 each); Full: no input past `in` in the step.
template <bool Full>
inline void convert_step(const std::int8_t* q, int in, int k, int rows, int ahead, std::uint16_t (*a)[kTileElems]) {
  for (int m = 0; m < rows; ++m) {
    const std::int8_t* p = q + static_cast<std::size_t>(m) * in + k;
    prefetch_ahead(p, 64, ahead);
    __m512 f[4];
    for (int j = 0; j < 4; ++j) {
      if constexpr (Full) {
        f[j] = widen16(p + 16 * j);
      } else {
        const int left = in - k - 16 * j;
        f[j] = widen16(p + 16 * j, left >= 16 ? __mmask16{0xFFFF} : left > 0 ? static_cast<__mmask16>((1u << left) - 1) : __mmask16{0});
      }
    }
    _mm512_store_si512(&a[0][m * kChunk], reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(f[1], f[0])));
    _mm512_store_si512(&a[1][m * kChunk], reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(f[3], f[2])));
  }
}

// The tile products of the step at k, its A tiles in a (converted one step before: the stores
// have left the store buffer by the time the tile unit loads them).
// Two: the second column set's products too (b1: its B tiles).
template <bool Two>
inline void multiply_step(const std::uint16_t* b, const std::uint16_t* b1, int in, int k,
                          const std::uint16_t (*a)[kTileElems]) {
  // The stores were plain C++; the tile loads are asm naming no memory operand.
  asm volatile("" ::: "memory");
  const std::size_t c = static_cast<std::size_t>(k / kChunk);
  _tile_loadd(1, a[0], 64);
  _tile_loadd(3, b + c * kTileElems, 64);
  _tile_dpbf16ps(0, 1, 3);
  if constexpr (Two) {
    _tile_loadd(6, b1 + c * kTileElems, 64);
    _tile_dpbf16ps(5, 1, 6);
  }
  if (k + kChunk < in) {
    _tile_loadd(2, a[1], 64);
    _tile_loadd(4, b + (c + 1) * kTileElems, 64);
    _tile_dpbf16ps(0, 2, 4);
    if constexpr (Two) {
      _tile_loadd(7, b1 + (c + 1) * kTileElems, 64);
      _tile_dpbf16ps(5, 2, 7);
    }
  }
}

// y[:, o0 .. o0 + rows) for all n token rows: rows <= 16 weight rows as one A tile row block.
// b1: the second column set's B tiles (Two).
template <bool Two>
void channel_block(const std::uint16_t* b, const std::uint16_t* b1, const std::int8_t* q, const float* scale, float* y,
                   int n, int parts, int out, int in, int o0, int rows, int ahead) {
  alignas(64) std::uint16_t a[2][2][kTileElems];  // [step parity][A tile]
  if (rows < kTile) std::fill(&a[0][0][0], &a[0][0][0] + 4 * kTileElems, std::uint16_t{0});
  const std::int8_t* qb = q + static_cast<std::size_t>(o0) * in;
  _tile_zero(0);
  if constexpr (Two) _tile_zero(5);
  int k = 0, parity = 0;
  for (; k + kStep <= in; k += kStep, parity ^= 1) {
    convert_step<true>(qb, in, k, rows, ahead, a[parity]);
    if (k > 0) multiply_step<Two>(b, b1, in, k - kStep, a[parity ^ 1]);
  }
  if (k < in) {
    convert_step<false>(qb, in, k, rows, ahead, a[parity]);
    if (k > 0) multiply_step<Two>(b, b1, in, k - kStep, a[parity ^ 1]);
    multiply_step<Two>(b, b1, in, k, a[parity]);
  } else {
    multiply_step<Two>(b, b1, in, k - kStep, a[parity ^ 1]);
  }
  alignas(64) float sums[2][kTile][kTile];  // [column set][channel][column]
  _tile_stored(0, sums[0], 64);
  if constexpr (Two) _tile_stored(5, sums[1], 64);
  asm volatile("" ::: "memory");
  auto at = [&](int m, int c) { return sums[c / kTile][m][c % kTile]; };
  for (int m = 0; m < rows; ++m)
    for (int r = 0; r < n; ++r) {
      float sum = at(m, parts * r);
      for (int p = 1; p < parts; ++p) sum += at(m, parts * r + p);
      y[static_cast<std::size_t>(r) * out + o0 + m] = scale[o0 + m] * sum;
    }
}

}  // namespace
#endif

void matmul_int8_amx(const float* x, const std::int8_t* q, const float* scale, float* y, int n, int out, int in,
                     ThreadPool& pool) {
  check(amx_bf16_enabled() && n >= 1 && n <= kInt8AmxMaxRows,
        "matmul_int8_amx: needs the AMX bf16 tiles (kernels/cpu/amx.h) and 1.." + std::to_string(kInt8AmxMaxRows) +
            " rows, got " + std::to_string(n));
#if INFERLAB_AMX_BF16
  if (out <= 0) return;
  if (in <= 0) {  // an empty dot product, as the other paths give it
    std::fill(y, y + static_cast<std::size_t>(n) * out, 0.0f);
    return;
  }
  const int chunks = (in + kStep - 1) / kStep * 2;
  const int parts = n * 3 <= kTile ? 3 : 2;  // three in two sets cost 6-8 rows 1.27x (2026-12-06)
  const int sets = (parts * n + kTile - 1) / kTile;
  const std::uint16_t* b = prepare(x, n, in, chunks, parts, sets);
  const std::uint16_t* b1 = b + static_cast<std::size_t>(chunks) * kTileElems;  // set 1 (where sets = 2)
  const std::size_t blocks = static_cast<std::size_t>((out + kTile - 1) / kTile);
  const std::size_t grain = std::max<std::size_t>(1, (std::size_t{1} << 16) / (static_cast<std::size_t>(kTile) * in));
  pool.parallel_for(blocks, [&](std::size_t begin, std::size_t end) {
    amx_full_tiles().load();
    // 16 weight rows stream side by side: 2 KiB ahead in each (the one-stream kernels' distance)
    // kept 512 lines requested at once and read DRAM at 5.4 GB/s where 256 bytes (4 steps) read
    // 9.0 (2 threads, 8 rows, 11264 x 2048 from DRAM, 2026-12-06; 128-256 alike).
    const int ahead = decode_prefetch_bytes() / 8;
    for (std::size_t blk = begin; blk < end; ++blk) {
      const int o0 = static_cast<int>(blk) * kTile;
      const int rows = std::min(kTile, out - o0);
      if (sets == 2) channel_block<true>(b, b1, q, scale, y, n, parts, out, in, o0, rows, ahead);
      else channel_block<false>(b, b1, q, scale, y, n, parts, out, in, o0, rows, ahead);
    }
  }, grain);
#else
  (void)x, (void)q, (void)scale, (void)y, (void)out, (void)in, (void)pool;
#endif
}

}  // namespace inferlab::cpu
