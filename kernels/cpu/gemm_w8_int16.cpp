// W8A16 in integers: see gemm_w8_int16.h.
#include "kernels/cpu/gemm_w8_int16.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "inferlab/error.h"
#include "kernels/cpu/decode_prefetch.h"
#include "kernels/cpu/gemm_int4_panels.h"
#include "kernels/cpu/panel_union.h"

#if defined(__AVX512F__) && defined(__AVX512BW__)
#define INFERLAB_W8_INT16_ZMM 1
#include <immintrin.h>
#elif defined(__AVX2__)
#define INFERLAB_W8_INT16_YMM 1
#include <immintrin.h>
#endif

namespace inferlab::cpu {
namespace {

constexpr int P = kW8Int16PanelRows;
constexpr int kBlock = 32;         // inputs per activation scale
constexpr int kSteps = kBlock / 2;  // input pairs per block
constexpr std::size_t kBlockBytes = static_cast<std::size_t>(kBlock) * P;  // a panel's codes per block
constexpr std::size_t kStepBytes = 2 * P;                                  // a panel's codes per step

// The input (0..31) of a block whose activation lies in int16 slot `slot` (int16_pair_slot's inverse).
int slot_input(int slot) {
  for (int i = 0; i < kBlock; ++i)
    if (int16_pair_slot(i) == slot) return i;
  return 0;
}

std::size_t code_at(int blocks, int p, int b, int j, int lane, int t) {
  return (((static_cast<std::size_t>(p) * blocks + b) * kSteps + j) * P + lane) * 2 + t;
}

struct Acts {
  const std::int16_t* xq;
  const float* xs;  // [n, blocks], or [n] with per_token
  int in, blocks;
  bool per_token = false;  // one scale a row, one int32 sum over it (gemm_w8_int16_per_token)
};

#if INFERLAB_W8_INT16_ZMM || INFERLAB_W8_INT16_YMM

// One vector of int32 lanes (one per weight row) and what a pass does with it.
#if INFERLAB_W8_INT16_ZMM
struct V {
  using I = __m512i;
  using F = __m512;
  static constexpr int kLanes = 16;  // a whole panel
  static I codes(const std::int8_t* p) {  // 32 codes: 16 rows' pairs, widened to int16
    return _mm512_maskz_cvtepi8_epi16(~__mmask32{0}, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  }
  static I pair(const std::int16_t* p) {
    std::int32_t v;
    std::memcpy(&v, p, 4);
    return _mm512_set1_epi32(v);
  }
  static I zero() { return _mm512_setzero_si512(); }
  static I madd(I acc, I w, I a) { return _mm512_add_epi32(acc, _mm512_madd_epi16(w, a)); }
  static void pin(I& v) { asm("" : "+v"(v)); }
  static F zerof() { return _mm512_setzero_ps(); }
  static F scaled(I acc, float s, F sum) {
    return _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(0xffff, acc), _mm512_set1_ps(s), sum);
  }
  static F times(I acc, float s) { return _mm512_mul_ps(_mm512_maskz_cvtepi32_ps(0xffff, acc), _mm512_set1_ps(s)); }
  static void store(float* y, F sum, const float* scale) { _mm512_storeu_ps(y, _mm512_mul_ps(sum, _mm512_loadu_ps(scale))); }
};
#else
struct V {
  using I = __m256i;
  using F = __m256;
  static constexpr int kLanes = 8;  // half a panel
  static I codes(const std::int8_t* p) {  // 16 codes: 8 rows' pairs, widened to int16
    return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  }
  static I pair(const std::int16_t* p) {
    std::int32_t v;
    std::memcpy(&v, p, 4);
    return _mm256_set1_epi32(v);
  }
  static I zero() { return _mm256_setzero_si256(); }
  static I madd(I acc, I w, I a) { return _mm256_add_epi32(acc, _mm256_madd_epi16(w, a)); }
  // Holds v in a register here: without it GCC 12 reassociated a block's 16 integer adds into a
  // tree and kept the products on the stack (a 4-row pass 1.5x slower).
  static void pin(I& v) { asm("" : "+x"(v)); }
  static F zerof() { return _mm256_setzero_ps(); }
  static F scaled(I acc, float s, F sum) { return _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc), _mm256_set1_ps(s), sum); }
  static F times(I acc, float s) { return _mm256_mul_ps(_mm256_cvtepi32_ps(acc), _mm256_set1_ps(s)); }
  static void store(float* y, F sum, const float* scale) { _mm256_storeu_ps(y, _mm256_mul_ps(sum, _mm256_loadu_ps(scale))); }
};
#endif
constexpr int kPerPanel = P / V::kLanes;  // vectors a panel step
// A one-row pass's panels at once (4 streams): 2 took 1.05-1.10x the time (AVX2, SmolLM2's shapes,
// 100 copies streamed, one thread, Zen 3, 2026-12-07).
constexpr int kOneRowPanels = 4;

// R token rows (from r0) against NP panels from p over the whole input: per block, each step's
// codes widened once for all R rows, the int32 block sums kept in registers (16 ymm: R <= 6 with
// one panel), the fp32 sums scaled per block.
template <int R, int NP, bool kPerToken>
void tile(const Acts& a, int r0, const PackedW8Int16& w, int p, float* y, int out, int ahead) {
  constexpr int H = NP * kPerPanel;
  const int in = a.in, blocks = a.blocks;
  const std::size_t pstride = static_cast<std::size_t>(blocks) * kBlockBytes;
  const std::int8_t* base = w.codes.data() + static_cast<std::size_t>(p) * pstride;
  const std::int16_t* x = a.xq + static_cast<std::size_t>(r0) * in;
  const float* xs = a.xs + static_cast<std::size_t>(r0) * (kPerToken ? 1 : blocks);
  typename V::F sums[R][H];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int h = 0; h < H; ++h) sums[r][h] = V::zerof();
  typename V::I acc[R][H];  // per-token: the whole row's sums
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int h = 0; h < H; ++h) acc[r][h] = V::zero();
  for (int b = 0; b < blocks; ++b) {
    if constexpr (!kPerToken) {
      if (b > 0)
#pragma GCC unroll 8
        for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
          for (int h = 0; h < H; ++h) acc[r][h] = V::zero();
    }
    const std::int8_t* wb = base + static_cast<std::size_t>(b) * kBlockBytes;
    const std::int16_t* xb = x + static_cast<std::size_t>(b) * kBlock;
#pragma GCC unroll 16
    for (int j = 0; j < kSteps; ++j) {
      typename V::I wv[H];
#pragma GCC unroll 4
      for (int q = 0; q < NP; ++q) {
        const std::int8_t* wq = wb + q * pstride + j * kStepBytes;
        if (j % 2 == 0) prefetch_line(wq + ahead);  // a line each two steps, spread over the block
#pragma GCC unroll 2
        for (int h = 0; h < kPerPanel; ++h) wv[q * kPerPanel + h] = V::codes(wq + h * 2 * V::kLanes);
      }
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const typename V::I av = V::pair(xb + static_cast<std::size_t>(r) * in + 2 * j);
#pragma GCC unroll 8
        for (int h = 0; h < H; ++h) {
          acc[r][h] = V::madd(acc[r][h], wv[h], av);
          V::pin(acc[r][h]);
        }
      }
    }
    if constexpr (!kPerToken) {
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
        for (int h = 0; h < H; ++h) sums[r][h] = V::scaled(acc[r][h], xs[static_cast<std::size_t>(r) * blocks + b], sums[r][h]);
    }
  }
  if constexpr (kPerToken) {  // float(sum) * xs[r]: the plain loop's first product
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
      for (int h = 0; h < H; ++h) sums[r][h] = V::times(acc[r][h], xs[r]);
  }
#pragma GCC unroll 4
  for (int q = 0; q < NP; ++q) {
    const int o0 = (p + q) * P, cols = std::min(P, out - o0);
    const float* scale = w.scale.data() + o0;
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      float* yr = y + static_cast<std::size_t>(r0 + r) * out + o0;
      if (cols == P) {
#pragma GCC unroll 2
        for (int h = 0; h < kPerPanel; ++h) V::store(yr + h * V::kLanes, sums[r][q * kPerPanel + h], scale + h * V::kLanes);
      } else {  // the narrow last panel: through a buffer (its padding rows' scales are 0)
        alignas(64) float tmp[P];
#pragma GCC unroll 2
        for (int h = 0; h < kPerPanel; ++h) V::store(tmp + h * V::kLanes, sums[r][q * kPerPanel + h], scale + h * V::kLanes);
        std::memcpy(yr, tmp, sizeof(float) * static_cast<std::size_t>(cols));
      }
    }
  }
}

// Token rows per tile past one tile: passes of up to kTileRows rows, each panel read from memory
// by the first and from cache by the rest. Tiles of 4 took the least time for 7-32 rows (tiles of
// 5 or 6: 1.0-1.06x, 3: 1.02-1.05x, 2: 1.1-1.19x; SmolLM2's shapes, 60 copies streamed, one
// thread, Zen 3, 2026-12-07).
constexpr int kMaxOneTile = 6;
constexpr int kTileRows = 4;

template <int R, bool kPerToken>
void tile_rows(const Acts& a, int r0, const PackedW8Int16& w, int p, float* y, int out, int ahead) {
  tile<R, 1, kPerToken>(a, r0, w, p, y, out, ahead);
}
using TileFn = void (*)(const Acts&, int, const PackedW8Int16&, int, float*, int, int);
template <bool kPerToken>
constexpr TileFn kTiles[kMaxOneTile] = {&tile_rows<1, kPerToken>, &tile_rows<2, kPerToken>, &tile_rows<3, kPerToken>,
                                        &tile_rows<4, kPerToken>, &tile_rows<5, kPerToken>, &tile_rows<6, kPerToken>};

// Panels [p0, p1) for all n rows.
template <bool kPerToken>
void run_panels_as(const Acts& a, const PackedW8Int16& w, float* y, int n, int p0, int p1, int ahead) {
  int p = p0;
  if (n == 1) {
    for (; p + kOneRowPanels <= p1; p += kOneRowPanels) tile<1, kOneRowPanels, kPerToken>(a, 0, w, p, y, w.out, ahead);
    for (; p < p1; ++p) tile<1, 1, kPerToken>(a, 0, w, p, y, w.out, ahead);
    return;
  }
  const int rows = n <= kMaxOneTile ? n : kTileRows;
  for (; p < p1; ++p)
    for (int r0 = 0; r0 < n; r0 += rows) {
      const int r = std::min(rows, n - r0);
      kTiles<kPerToken>[r - 1](a, r0, w, p, y, w.out, r0 == 0 ? ahead : 0);
    }
}

void run_panels(const Acts& a, const PackedW8Int16& w, float* y, int n, int p0, int p1, int ahead) {
  if (a.per_token) run_panels_as<true>(a, w, y, n, p0, p1, ahead);
  else run_panels_as<false>(a, w, y, n, p0, p1, ahead);
}

#else  // the portable loop: the same sums in the same order

void run_panels(const Acts& a, const PackedW8Int16& w, float* y, int n, int p0, int p1, int ahead) {
  (void)ahead;
  for (int p = p0; p < p1; ++p)
    for (int r = 0; r < n; ++r) {
      const std::int16_t* x = a.xq + static_cast<std::size_t>(r) * a.in;
      for (int l = 0; l < P && p * P + l < w.out; ++l) {
        float sum = 0.0f;
        std::int32_t acc = 0;
        for (int b = 0; b < a.blocks; ++b) {
          if (!a.per_token) acc = 0;
          for (int j = 0; j < kSteps; ++j)
            for (int t = 0; t < 2; ++t)
              acc += static_cast<std::int32_t>(w.codes[code_at(a.blocks, p, b, j, l, t)]) *
                     x[static_cast<std::size_t>(b) * kBlock + 2 * j + t];
          if (!a.per_token) sum = std::fma(static_cast<float>(acc), a.xs[static_cast<std::size_t>(r) * a.blocks + b], sum);
        }
        if (a.per_token) sum = static_cast<float>(acc) * a.xs[r];
        y[static_cast<std::size_t>(r) * w.out + p * P + l] = sum * w.scale[static_cast<std::size_t>(p) * P + l];
      }
    }
}

#endif

}  // namespace

bool w8_int16_available(int in) { return in > 0 && in % kBlock == 0; }

PackedW8Int16 pack_w8_int16(const std::int8_t* q, const float* scale, int out, int in) {
  check(out > 0 && w8_int16_available(in), [&] {
    return "pack_w8_int16: out must be positive and in a positive multiple of 32, got out=" + std::to_string(out) +
           " in=" + std::to_string(in);
  });
  PackedW8Int16 w;
  w.out = out;
  w.in = in;
  w.panels = (out + P - 1) / P;
  const int blocks = in / kBlock;
  w.codes.assign(static_cast<std::size_t>(w.panels) * blocks * kBlockBytes, 0);
  w.scale.assign(static_cast<std::size_t>(w.panels) * P, 0.0f);
  int input[kBlock];
  for (int s = 0; s < kBlock; ++s) input[s] = slot_input(s);
  for (int o = 0; o < out; ++o) {
    const int p = o / P, l = o % P;
    const std::int8_t* row = q + static_cast<std::size_t>(o) * in;
    for (int b = 0; b < blocks; ++b)
      for (int j = 0; j < kSteps; ++j)
        for (int t = 0; t < 2; ++t) w.codes[code_at(blocks, p, b, j, l, t)] = row[b * kBlock + input[2 * j + t]];
    w.scale[static_cast<std::size_t>(o)] = scale[o];
  }
  return w;
}

void unpack_w8_int16_row(const PackedW8Int16& w, int row, float* dst) {
  check(row >= 0 && row < w.out, [&] {
    return "unpack_w8_int16_row: row " + std::to_string(row) + " outside [0, " + std::to_string(w.out) + ")";
  });
  const int p = row / P, l = row % P, blocks = w.in / kBlock;
  const float s = w.scale[static_cast<std::size_t>(row)];
  for (int b = 0; b < blocks; ++b)
    for (int j = 0; j < kSteps; ++j)
      for (int t = 0; t < 2; ++t)
        dst[b * kBlock + slot_input(2 * j + t)] = s * static_cast<float>(w.codes[code_at(blocks, p, b, j, l, t)]);
}

std::uint64_t w8_int16_bytes(const PackedW8Int16& w) {
  return static_cast<std::uint64_t>(w.out) * (static_cast<std::uint64_t>(w.in) + sizeof(float));
}

void widen_act_blocks_int16(const std::int8_t* xq, int n, int in, std::int16_t* out) {
  check(w8_int16_available(in),
        [&] { return "widen_act_blocks_int16: in must be a positive multiple of 32, got " + std::to_string(in); });
  const std::size_t count = static_cast<std::size_t>(n > 0 ? n : 0) * static_cast<std::size_t>(in);
#if INFERLAB_W8_INT16_ZMM || INFERLAB_W8_INT16_YMM
  // 8 codes at a time: widened, their int32 lanes put in the pair order, packed to int16.
  const __m256i order = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
  for (std::size_t i = 0; i < count; i += 8) {
    const __m256i w = _mm256_permutevar8x32_epi32(
        _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(xq + i))), order);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i),
                     _mm_packs_epi32(_mm256_castsi256_si128(w), _mm256_extracti128_si256(w, 1)));
  }
#else
  for (std::size_t i = 0; i < count; ++i) out[i - i % kBlock + static_cast<std::size_t>(int16_pair_slot(static_cast<int>(i % kBlock)))] = xq[i];
#endif
}

namespace {

void run_group(const std::int16_t* xq, const float* xs, bool per_token, std::span<const GemmW8Int16Output> group, int n,
               ThreadPool& pool) {
  if (n <= 0 || group.empty()) return;
  const int in = group.front().w->in;
  thread_local std::vector<PanelSpan> spans;
  spans.clear();
  for (const GemmW8Int16Output& m : group) {
    check(m.w->in == in, [&] {
      return "gemm_w8_int16_group: the matrices read one input, but their in differ (" + std::to_string(in) + " and " +
             std::to_string(m.w->in) + ")";
    });
    spans.push_back({m.w->panels, static_cast<std::size_t>(in) * P});
  }
  const Acts a{xq, xs, in, in / kBlock, per_token};
  const int ahead = decode_prefetch_bytes();
  // A run should carry at least ~256K multiply-adds so the dispatch cost stays small.
  const std::size_t per_panel = static_cast<std::size_t>(P) * static_cast<std::size_t>(in) * static_cast<std::size_t>(n);
  const std::size_t grain = std::max<std::size_t>(1, (std::size_t{1} << 18) / per_panel);
#if INFERLAB_W8_INT16_ZMM || INFERLAB_W8_INT16_YMM
  const std::size_t claim = n == 1 ? kOneRowPanels : 1;
#else
  const std::size_t claim = 1;
#endif
  parallel_for_panel_union(spans, grain, claim, pool, [&](int member, int p0, int p1) {
    const GemmW8Int16Output& m = group[static_cast<std::size_t>(member)];
    run_panels(a, *m.w, m.y, n, p0, p1, ahead);
  });
}

}  // namespace

void gemm_w8_int16_group(const std::int16_t* xq, const float* xs, std::span<const GemmW8Int16Output> group, int n,
                         ThreadPool& pool) {
  run_group(xq, xs, false, group, n, pool);
}

void gemm_w8_int16(const std::int16_t* xq, const float* xs, const PackedW8Int16& w, float* y, int n, ThreadPool& pool) {
  const GemmW8Int16Output one{&w, y};
  run_group(xq, xs, false, std::span<const GemmW8Int16Output>(&one, 1), n, pool);
}

void gemm_w8_int16_per_token(const std::int16_t* xq, const float* xs, const PackedW8Int16& w, float* y, int n,
                             ThreadPool& pool) {
  check(w.in <= kW8Int16PerTokenMaxIn, [&] {
    return "gemm_w8_int16_per_token: in " + std::to_string(w.in) + " exceeds " +
           std::to_string(kW8Int16PerTokenMaxIn) + " (the int32 row sums could overflow)";
  });
  const GemmW8Int16Output one{&w, y};
  run_group(xq, xs, true, std::span<const GemmW8Int16Output>(&one, 1), n, pool);
}

}  // namespace inferlab::cpu
