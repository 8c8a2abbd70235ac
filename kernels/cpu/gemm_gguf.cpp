// VNNI GEMM on repacked GGUF blocks (Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K): see gemm_gguf.h for the layout, the tile and the contract.
#include "kernels/cpu/gemm_gguf.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <utility>

#include "inferlab/error.h"
#include "kernels/cpu/act_tiles.h"
#include "kernels/cpu/panel_union.h"
#include "kernels/ref/gguf_blocks.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
#include <immintrin.h>
#define INFERLAB_GEMM_GGUF_VNNI 1
#endif

namespace inferlab::cpu {
namespace {

constexpr int kPanel = 32;   // weight rows per panel: two zmm of s32 lanes
constexpr int kBlock = 32;   // inputs per GGUF block and per activation block
constexpr int kSuper = 256;  // inputs per K-quant super-block

constexpr bool is_kquant(GgmlType t) { return t == GgmlType::kQ4_K || t == GgmlType::kQ5_K || t == GgmlType::kQ6_K; }
// Q4_K and Q5_K: Q4_1-like sub-blocks (scale d * sc_j, min -dmin * m_j); Q5_K adds a fifth bit.
constexpr bool is_q45k(GgmlType t) { return t == GgmlType::kQ4_K || t == GgmlType::kQ5_K; }
int source_block_elems(GgmlType t) { return is_kquant(t) ? kSuper : kBlock; }

// A Q8_0 / Q4_0 / Q4_1 block as the file stores it: fp16 d, (Q4_1) fp16 m, then the codes.
struct SourceBlock {
  std::size_t bytes;  // 34, 18, 20
  int code_offset;    // 2, 2, 4
  int code_bytes;     // 32 int8 codes, or 16 bytes of nibbles
};
SourceBlock source_block(GgmlType t) {
  switch (t) {
    case GgmlType::kQ8_0: return {34, 2, 32};
    case GgmlType::kQ4_0: return {18, 2, 16};
    default: return {20, 4, 16};  // Q4_1
  }
}
// Packed code bytes per (panel, block): 8 steps (Q8_0) or 4 nibble step pairs of [32 rows][4].
int panel_code_bytes(GgmlType t) { return t == GgmlType::kQ8_0 ? 1024 : 512; }
// Where packed byte (row j, code byte k of the block) lives inside its (panel, block): byte k
// holds code k (Q8_0) or codes k and 16 + k (the others), so step k / 4, lane j, byte k % 4.
std::size_t packed_offset(int j, int k) { return (static_cast<std::size_t>(k / 4) * kPanel + j) * 4 + k % 4; }
// Q6_K's top-2-bit plane: the byte (of 256 per (panel, block)) and the shift of code k (< 16:
// the low nibble's code, else the high one's) of row j.
std::size_t high_offset(int j, int k) { return static_cast<std::size_t>((k % 16) / 4) * 64 + (j % 16) * 4 + k % 4; }
int high_shift(int j, int k) { return (j / 16) * 4 + (k / 16) * 2; }
// Q5_K's fifth-bit plane (128 bytes per (panel, block)): steps 2i and 2i + 1 share the 64 bytes
// at 64 i, byte (j % 16) * 4 + k % 4; the bit of code k of row j is bit5_bit(j, k) of it.
constexpr int kBit5Bytes = 128;
std::size_t bit5_offset(int j, int k) { return static_cast<std::size_t>((k % 16) / 8) * 64 + (j % 16) * 4 + k % 4; }
int bit5_bit(int j, int k) { return (((k % 16) / 4) % 2) * 4 + (j / 16) * 2 + k / 16; }
// Bytes of the high plane per (panel, block): Q6_K's 2 bits, Q5_K's 1 bit per code, else none.
std::size_t high_plane_bytes(GgmlType t) { return t == GgmlType::kQ6_K ? 256 : t == GgmlType::kQ5_K ? kBit5Bytes : 0; }

// Sub-block c (< 8) of a K-quant super-block: its 32 codes (Q4_K 0..15, Q5_K 0..31, Q6_K 0..63),
// with Q4_K's / Q5_K's 6-bit scale and min or Q6_K's two int8 scales (codes 0-15, 16-31), per
// kernels/ref/gguf_blocks.h.
struct KSub {
  std::uint8_t code[kBlock];
  std::uint8_t sc[2], m;
};
KSub k_sub(GgmlType t, const std::uint8_t* src, int c) {
  KSub s{};
  if (is_q45k(t)) {
    ref::kq_scale_min(src + 4, c, s.sc[0], s.m);
    for (int l = 0; l < kBlock; ++l)
      s.code[l] = static_cast<std::uint8_t>(t == GgmlType::kQ5_K ? ref::q5k_code(src, c, l) : ref::q4k_code(src, c, l));
  } else {  // Q6_K
    for (int l = 0; l < kBlock; ++l) s.code[l] = static_cast<std::uint8_t>(ref::q6k_code(src, c, l));
    s.sc[0] = src[192 + 2 * c];
    s.sc[1] = src[192 + 2 * c + 1];
  }
  return s;
}
// The inverse: sub-block c's codes and scales written into the super-block `dst` (zeroed first).
void put_k_sub(GgmlType t, const KSub& s, int c, std::uint8_t* dst) {
  if (is_q45k(t)) {
    const int qs = t == GgmlType::kQ5_K ? 48 : 16;
    for (int l = 0; l < kBlock; ++l) {
      dst[qs + 32 * (c / 2) + l] |= static_cast<std::uint8_t>((s.code[l] & 0x0F) << (4 * (c & 1)));
      if (t == GgmlType::kQ5_K) dst[16 + l] |= static_cast<std::uint8_t>((s.code[l] >> 4) << c);
    }
    std::uint8_t* scales = dst + 4;  // kq_scale_min's packing of 6-bit values
    if (c < 4) {
      scales[c] |= s.sc[0];
      scales[c + 4] |= s.m;
    } else {
      scales[c + 4] |= static_cast<std::uint8_t>((s.sc[0] & 0x0F) | ((s.m & 0x0F) << 4));
      scales[c - 4] |= static_cast<std::uint8_t>((s.sc[0] >> 4) << 6);
      scales[c] |= static_cast<std::uint8_t>((s.m >> 4) << 6);
    }
  } else {
    const int h = c / 4, k = c % 4;
    for (int l = 0; l < kBlock; ++l) {
      dst[64 * h + 32 * (k & 1) + l] |= static_cast<std::uint8_t>((s.code[l] & 0x0F) << (4 * (k >> 1)));
      dst[128 + 32 * h + l] |= static_cast<std::uint8_t>((s.code[l] >> 4) << (2 * k));
    }
    dst[192 + 8 * h + 2 * k] = s.sc[0];
    dst[192 + 8 * h + 2 * k + 1] = s.sc[1];
  }
}

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

// y[r, j] (r < R, j < width) = the first R token rows of activation tile t (act_tiles.h) x the
// 32 G rows of panels [p, p + G); SB: the tiles' ActTiles::step_bytes. y points at the tile's
// first element, rows ldc apart. The codes' offsets (Q8_0's + 128, Q4_0's 8, Q6_K's 32) start
// the int32 sums, so they come off with no instruction of the epilogue's.
template <GgmlType T, int R, int G, int SB = kTileStepBytes>
void micro_tile(const ActTiles& a, int t, const PackedGguf& w, int p, float* y, std::size_t ldc, int width) {
  constexpr int V = 2 * G;  // zmm per token row
  constexpr bool kQ8 = T == GgmlType::kQ8_0, kQ6 = T == GgmlType::kQ6_K, kQ5 = T == GgmlType::kQ5_K;
  constexpr std::size_t kCodeBytes = kQ8 ? 1024 : 512;
  const int blocks = a.blocks, supers = blocks / 8;
  const std::size_t at0 = a.tile_blocks(t);  // the tile's (block, row) slots: at0 + b * kRows + r
  __m512 facc[R][V];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) facc[r][v] = _mm512_setzero_ps();
  for (int b = 0; b < blocks; ++b) {
    const std::size_t xb0 = at0 + static_cast<std::size_t>(b) * kRows;  // + r: row r's block slot
    // Offsets: Q8_0 codes are held as c + 128, Q4_0's are c = w / d + 8.
    constexpr int kOffset = kQ8 ? -128 : T == GgmlType::kQ4_0 ? -8 : 0;
    __m512i iacc[R][V];
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < V; ++v) iacc[r][v] = _mm512_set1_epi32(kOffset * a.sum[xb0 + r]);
    const std::uint8_t* codes[G];
    for (int g = 0; g < G; ++g) codes[g] = w.codes.data() + (static_cast<std::size_t>(p + g) * blocks + b) * kCodeBytes;
    const std::int8_t* x = a.tile_x(t) + static_cast<std::size_t>(b) * (kBlock / 4) * SB;  // step s: + s SB
    if constexpr (kQ8) {
#pragma GCC unroll 8
      for (int s = 0; s < 8; ++s) {
        __m512i wv[V];
        for (int v = 0; v < V; ++v) wv[v] = _mm512_loadu_si512(codes[v / 2] + s * 128 + (v % 2) * 64);
        for (int r = 0; r < R; ++r) {
          const __m512i xv = broadcast4(x + s * SB + 4 * r);
          for (int v = 0; v < V; ++v) iacc[r][v] = _mm512_dpbusd_epi32(iacc[r][v], wv[v], xv);
        }
      }
    } else if constexpr (kQ6) {
      // The halves one after the other (codes 0-15: the low nibbles, then 16-31: the high ones),
      // each with its own scale: one set of int32 accumulators, folded after each half.
      const __m512i low = _mm512_set1_epi8(0x0F), top = _mm512_set1_epi8(0x30);  // top: bits 4-5
      const std::uint8_t* high[G];
      for (int g = 0; g < G; ++g) high[g] = w.high.data() + (static_cast<std::size_t>(p + g) * blocks + b) * 256;
      const std::size_t sat0 = static_cast<std::size_t>(p) * supers + b / 8;  // (panel p, super-block)
      for (int half = 0; half < 2; ++half) {
        for (int r = 0; r < R; ++r)  // w = d sc (c - 32): 32 x the half's sum of x off
          for (int v = 0; v < V; ++v) iacc[r][v] = _mm512_set1_epi32(-32 * a.half_sum[2 * xb0 + half * kRows + r]);
#pragma GCC unroll 4
        for (int s = 0; s < 4; ++s) {
          __m512i c[V];
          for (int g = 0; g < G; ++g) {
            const __m512i hb = _mm512_loadu_si512(high[g] + s * 64);
            const __m512i r0 = _mm512_loadu_si512(codes[g] + s * 128), r1 = _mm512_loadu_si512(codes[g] + s * 128 + 64);
            // 16-bit shifts: what crosses into a byte from its neighbour lands outside the masks.
            if (half == 0) {
              c[2 * g] = _mm512_or_si512(_mm512_and_si512(r0, low), _mm512_and_si512(_mm512_slli_epi16(hb, 4), top));
              c[2 * g + 1] = _mm512_or_si512(_mm512_and_si512(r1, low), _mm512_and_si512(hb, top));
            } else {
              c[2 * g] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(r0, 4), low),
                                         _mm512_and_si512(_mm512_slli_epi16(hb, 2), top));
              c[2 * g + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(r1, 4), low),
                                             _mm512_and_si512(_mm512_srli_epi16(hb, 2), top));
            }
          }
          for (int r = 0; r < R; ++r) {
            const __m512i xv = broadcast4(x + (4 * half + s) * SB + 4 * r);
            for (int v = 0; v < V; ++v) iacc[r][v] = _mm512_dpbusd_epi32(iacc[r][v], c[v], xv);
          }
        }
        // The half's own scale d sc d_x.
        for (int v = 0; v < V; ++v) {
          const std::size_t pb = static_cast<std::size_t>(p + v / 2) * blocks + b;
          const __m512 dv = halves_to_float(w.d.data() + (sat0 + static_cast<std::size_t>(v / 2) * supers) * kPanel + (v % 2) * 16);
          const __m512 sv = _mm512_mul_ps(dv, s8_to_float(w.sub_scale.data() + pb * 64 + half * 32 + (v % 2) * 16));
          for (int r = 0; r < R; ++r)
            facc[r][v] = _mm512_fmadd_ps(to_float(iacc[r][v]), _mm512_mul_ps(sv, _mm512_set1_ps(a.xs[xb0 + r])), facc[r][v]);
        }
      }
      continue;  // folded
    } else {
      const __m512i low = _mm512_set1_epi8(0x0F);
      [[maybe_unused]] const __m512i bit4 = _mm512_set1_epi8(0x10);
      [[maybe_unused]] const std::uint8_t* bits[G] = {};
      if constexpr (kQ5)
        for (int g = 0; g < G; ++g) bits[g] = w.high.data() + (static_cast<std::size_t>(p + g) * blocks + b) * kBit5Bytes;
#pragma GCC unroll 4
      for (int s = 0; s < 4; ++s) {
        __m512i lo[V], hi[V];
        for (int v = 0; v < V; ++v) {
          const __m512i raw = _mm512_loadu_si512(codes[v / 2] + s * 128 + (v % 2) * 64);
          lo[v] = _mm512_and_si512(raw, low);  // codes 4s .. 4s + 3
          hi[v] = _mm512_and_si512(_mm512_srli_epi16(raw, 4), low);  // codes 16 + 4s ..
          if constexpr (kQ5) {
            // The fifth bits: bit (s % 2) * 4 + (v % 2) * 2 (+ 1 for the high nibble's code)
            // of the plane's bytes, moved to bit 4 (16-bit shifts: what crosses from a
            // neighbouring byte lands outside bit 4).
            const __m512i hb = _mm512_loadu_si512(bits[v / 2] + (s / 2) * 64);
            const int bit = (s % 2) * 4 + (v % 2) * 2;
            auto to_bit4 = [&](int from) {
              return from <= 4 ? _mm512_slli_epi16(hb, static_cast<unsigned>(4 - from))
                               : _mm512_srli_epi16(hb, static_cast<unsigned>(from - 4));
            };
            lo[v] = _mm512_or_si512(lo[v], _mm512_and_si512(to_bit4(bit), bit4));
            hi[v] = _mm512_or_si512(hi[v], _mm512_and_si512(to_bit4(bit + 1), bit4));
          }
        }
        for (int r = 0; r < R; ++r) {
          const __m512i xlo = broadcast4(x + s * SB + 4 * r);
          const __m512i xhi = broadcast4(x + (4 + s) * SB + 4 * r);
          for (int v = 0; v < V; ++v)
            iacc[r][v] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(iacc[r][v], lo[v], xlo), hi[v], xhi);
        }
      }
    }
    for (int v = 0; v < V; ++v) {
      const std::size_t pb = static_cast<std::size_t>(p + v / 2) * blocks + b;  // (panel, block)
      const std::size_t at = pb * kPanel + (v % 2) * 16;
      if constexpr (is_q45k(T)) {
        // w = d sc_j c - dmin m_j: a Q4_1 block of scale d sc_j and min -dmin m_j.
        const std::size_t sat = (static_cast<std::size_t>(p + v / 2) * supers + b / 8) * kPanel + (v % 2) * 16;
        const __m512 dw = _mm512_mul_ps(halves_to_float(w.d.data() + sat), u8_to_float(w.sub_scale.data() + at));
        const __m512 mw = _mm512_mul_ps(halves_to_float(w.m.data() + sat), u8_to_float(w.sub_min.data() + at));
        for (int r = 0; r < R; ++r) {
          const float xs = a.xs[xb0 + r];
          facc[r][v] = _mm512_fmadd_ps(to_float(iacc[r][v]), _mm512_mul_ps(dw, _mm512_set1_ps(xs)), facc[r][v]);
          facc[r][v] = _mm512_fnmadd_ps(mw, _mm512_set1_ps(xs * static_cast<float>(a.sum[xb0 + r])), facc[r][v]);
        }
      } else {
        const __m512 dw = halves_to_float(w.d.data() + at);
        for (int r = 0; r < R; ++r) {
          const float xs = a.xs[xb0 + r];
          facc[r][v] = _mm512_fmadd_ps(to_float(iacc[r][v]), _mm512_mul_ps(dw, _mm512_set1_ps(xs)), facc[r][v]);
          if constexpr (T == GgmlType::kQ4_1)
            facc[r][v] = _mm512_fmadd_ps(halves_to_float(w.m.data() + at),
                                         _mm512_set1_ps(xs * static_cast<float>(a.sum[xb0 + r])), facc[r][v]);
        }
      }
    }
  }
  for (int v = 0; v < V; ++v) {
    const int cols = std::clamp(width - 16 * v, 0, 16);
    const auto mask = static_cast<__mmask16>((1u << cols) - 1);
    for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(y + r * ldc + 16 * v, mask, facc[r][v]);
  }
}

using MicroTile = void (*)(const ActTiles&, int, const PackedGguf&, int, float*, std::size_t, int);
template <GgmlType T, std::size_t... I>
constexpr std::array<MicroTile, sizeof...(I)> micro_tiles(std::index_sequence<I...>) {
  return {&micro_tile<T, static_cast<int>(I) + 1, 1>...};
}

// Panels [p0, p1) of y [n, out]: each panel meets the token rows kRows at a time (its codes
// stay in L1/L2 while the rows pass); one token row (decode) takes two panels at once.
template <GgmlType T>
void run_panels(const ActTiles& a, const PackedGguf& w, float* y, int n, int p0, int p1) {
  static constexpr auto kTiles = micro_tiles<T>(std::make_index_sequence<kRows>{});
  const auto ldc = static_cast<std::size_t>(w.out);
  for (int p = p0; p < p1;) {
    float* yp = y + static_cast<std::size_t>(p) * kPanel;
    const int width = std::min(kPanel, w.out - p * kPanel);
    if (n == 1) {  // the row as it is (kRowStepBytes)
      if (p + 2 <= p1) {
        micro_tile<T, 1, 2, kRowStepBytes>(a, 0, w, p, yp, ldc, std::min(2 * kPanel, w.out - p * kPanel));
        p += 2;
      } else {
        micro_tile<T, 1, 1, kRowStepBytes>(a, 0, w, p, yp, ldc, width);
        ++p;
      }
      continue;
    }
    for (int r0 = 0, t = 0; r0 < n; r0 += kRows, ++t)
      kTiles[static_cast<std::size_t>(std::min(kRows, n - r0) - 1)](a, t, w, p, yp + r0 * ldc, ldc, width);
    ++p;
  }
}
#endif

}  // namespace

bool gemm_gguf_available() {
#if INFERLAB_GEMM_GGUF_VNNI
  return true;
#else
  return false;
#endif
}

bool gemm_gguf_packs(GgmlType type) {
  return type == GgmlType::kQ8_0 || type == GgmlType::kQ4_0 || type == GgmlType::kQ4_1 || is_kquant(type);
}

std::uint64_t packed_bytes(const PackedGguf& w) {
  return w.codes.size() + 2 * (w.d.size() + w.m.size()) + w.high.size() + w.sub_scale.size() + w.sub_min.size();
}

PackedGguf pack_gguf(GgmlType type, const std::vector<std::uint8_t>& w, int out, int in) {
  const std::string name = ggml_type_name(static_cast<std::uint32_t>(type));
  check(gemm_gguf_available(), "pack_gguf: this build has no AVX-512 VNNI (use matmul_gguf_act)");
  check(gemm_gguf_packs(type), "pack_gguf: no packed kernel for " + name + " (allowed: Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K)");
  const int elems = source_block_elems(type);
  check(out > 0 && in > 0 && in % elems == 0, "pack_gguf: out must be positive and in a positive multiple of " +
                                                  std::to_string(elems) + " for " + name + ", got out=" +
                                                  std::to_string(out) + " in=" + std::to_string(in));
  const int blocks = in / kBlock, supers = in / kSuper, panels = (out + kPanel - 1) / kPanel;
  const std::size_t row_bytes = ggml_tensor_bytes(type, static_cast<std::uint64_t>(in));
  check(w.size() == row_bytes * static_cast<std::size_t>(out),
        "pack_gguf: " + std::to_string(w.size()) + " bytes of " + name + " blocks, a [" + std::to_string(out) + ", " +
            std::to_string(in) + "] tensor has " + std::to_string(row_bytes * static_cast<std::size_t>(out)));
  const std::size_t slots = static_cast<std::size_t>(panels) * blocks * kPanel;  // (panel, block, row)
  const int code_bytes = panel_code_bytes(type);
  PackedGguf packed;
  packed.type = type;
  packed.out = out;
  packed.in = in;
  packed.codes.assign(static_cast<std::size_t>(panels) * blocks * code_bytes, 0);
  if (is_kquant(type)) {
    const std::size_t super_slots = static_cast<std::size_t>(panels) * supers * kPanel;
    const bool q6 = type == GgmlType::kQ6_K;
    packed.d.assign(super_slots, 0);
    if (!q6) packed.m.assign(super_slots, 0);
    packed.sub_scale.assign(slots * (q6 ? 2 : 1), 0);
    if (!q6) packed.sub_min.assign(slots, 0);
    packed.high.assign(static_cast<std::size_t>(panels) * blocks * high_plane_bytes(type), 0);
    for (int o = 0; o < out; ++o)
      for (int s = 0; s < supers; ++s) {
        const std::uint8_t* src = w.data() + static_cast<std::size_t>(o) * row_bytes + static_cast<std::size_t>(s) * ggml_block_bytes(type);
        const int j = o % kPanel;
        const std::size_t sslot = (static_cast<std::size_t>(o / kPanel) * supers + s) * kPanel + j;
        packed.d[sslot] = ref::load_le16(src + (q6 ? 208 : 0));
        if (!q6) packed.m[sslot] = ref::load_le16(src + 2);
        for (int c = 0; c < kSuper / kBlock; ++c) {
          const KSub sub = k_sub(type, src, c);
          const std::size_t pb = static_cast<std::size_t>(o / kPanel) * blocks + 8 * s + c;
          std::uint8_t* dst = packed.codes.data() + pb * code_bytes;
          for (int k = 0; k < 16; ++k)
            dst[packed_offset(j, k)] = static_cast<std::uint8_t>((sub.code[k] & 0x0F) | ((sub.code[16 + k] & 0x0F) << 4));
          if (q6) {
            for (int k = 0; k < kBlock; ++k)
              packed.high[pb * 256 + high_offset(j, k)] |= static_cast<std::uint8_t>((sub.code[k] >> 4) << high_shift(j, k));
            packed.sub_scale[pb * 64 + j] = sub.sc[0];
            packed.sub_scale[pb * 64 + 32 + j] = sub.sc[1];
          } else {
            if (type == GgmlType::kQ5_K)
              for (int k = 0; k < kBlock; ++k)
                packed.high[pb * kBit5Bytes + bit5_offset(j, k)] |=
                    static_cast<std::uint8_t>((sub.code[k] >> 4) << bit5_bit(j, k));
            packed.sub_scale[pb * kPanel + j] = sub.sc[0];
            packed.sub_min[pb * kPanel + j] = sub.m;
          }
        }
      }
    return packed;
  }
  const SourceBlock sb = source_block(type);
  packed.d.assign(slots, 0);
  if (type == GgmlType::kQ4_1) packed.m.assign(slots, 0);
  for (int o = 0; o < out; ++o)
    for (int b = 0; b < blocks; ++b) {
      const std::uint8_t* src = w.data() + static_cast<std::size_t>(o) * row_bytes + static_cast<std::size_t>(b) * sb.bytes;
      const std::size_t pb = static_cast<std::size_t>(o / kPanel) * blocks + b, slot = pb * kPanel + o % kPanel;
      packed.d[slot] = ref::load_le16(src);
      if (!packed.m.empty()) packed.m[slot] = ref::load_le16(src + 2);
      std::uint8_t* dst = packed.codes.data() + pb * code_bytes;
      const std::uint8_t flip = type == GgmlType::kQ8_0 ? 0x80 : 0x00;  // c ^ 0x80 = c + 128 as a byte
      for (int k = 0; k < sb.code_bytes; ++k) dst[packed_offset(o % kPanel, k)] = src[sb.code_offset + k] ^ flip;
    }
  return packed;
}

void unpack_gguf_row(const PackedGguf& w, int row, std::uint8_t* bytes) {
  check(row >= 0 && row < w.out, "unpack_gguf_row: row " + std::to_string(row) + " outside [0, " +
                                     std::to_string(w.out) + ")");
  const int blocks = w.in / kBlock, code_bytes = panel_code_bytes(w.type), j = row % kPanel;
  if (is_kquant(w.type)) {
    const bool q6 = w.type == GgmlType::kQ6_K;
    const int supers = w.in / kSuper;
    const std::size_t super_bytes = ggml_block_bytes(w.type);
    for (int s = 0; s < supers; ++s) {
      std::uint8_t* dst = bytes + static_cast<std::size_t>(s) * super_bytes;
      std::memset(dst, 0, super_bytes);
      const std::size_t sslot = (static_cast<std::size_t>(row / kPanel) * supers + s) * kPanel + j;
      const std::uint16_t d = w.d[sslot];
      dst[q6 ? 208 : 0] = static_cast<std::uint8_t>(d & 0xFF);
      dst[q6 ? 209 : 1] = static_cast<std::uint8_t>(d >> 8);
      if (!q6) {
        dst[2] = static_cast<std::uint8_t>(w.m[sslot] & 0xFF);
        dst[3] = static_cast<std::uint8_t>(w.m[sslot] >> 8);
      }
      for (int c = 0; c < kSuper / kBlock; ++c) {
        const std::size_t pb = static_cast<std::size_t>(row / kPanel) * blocks + 8 * s + c;
        const std::uint8_t* src = w.codes.data() + pb * code_bytes;
        KSub sub{};
        for (int k = 0; k < 16; ++k) {
          sub.code[k] = src[packed_offset(j, k)] & 0x0F;
          sub.code[16 + k] = src[packed_offset(j, k)] >> 4;
        }
        if (q6) {
          for (int k = 0; k < kBlock; ++k)
            sub.code[k] |= static_cast<std::uint8_t>(((w.high[pb * 256 + high_offset(j, k)] >> high_shift(j, k)) & 3) << 4);
          sub.sc[0] = w.sub_scale[pb * 64 + j];
          sub.sc[1] = w.sub_scale[pb * 64 + 32 + j];
        } else {
          if (w.type == GgmlType::kQ5_K)
            for (int k = 0; k < kBlock; ++k)
              sub.code[k] |= static_cast<std::uint8_t>(((w.high[pb * kBit5Bytes + bit5_offset(j, k)] >> bit5_bit(j, k)) & 1) << 4);
          sub.sc[0] = w.sub_scale[pb * kPanel + j];
          sub.m = w.sub_min[pb * kPanel + j];
        }
        put_k_sub(w.type, sub, c, dst);
      }
    }
    return;
  }
  const SourceBlock sb = source_block(w.type);
  for (int b = 0; b < blocks; ++b) {
    std::uint8_t* dst = bytes + static_cast<std::size_t>(b) * sb.bytes;
    const std::size_t pb = static_cast<std::size_t>(row / kPanel) * blocks + b, slot = pb * kPanel + j;
    dst[0] = static_cast<std::uint8_t>(w.d[slot] & 0xFF);
    dst[1] = static_cast<std::uint8_t>(w.d[slot] >> 8);
    if (!w.m.empty()) {
      dst[2] = static_cast<std::uint8_t>(w.m[slot] & 0xFF);
      dst[3] = static_cast<std::uint8_t>(w.m[slot] >> 8);
    }
    const std::uint8_t* src = w.codes.data() + pb * code_bytes;
    const std::uint8_t flip = w.type == GgmlType::kQ8_0 ? 0x80 : 0x00;
    for (int k = 0; k < sb.code_bytes; ++k) dst[sb.code_offset + k] = src[packed_offset(j, k)] ^ flip;
  }
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
    check(w.in == in, "gemm_gguf_group: the matrices read one input, but their in differ (" + std::to_string(in) +
                          " and " + std::to_string(w.in) + ")");
    // What a thread streams per panel: all of its bytes (codes, scales, mins, top bits).
    const int panels = (w.out + kPanel - 1) / kPanel;
    spans[i] = {panels, static_cast<std::size_t>(packed_bytes(w) / static_cast<std::uint64_t>(panels))};
    needs_sum16 = needs_sum16 || w.type == GgmlType::kQ6_K;
  }
#if INFERLAB_GEMM_GGUF_VNNI
  // The activation tiles (act_tiles.h), made once for the group; the caller's (thread_local).
  const ActTiles a = pack_act_tiles(xq, xs, n, in, kBlock, needs_sum16, pool);
  // Runs of whole panels; at decode run_panels pairs the panels of a run (a run of odd length
  // ends with one single-panel tile), so a matrix of 6 panels split 3 : 3 stays balanced.
  const std::size_t per_panel = static_cast<std::size_t>(kPanel) * static_cast<std::size_t>(in) * static_cast<std::size_t>(n);
  const std::size_t grain = std::max<std::size_t>(1, (std::size_t{1} << 16) / per_panel);
  parallel_for_panel_union(spans, grain, pool,
                           [&](int member, int p0, int p1) {
                             const PackedGguf& w = *group[static_cast<std::size_t>(member)].w;
                             float* y = group[static_cast<std::size_t>(member)].y;
                             switch (w.type) {
                               case GgmlType::kQ8_0: return run_panels<GgmlType::kQ8_0>(a, w, y, n, p0, p1);
                               case GgmlType::kQ4_0: return run_panels<GgmlType::kQ4_0>(a, w, y, n, p0, p1);
                               case GgmlType::kQ4_K: return run_panels<GgmlType::kQ4_K>(a, w, y, n, p0, p1);
                               case GgmlType::kQ5_K: return run_panels<GgmlType::kQ5_K>(a, w, y, n, p0, p1);
                               case GgmlType::kQ6_K: return run_panels<GgmlType::kQ6_K>(a, w, y, n, p0, p1);
                               default: return run_panels<GgmlType::kQ4_1>(a, w, y, n, p0, p1);
                             }
                           });
#else
  (void)xq, (void)xs, (void)pool, (void)needs_sum16;
  check(false, "gemm_gguf: this build has no AVX-512 VNNI (use matmul_gguf_act)");
#endif
}

}  // namespace inferlab::cpu
