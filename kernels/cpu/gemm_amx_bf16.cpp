// AMX bf16 prefill GEMM: see gemm_amx_bf16.h.
#include "kernels/cpu/gemm_amx_bf16.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "inferlab/error.h"
#include "kernels/cpu/amx.h"
#include "kernels/ref/half.h"

#if INFERLAB_AMX_BF16
#include <immintrin.h>

#include "kernels/cpu/amx_bf16_split.h"
#endif

namespace inferlab::cpu {
namespace {

constexpr int kTile = 16;       // rows of every tile; outputs per B tile; fp32 per C tile row
constexpr int kChunk = 32;      // bf16 inputs per A tile row (64 bytes)
constexpr int kTileElems = kTile * kChunk;  // bf16 per A or B tile

// The bf16 terms of v: hi = bf16(v), lo = bf16(v - hi) (0 where hi is infinite, so that an
// infinite v stays infinite rather than becoming inf - inf = NaN).
void split(float v, std::uint16_t& hi, std::uint16_t& lo) {
  hi = ref::float_to_bf16(v);
  const float h = ref::bf16_to_float(hi);
  lo = std::isinf(h) ? std::uint16_t{0} : ref::float_to_bf16(v - h);
}

}  // namespace

PackedAmxBf16 pack_amx_bf16(const std::uint16_t* w, int out, int in, HalfFormat format, int weight_terms) {
  check(out > 0 && in > 0 && (weight_terms == 1 || weight_terms == 2), [&] {
    return "pack_amx_bf16: out and in must be positive and weight_terms 1 or 2, got out=" + std::to_string(out) +
           " in=" + std::to_string(in) + " weight_terms=" + std::to_string(weight_terms);
  });
  PackedAmxBf16 p;
  p.out = out;
  p.in = in;
  p.weight_terms = weight_terms;
  p.out_tiles = (out + kTile - 1) / kTile;
  p.k_chunks = (in + kChunk - 1) / kChunk;
  p.data.assign(static_cast<std::size_t>(p.out_tiles) * p.k_chunks * weight_terms * kTileElems, 0);
  for (int o = 0; o < out; ++o) {
    const int ot = o / kTile, col = o % kTile;
    for (int k = 0; k < in; ++k) {
      const std::uint16_t bits = w[static_cast<std::size_t>(o) * in + k];
      const float v = format == HalfFormat::kF16 ? ref::f16_to_float(bits) : ref::bf16_to_float(bits);
      std::uint16_t terms[2];
      split(v, terms[0], terms[1]);
      const int kc = k / kChunk, pair = (k % kChunk) / 2, e = k % 2;
      for (int t = 0; t < weight_terms; ++t) {
        const std::size_t tile = (static_cast<std::size_t>(ot) * p.k_chunks + kc) * weight_terms + t;
        p.data[tile * kTileElems + static_cast<std::size_t>(pair) * 2 * kTile + col * 2 + e] = terms[t];
      }
    }
  }
  return p;
}

#if INFERLAB_AMX_BF16
namespace {

// What every tile of one call reads.
struct Job {
  const std::uint16_t* a;  // [x_terms][n_pad][k_pad] bf16 A rows, zero-padded
  const std::uint16_t* b;  // PackedAmxBf16::data
  int x_terms, w_terms, k_chunks, k_pad, n_pad, n, out;
  float* y;
};

// x rows [r0, r1) rounded into the A buffer as x_terms bf16 terms, padding columns zero.
void round_rows(const float* x, int in, const Job& j, std::uint16_t* a, int r0, int r1) {
  const std::size_t plane = static_cast<std::size_t>(j.n_pad) * j.k_pad;
  for (int r = r0; r < r1; ++r) {
    const float* src = x + static_cast<std::size_t>(r) * in;
    std::uint16_t* hi_row = a + static_cast<std::size_t>(r) * j.k_pad;
    for (int k = 0; k < j.k_pad; k += 16) {
      const __mmask16 m = k + 16 <= in ? __mmask16(0xffff) : k < in ? __mmask16((1u << (in - k)) - 1) : __mmask16(0);
      const __m512 v = _mm512_maskz_loadu_ps(m, src + k);
      if (j.x_terms == 2) {
        __m256i hi, lo;
        split_bf16(v, hi, lo);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(hi_row + k), hi);
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(hi_row + plane + k), lo);
      } else {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(hi_row + k), reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(v)));
      }
    }
  }
}

// C tiles of row tiles [rt, rt + R) x output tiles [ot, ot + C): tile ids C 0..3 (2r + c),
// A 4..5, B 6..7.
template <int R, int C>
void block(const Job& j, int rt, int ot) {
  const std::size_t lda = static_cast<std::size_t>(j.k_pad) * 2;
  const std::size_t plane = static_cast<std::size_t>(j.n_pad) * j.k_pad;
  _tile_zero(0);
  if constexpr (C > 1) _tile_zero(1);
  if constexpr (R > 1) _tile_zero(2);
  if constexpr (R > 1 && C > 1) _tile_zero(3);
  for (int kc = 0; kc < j.k_chunks; ++kc) {
    const std::uint16_t* a0 = j.a + static_cast<std::size_t>(rt) * kTile * j.k_pad + static_cast<std::size_t>(kc) * kChunk;
    for (int wt = 0; wt < j.w_terms; ++wt) {
      const auto b_of = [&](int o) {
        return j.b + ((static_cast<std::size_t>(o) * j.k_chunks + kc) * j.w_terms + wt) * kTileElems;
      };
      _tile_loadd(6, b_of(ot), 64);
      if constexpr (C > 1) _tile_loadd(7, b_of(ot + 1), 64);
      const int x_terms = wt == 0 ? j.x_terms : 1;  // x_lo * w_lo is dropped
      for (int xt = 0; xt < x_terms; ++xt) {
        const std::uint16_t* a = a0 + xt * plane;
        _tile_loadd(4, a, lda);
        if constexpr (R > 1) _tile_loadd(5, a + static_cast<std::size_t>(kTile) * j.k_pad, lda);
        _tile_dpbf16ps(0, 4, 6);
        if constexpr (C > 1) _tile_dpbf16ps(1, 4, 7);
        if constexpr (R > 1) _tile_dpbf16ps(2, 5, 6);
        if constexpr (R > 1 && C > 1) _tile_dpbf16ps(3, 5, 7);
      }
    }
  }
  alignas(64) float spill[4][kTile][kTile];
  _tile_stored(0, spill[0], 64);
  if constexpr (C > 1) _tile_stored(1, spill[1], 64);
  if constexpr (R > 1) _tile_stored(2, spill[2], 64);
  if constexpr (R > 1 && C > 1) _tile_stored(3, spill[3], 64);
  // The tile stores are asm naming no memory operand: keep the reads below after them.
  asm volatile("" ::: "memory");
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) {
      const int row0 = (rt + r) * kTile, col0 = (ot + c) * kTile;
      const int rows = std::min(kTile, j.n - row0), cols = std::min(kTile, j.out - col0);
      for (int i = 0; i < rows; ++i)
        std::memcpy(j.y + static_cast<std::size_t>(row0 + i) * j.out + col0, spill[2 * r + c][i], sizeof(float) * cols);
    }
}

void run_outputs(const Job& j, int ot0, int ot1) {
  amx_full_tiles().load();
  const int row_tiles = j.n_pad / kTile;
  for (int ot = ot0; ot < ot1; ot += 2) {
    const bool two = ot + 1 < ot1;
    for (int rt = 0; rt < row_tiles; rt += 2) {
      const bool two_rows = rt + 1 < row_tiles;
      if (two && two_rows) block<2, 2>(j, rt, ot);
      else if (two) block<1, 2>(j, rt, ot);
      else if (two_rows) block<2, 1>(j, rt, ot);
      else block<1, 1>(j, rt, ot);
    }
  }
}

}  // namespace
#endif

void gemm_amx_bf16(const float* x, const PackedAmxBf16& w, int x_terms, float* y, int n, ThreadPool& pool) {
  check(x_terms == 1 || x_terms == 2, [&] { return "gemm_amx_bf16: x_terms must be 1 or 2, got " + std::to_string(x_terms); });
  check(amx_bf16_enabled(), "gemm_amx_bf16: the AMX bf16 tiles are not available (not built, refused by the kernel, or INFERLAB_AMX=0)");
  if (n <= 0) return;
#if INFERLAB_AMX_BF16
  Job j{};
  j.x_terms = x_terms;
  j.w_terms = w.weight_terms;
  j.k_chunks = w.k_chunks;
  j.k_pad = w.k_chunks * kChunk;
  j.n_pad = (n + kTile - 1) / kTile * kTile;
  j.n = n;
  j.out = w.out;
  j.y = y;
  j.b = w.data.data();
  thread_local std::vector<std::uint16_t> a_rows;  // reused across calls: no page faults per call
  const std::size_t plane = static_cast<std::size_t>(j.n_pad) * j.k_pad;
  a_rows.resize(std::max(a_rows.size(), plane * x_terms));
  std::uint16_t* a = a_rows.data();
  for (int t = 0; t < x_terms; ++t)  // the padding rows
    std::fill(a + t * plane + static_cast<std::size_t>(n) * j.k_pad, a + (t + 1) * plane, std::uint16_t{0});
  j.a = a;
  pool.parallel_for(static_cast<std::size_t>(n), [&](std::size_t r0, std::size_t r1) {
    round_rows(x, w.in, j, a, static_cast<int>(r0), static_cast<int>(r1));
  }, std::max<std::size_t>(1, 16384 / static_cast<std::size_t>(std::max(w.in, 1))));
  // Work in pairs of output tiles (32 outputs: two B tiles against each pair of A tiles).
  const std::size_t pairs = (static_cast<std::size_t>(w.out_tiles) + 1) / 2;
  pool.parallel_for(pairs, [&](std::size_t p0, std::size_t p1) {
    run_outputs(j, static_cast<int>(p0) * 2, std::min(w.out_tiles, static_cast<int>(p1) * 2));
  });
#else
  (void)x;
  (void)w;
  (void)y;
  (void)pool;
#endif
}

}  // namespace inferlab::cpu
