// Packed int8 GEMM: see gemm_panels_int8.h for the layout, the blocking and the contract.
#include "kernels/cpu/gemm_panels_int8.h"
#include "kernels/cpu/linear_plan.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <string>
#include <utility>

#include "inferlab/error.h"
#include "kernels/cpu/act_tiles.h"
#include "kernels/cpu/amx.h"
#include "kernels/cpu/amx_blocks.h"
#include "kernels/cpu/decode_prefetch.h"
#include "kernels/cpu/panel_union.h"
#include "kernels/ref/matmul_int8.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
#include <immintrin.h>
#define INFERLAB_GEMM_INT8_VNNI 1
#define INFERLAB_GEMM_INT8_PANELS 1
#if INFERLAB_AMX_INT8
#define INFERLAB_GEMM_INT8_AMX 1
#endif
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)  // CpuIsa::avx2
#include <immintrin.h>
#define INFERLAB_GEMM_INT8_AVX2 1
#define INFERLAB_GEMM_INT8_PANELS 1
#endif

namespace inferlab::cpu {
namespace {

constexpr int kCols = 32;        // channels per panel: two zmm of s32 lanes
[[maybe_unused]] constexpr int kBlock = ref::kActBlock;  // unused without the panels (clang -Wunused-const-variable)
// Per-token scales: one scale block per row as long as its integer sum cannot overflow
// (|(w + 128) x| <= 255 * 127 per product): then each output is one int32 sum, converted once.
[[maybe_unused]] constexpr int kTokenBlockMax = 65536;

constexpr std::uint8_t kOffset = 128;  // codes are held as w + 128: vpdpbusd's unsigned operand
int round4(int in) { return (in + 3) / 4 * 4; }
// Bytes of a full panel; panel p starts at p * full_panel_bytes (only the last is narrower).
std::size_t full_panel_bytes(int in) { return static_cast<std::size_t>(round4(in)) * kCols; }

#if INFERLAB_GEMM_INT8_VNNI
constexpr int kRows = kTileRows;

// int32 -> fp32; the all-lanes zero-mask form, because GCC 12's _mm512_cvtepi32_ps trips
// -Werror=maybe-uninitialized (its pass-through operand is _mm512_undefined_ps).
constexpr __mmask16 kAll = 0xFFFF;
inline __m512 to_float(__m512i v) { return _mm512_maskz_cvtepi32_ps(kAll, v); }
// c[rows, cols] = scale ⊙ sum over the row's blocks of xs[r, b] * ((w_b + 128) · x_r - 128 sum(x_r,b))
// for tile t's first R rows (SB: the tiles' ActTiles::step_bytes) and G adjacent panels (G > 1
// only for one row: decode, where a single panel's two chains would leave vpdpbusd latency
// bound). w, scale: the first panel's [in4/4][cols][4] codes + 128 and cols scales; the next
// panel's follow at w + w_stride, scale + 32. cols: of the last panel (32 unless it is the
// narrow last one, G = 1; its loads are masked to cols). kFull: cols = 32, plain loads (masked
// ones, even with every lane set, cost Zen 4 13 % of the kernel's rate). Each block's int32
// sums start at the block's offset, so the epilogue is one conversion and one FMA per sum.
// Each panel's stream is prefetched `ahead` bytes on (decode_prefetch.h; 0: not at all): with
// R rows a step spends R times the instructions on its 128 bytes, and the hardware prefetcher
// alone left TinyLlama W8A8 4- and 8-row passes 18-25 % slower (AMX Xeon, 2026-12-06).
template <int R, int G, bool kFull, int SB = kTileStepBytes>
void micro_tile(const ActTiles& a, int t, const std::uint8_t* w, std::size_t w_stride, const float* scale, float* c,
                std::size_t ldc, int cols, int ahead) {
  constexpr int V = 2 * G;  // zmm per row
  const int half0 = std::min(cols, 16), half1 = std::max(cols - 16, 0);  // columns of each half
  const __mmask64 wmask[2] = {half0 == 16 ? ~__mmask64{0} : (__mmask64{1} << (4 * half0)) - 1,
                              half1 == 16 ? ~__mmask64{0} : (__mmask64{1} << (4 * half1)) - 1};
  const __mmask16 cmask[2] = {static_cast<__mmask16>((1u << half0) - 1), static_cast<__mmask16>((1u << half1) - 1)};
  static_assert(G == 1 || kFull, "a decode group's panels are full");
  const std::size_t step_bytes = kFull ? std::size_t{kCols} * 4 : static_cast<std::size_t>(cols) * 4;
  const std::int8_t* xp = a.tile_x(t);
  const float* xs = a.xs + a.tile_blocks(t);
  const int* sum = a.sum + a.tile_blocks(t);
  __m512 facc[R][V];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int v = 0; v < V; ++v) facc[r][v] = _mm512_setzero_ps();
  int left = a.steps;
  for (int b = 0; b < a.blocks; ++b, xs += kRows, sum += kRows) {
    __m512i iacc[R][V];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
      for (int v = 0; v < V; ++v) iacc[r][v] = _mm512_set1_epi32(-128 * sum[r]);  // what the codes' + 128 add
    const int s1 = std::min(a.block_steps, left);
    left -= s1;
    // The block's steps; a 32-block's 8 unrolled (no lambda: GCC keeps captured arrays in memory).
#pragma GCC unroll 8
    for (int s = 0; s < s1; ++s) {
      __m512i wv[V];
#pragma GCC unroll 16
      for (int g = 0; g < G; ++g) prefetch_ahead(w + g * w_stride, step_bytes, ahead);
#pragma GCC unroll 16
      for (int v = 0; v < V; ++v) {
        const std::uint8_t* wp = w + (v / 2) * w_stride + (v % 2) * 64;
        wv[v] = kFull ? _mm512_loadu_si512(wp) : _mm512_maskz_loadu_epi8(wmask[v % 2], wp);
      }
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) {
        std::int32_t four;
        std::memcpy(&four, xp + 4 * r, 4);
        const __m512i xv = _mm512_set1_epi32(four);
#pragma GCC unroll 16
        for (int v = 0; v < V; ++v) iacc[r][v] = _mm512_dpbusd_epi32(iacc[r][v], wv[v], xv);
      }
      w += step_bytes;
      xp += SB;
    }
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512 sx = _mm512_set1_ps(xs[r]);
#pragma GCC unroll 16
      for (int v = 0; v < V; ++v) facc[r][v] = _mm512_fmadd_ps(to_float(iacc[r][v]), sx, facc[r][v]);
    }
  }
  // c = facc ⊙ scale, the zmm's valid columns only (masked: the narrow last panel's columns
  // past cols; G > 1 panels are always full).
#pragma GCC unroll 16
  for (int v = 0; v < V; ++v) {
    const __mmask16 m = cmask[v % 2];
    const __m512 sw = _mm512_maskz_loadu_ps(m, scale + (v / 2) * kCols + (v % 2) * 16);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) _mm512_mask_storeu_ps(c + r * ldc + 16 * v, m, _mm512_mul_ps(facc[r][v], sw));
  }
}

using MicroTile = void (*)(const ActTiles&, int, const std::uint8_t*, std::size_t, const float*, float*, std::size_t,
                           int, int);
template <bool kFull, std::size_t... I>
constexpr std::array<MicroTile, sizeof...(I)> micro_tiles(std::index_sequence<I...>) {
  return {&micro_tile<static_cast<int>(I) + 1, 1, kFull>...};
}
constexpr auto kFullTiles = micro_tiles<true>(std::make_index_sequence<kRows>{});    // cols = 32
constexpr auto kNarrowTiles = micro_tiles<false>(std::make_index_sequence<kRows>{});  // the narrow last panel
constexpr int kDecodeGroup = 4;  // panels per decode micro-tile

// Panels [p0, p1), each over the whole depth: a panel's codes (32 x in bytes: 18 KiB at in = 576,
// 64 KiB at 2048) stay in L1/L2 while the row tiles pass, and each output is written once. (A
// depth blocking of 256 inputs, with the partial sums added into y pass after pass, read and
// wrote all of y once per 256 inputs: 8 times at in = 2048, 1.7x the time at 512 x 5632.)
// One row (decode): kDecodeGroup panels at once, so the group's weights stream front to back —
// the same sums in the same order as a batch tile's.
void run_panels(const ActTiles& a, const PackedPanelsInt8& pw, float* yall, int n, int p0, int p1) {
  const int out = pw.out, in = pw.in;
  const std::size_t pbytes = full_panel_bytes(in);
  const int full = out / kCols;  // panels of 32 real channels
  const int ahead = decode_prefetch_bytes();
  for (int p = p0; p < p1;) {
    const int cols = std::min(kCols, out - p * kCols);
    const std::uint8_t* w = pw.data.data() + static_cast<std::size_t>(p) * pbytes;
    const float* scale = pw.scale.data() + static_cast<std::size_t>(p) * kCols;
    float* y = yall + static_cast<std::size_t>(p) * kCols;
    if (n == 1 && p + kDecodeGroup <= std::min(p1, full)) {
      micro_tile<1, kDecodeGroup, true, kRowStepBytes>(a, 0, w, pbytes, scale, y, static_cast<std::size_t>(out), kCols,
                                                             ahead);
      p += kDecodeGroup;
      continue;
    }
    if (n == 1) {  // the row as it is (kRowStepBytes)
      const MicroTile one_row = cols == kCols ? micro_tile<1, 1, true, kRowStepBytes> : micro_tile<1, 1, false, kRowStepBytes>;
      one_row(a, 0, w, pbytes, scale, y, static_cast<std::size_t>(out), cols, ahead);
      ++p;
      continue;
    }
    const auto& tiles = cols == kCols ? kFullTiles : kNarrowTiles;
    for (int r0 = 0, t = 0; r0 < n; r0 += kRows, ++t)
      tiles[static_cast<std::size_t>(std::min(kRows, n - r0) - 1)](
          a, t, w, pbytes, scale, y + static_cast<std::size_t>(r0) * out, static_cast<std::size_t>(out), cols, ahead);
    ++p;
  }
}
#endif


#if INFERLAB_GEMM_INT8_AVX2
constexpr int kRows = kTileRows;

// Without VNNI: `vpmaddubsw` on the same panels. A ymm holds 8 channels x 4 inputs of a step (one
// int32 lane per channel). The codes + 128 would saturate vpmaddubsw's int16 pair sums, so they are
// flipped back to signed c once per step and the sign trick taken (|c| as the unsigned operand, x
// carrying c's sign: |pair| <= 127 * 127 * 2), widened by `vpmaddwd` every step (gemm_gguf_avx2's
// Q8_0). Each block's int32 sum is then Σ c x exactly, the integer the VNNI tile forms as
// (c + 128) · x - 128 Σx, folded by the same conversion and FMA, the scale applied at the store:
// the same operations per output as micro_tile above, the same bits.
// R token rows x V groups of 8 channels from group v0 of the panel: up to 3 rows (decode, a few
// sequences) the panel's 4 groups (the step's 128 bytes front to back), more two groups
// (tile_groups_avx2).
template <int R, int V, bool kFull, int SB = kTileStepBytes>
void micro_tile_avx2(const ActTiles& a, int t, const std::uint8_t* w, int v0, const float* scale, float* c,
                     std::size_t ldc, int cols, int ahead, SpreadPrefetch* next = nullptr) {  // next: a share per block
  const std::size_t step_bytes = kFull ? std::size_t{kCols} * 4 : static_cast<std::size_t>(cols) * 4;
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256i keep[V];  // lanes of real channels (the narrow last panel)
  for (int v = 0; v < V; ++v) keep[v] = _mm256_cmpgt_epi32(_mm256_set1_epi32(cols - 8 * (v0 + v)), lane);
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80)), ones = _mm256_set1_epi16(1);
  const std::int8_t* xp = a.tile_x(t);
  const float* xs = a.xs + a.tile_blocks(t);
  __m256 facc[R][V];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < V; ++v) facc[r][v] = _mm256_setzero_ps();
  w += 32 * v0;
  int left = a.steps;
  for (int b = 0; b < a.blocks; ++b, xs += kRows) {
    if (next) next->step();
    __m256i iacc[R][V];
    for (int r = 0; r < R; ++r)
      for (int v = 0; v < V; ++v) iacc[r][v] = _mm256_setzero_si256();
    const int s1 = std::min(a.block_steps, left);
    left -= s1;
#pragma GCC unroll 8
    for (int s = 0; s < s1; ++s) {
      prefetch_ahead(w, step_bytes, ahead);
      __m256i xv[R];
      for (int r = 0; r < R; ++r) {
        std::int32_t four;
        std::memcpy(&four, xp + 4 * r, 4);
        xv[r] = _mm256_set1_epi32(four);
      }
      for (int v = 0; v < V; ++v) {
        const __m256i* wp = reinterpret_cast<const __m256i*>(w + 32 * v);
        const __m256i cv = _mm256_xor_si256(
            kFull ? _mm256_loadu_si256(wp) : _mm256_maskload_epi32(reinterpret_cast<const int*>(wp), keep[v]), flip);
        const __m256i mag = _mm256_abs_epi8(cv);
        for (int r = 0; r < R; ++r)
          iacc[r][v] = _mm256_add_epi32(iacc[r][v],
                                        _mm256_madd_epi16(_mm256_maddubs_epi16(mag, _mm256_sign_epi8(xv[r], cv)), ones));
      }
      w += step_bytes;
      xp += SB;
    }
    for (int r = 0; r < R; ++r) {
      const __m256 sx = _mm256_set1_ps(xs[r]);
      for (int v = 0; v < V; ++v) facc[r][v] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(iacc[r][v]), sx, facc[r][v]);
    }
  }
  for (int v = 0; v < V; ++v) {
    const int g = v0 + v;
    if (8 * g >= cols) break;
    const __m256 sw = _mm256_maskload_ps(scale + 8 * g, keep[v]);
    for (int r = 0; r < R; ++r) {
      float* out = c + r * ldc + 8 * g;
      if (8 * g + 8 <= cols) _mm256_storeu_ps(out, _mm256_mul_ps(facc[r][v], sw));
      else _mm256_maskstore_ps(out, keep[v], _mm256_mul_ps(facc[r][v], sw));
    }
  }
}

// A tile's R rows against the panel's groups of 8 channels, V at a time: up to 3 rows all four
// (one pass, the step's 128 bytes front to back; some sums spill), more rows two (two passes).
// A step holds all 32 channels' codes, so every pass reads every line of the panel: with a group
// a pass (four passes) the first brought the lines from memory using a quarter of each and the
// other three found them cached, one phase after the other. Against that, 2-3 rows one pass
// took 0.62-0.74x the time, 4 rows two passes 0.80-0.88x, 5-8 rows 0.84-0.98x (SmolLM2's
// 1536 x 576 and 576 x 1536 x100 streamed, one thread, Zen 3, 2026-12-07, in-process
// alternating, the same bits). With two passes the first tile also spreads `next` (the thread's
// next panel, `next_bytes`; null: none) into L2 over them, one share per block, so the second
// pass after a range's first panel reads cached lines (four passes: 4 rows 13.3-16.5 -> 11.4-11.8
// ms with it).
template <int R, bool kFull>
void tile_groups_avx2(const ActTiles& a, int t, const std::uint8_t* w, const float* scale, float* c, std::size_t ldc,
                      int cols, int ahead, const std::uint8_t* next, std::size_t next_bytes) {
  if constexpr (R <= 3) {
    (void)next, (void)next_bytes;
    micro_tile_avx2<R, 4, kFull>(a, t, w, 0, scale, c, ldc, cols, ahead);
  } else {
    SpreadPrefetch spread = next != nullptr ? SpreadPrefetch(next, next_bytes, 2 * a.blocks) : SpreadPrefetch{};
    for (int g = 0; 8 * g < cols; g += 2)
      micro_tile_avx2<R, 2, kFull>(a, t, w, g, scale, c, ldc, cols, g == 0 ? ahead : 0, next != nullptr ? &spread : nullptr);
  }
}
using TileGroups = void (*)(const ActTiles&, int, const std::uint8_t*, const float*, float*, std::size_t, int, int,
                           const std::uint8_t*, std::size_t);
template <bool kFull, std::size_t... I>
constexpr std::array<TileGroups, sizeof...(I)> avx2_tiles(std::index_sequence<I...>) {
  return {&tile_groups_avx2<static_cast<int>(I) + 1, kFull>...};
}
constexpr auto kFullTilesAvx2 = avx2_tiles<true>(std::make_index_sequence<kRows>{});
constexpr auto kNarrowTilesAvx2 = avx2_tiles<false>(std::make_index_sequence<kRows>{});
constexpr int kDecodeGroup = 1;  // panels per decode claim (panel_union): each panel alone

// As the VNNI run_panels: each panel over the whole depth; one row reads a panel front to back.
void run_panels(const ActTiles& a, const PackedPanelsInt8& pw, float* yall, int n, int p0, int p1) {
  const int out = pw.out, in = pw.in;
  const std::size_t pbytes = full_panel_bytes(in);
  const int ahead = decode_prefetch_bytes();
  for (int p = p0; p < p1; ++p) {
    const int cols = std::min(kCols, out - p * kCols);
    const std::uint8_t* w = pw.data.data() + static_cast<std::size_t>(p) * pbytes;
    const float* scale = pw.scale.data() + static_cast<std::size_t>(p) * kCols;
    float* y = yall + static_cast<std::size_t>(p) * kCols;
    if (n == 1) {
      if (cols == kCols) micro_tile_avx2<1, 4, true, kRowStepBytes>(a, 0, w, 0, scale, y, static_cast<std::size_t>(out), cols, ahead);
      else micro_tile_avx2<1, 4, false, kRowStepBytes>(a, 0, w, 0, scale, y, static_cast<std::size_t>(out), cols, ahead);
      continue;
    }
    const auto& tiles = cols == kCols ? kFullTilesAvx2 : kNarrowTilesAvx2;
    const std::uint8_t* next = p + 1 < p1 ? w + pbytes : nullptr;  // [in4 / 4][its cols][4] bytes
    const std::size_t next_bytes =
        next != nullptr ? static_cast<std::size_t>(round4(in)) * static_cast<std::size_t>(std::min(kCols, out - (p + 1) * kCols)) : 0;
    for (int r0 = 0, t = 0; r0 < n; r0 += kRows, ++t)
      tiles[static_cast<std::size_t>(std::min(kRows, n - r0) - 1)](a, t, w, scale, y + static_cast<std::size_t>(r0) * out,
                                                                   static_cast<std::size_t>(out), cols, t == 0 ? ahead : 0,
                                                                   t == 0 ? next : nullptr, next_bytes);
  }
}
#endif
}  // namespace

bool gemm_panels_int8_available() {
#if INFERLAB_GEMM_INT8_PANELS
  return true;
#else
  return false;
#endif
}

PackedPanelsInt8 pack_panels_int8(const std::int8_t* q, const float* scale, int out, int in) {
  check(gemm_panels_int8_available(), "pack_panels_int8: this build has neither AVX-512 VNNI nor AVX2 (use matmul_int8_act)");
  check(out > 0 && in > 0, "pack_panels_int8: out and in must be positive, got out=" + std::to_string(out) +
                               " in=" + std::to_string(in));
  PackedPanelsInt8 packed;
  packed.out = out;
  packed.in = in;
  packed.data.assign(static_cast<std::size_t>(out) * round4(in), kOffset);  // padding: code 0
  packed.scale.assign(scale, scale + out);
  for (int o = 0; o < out; ++o) {
    const int p = o / kCols, j = o % kCols, cols = std::min(kCols, out - p * kCols);
    std::uint8_t* panel = packed.data.data() + static_cast<std::size_t>(p) * full_panel_bytes(in);
    const std::int8_t* row = q + static_cast<std::size_t>(o) * in;
    for (int k = 0; k < in; ++k)
      panel[(static_cast<std::size_t>(k / 4) * cols + j) * 4 + k % 4] = static_cast<std::uint8_t>(row[k] + kOffset);
  }
  return packed;
}

void unpack_panel_row_int8(const PackedPanelsInt8& w, int row, float* out) {
  check(row >= 0 && row < w.out, "unpack_panel_row_int8: row " + std::to_string(row) + " outside [0, " +
                                     std::to_string(w.out) + ")");
  const int p = row / kCols, j = row % kCols, cols = std::min(kCols, w.out - p * kCols);
  const std::uint8_t* panel = w.data.data() + static_cast<std::size_t>(p) * full_panel_bytes(w.in);
  const float s = w.scale[static_cast<std::size_t>(row)];
  for (int k = 0; k < w.in; ++k)
    out[k] = s * static_cast<float>(panel[(static_cast<std::size_t>(k / 4) * cols + j) * 4 + k % 4] - kOffset);
}

std::uint64_t packed_bytes(const PackedPanelsInt8& w) {
  return w.data.size() + w.scale.size() * sizeof(float);
}

namespace {

#if INFERLAB_GEMM_INT8_AMX
// W8A8 prefill on the AMX tiles (kernels/cpu/amx_blocks.h, the GGUF blocks' machinery): a full
// panel's block of 32 inputs is [8 steps][32 channels][4] codes + 128, Q8_0's slot layout, so
// with the offset flipped off (an xor per byte, once per panel and thread) it is the tiles'
// weight operand, and the per-channel scale is applied at the store as micro_tile applies it:
// the same int32 sums folded the same way, the same bits. Whole panels only (out % 32 == 0: the
// narrow last panel's steps are cols * 4 bytes) and whole blocks (in % 32 == 0).
// From one token tile (16 rows). Before the next panel was prefetched during the tile products
// (amx_blocks::panel's SpreadPrefetch) the micro-tiles, which read the panel in place, were as
// fast or faster at 16 rows (1.06-1.09x the micro-tiles' time at TinyLlama's shapes); with it,
// TinyLlama W8A8's whole 16-row pass took 80.6 -> 71.8 ms on the tiles (2 threads, alternating,
// AMX Xeon, 2026-12-06).
// (kAmxBlocksMinRows, linear_plan.h; its plan asks out % 32 and in % 32.)
static_assert(kAmxBlocksMinRows == amx_blocks::kRows && kCols == 32 && kBlock == 32, "the plan's AMX W8A8 shape");

bool amx_blocks_fit(const PackedPanelsInt8& w, int n) {
  return plan_cpu_linear(CpuFormat::kW8A8, n, CpuLinearShape{.out = w.out, .in = w.in}, CpuIsa::host()) ==
         CpuKernel::kPanelsInt8Amx;
}

void amx_block_panels(const amx_blocks::Tokens& k, const PackedPanelsInt8& w, float* y, int p0, int p1) {
  amx_blocks::config().load();
  const std::size_t pbytes = full_panel_bytes(w.in);
  thread_local std::vector<std::uint8_t> signed_codes;  // one panel, [blocks][8][32][4]
  if (signed_codes.size() < pbytes) signed_codes.resize(pbytes);
  std::uint8_t* codes = signed_codes.data();
  for (int p = p0; p < p1; ++p) {
    const std::uint8_t* src = w.data.data() + static_cast<std::size_t>(p) * pbytes;
    for (std::size_t i = 0; i < pbytes; i += 64)
      _mm512_storeu_si512(codes + i, _mm512_xor_si512(_mm512_loadu_si512(src + i), _mm512_set1_epi8(static_cast<char>(0x80))));
    // GCC's tile loads are asm that names no memory operand: without this barrier the stores
    // above could be moved past the loads that read them.
    asm volatile("" ::: "memory");
    const amx_blocks::View v = amx_blocks::view(k, codes, std::size_t{kBlock} * kCols, nullptr,
                                                w.scale.data() + static_cast<std::size_t>(p) * kCols);
    // The next panel (this thread's next claim, as a rule) into L2 while this one computes.
    const SpreadPrefetch next = p + 1 < w.out / kCols ? SpreadPrefetch(src + pbytes, pbytes, amx_blocks::panel_steps(v)) : SpreadPrefetch{};
    amx_blocks::panel<false, true>(v, y + static_cast<std::size_t>(p) * kCols, static_cast<std::size_t>(w.out), kCols, next);
  }
}
#endif

#if INFERLAB_GEMM_INT8_PANELS
// Runs the group's panels (one parallel_for over their union, kernels/cpu/panel_union.h) over
// scale blocks of `block` inputs (a multiple of 4): xs [n][blocks] one scale per row and block;
// the activation tiles (kernels/cpu/act_tiles.h: codes interleaved, block sums) are made once
// for the group.
void run_gemm(const std::int8_t* xq, const float* xs, int block, std::span<const GemmPanelsInt8Output> group, int n,
              ThreadPool& pool) {
  const int in = group.front().w->in;
  thread_local std::vector<PanelSpan> spans;  // [members]
  spans.resize(group.size());
  for (std::size_t i = 0; i < group.size(); ++i) {
    const PackedPanelsInt8& w = *group[i].w;
    check(w.in == in, [&] {
      return "gemm_panels_int8_group: the matrices read one input, but their in differ (" + std::to_string(in) +
             " and " + std::to_string(w.in) + ")";
    });
    spans[i] = {(w.out + kCols - 1) / kCols, full_panel_bytes(in) + kCols * sizeof(float)};  // codes + scales
  }
  const ActTiles a = pack_act_tiles(xq, xs, n, in, block, false, pool);  // the caller's: thread_local
#if INFERLAB_GEMM_INT8_AMX
  const amx_blocks::Tokens* amx = nullptr;  // the AMX tiles' activations where some member runs on them
  thread_local amx_blocks::Tokens tokens;
  bool any_amx = false;
  for (const GemmPanelsInt8Output& m : group) any_amx = any_amx || (block == kBlock && amx_blocks_fit(*m.w, n));
  if (any_amx) {
    amx_blocks::make_tokens(a, xq, n, in, tokens, pool);
    amx = &tokens;
  }
#endif
  // Grain: panels of about 2^19 multiply-adds.
  const std::size_t per_panel = static_cast<std::size_t>(kCols) * static_cast<std::size_t>(in) *
                                static_cast<std::size_t>(n);
  const std::size_t grain = std::max<std::size_t>(1, (std::size_t{1} << 19) / per_panel);
  // Claims of a decode micro-tile's panels (each panel stands alone in the others).
  parallel_for_panel_union(spans, grain, kDecodeGroup, pool, [&](int member, int p0, int p1) {
    const GemmPanelsInt8Output& m = group[static_cast<std::size_t>(member)];
#if INFERLAB_GEMM_INT8_AMX
    if (amx != nullptr && amx_blocks_fit(*m.w, n)) return amx_block_panels(*amx, *m.w, m.y, p0, p1);
#endif
    run_panels(a, *m.w, m.y, n, p0, p1);
  });
}
#endif

#if INFERLAB_GEMM_INT8_AMX
// Per-token W8A8 on the AMX tile unit (kernels/cpu/amx.h). With one scale per token row the
// int32 sums run over the whole row, so a C tile accumulates every 64-input tile product of
// its row without a fold between them, and the vector work is one conversion and two
// multiplies per output at the end: the matrix unit, not the fold, sets the rate. A full
// panel's [in/4][32][4] bytes (codes + 128) are `tdpbsud`'s K x 16 operand for 16 channels
// as they are (16 steps of a half's 64-byte lines, 128 bytes apart), the token rows as
// quantize_act_rows wrote them its 16 x K signed one. Per pair of 16-row token tiles and panel:
// four C tiles (2 tiles x 2 halves) from two A and two B loads per 64 inputs. The result is
// micro_tile's: (float(sum - 128 Σx) * xs[r]) * scale[o], the same operations, the same bits.
constexpr int kAmxRows = 16;   // token rows per tile, channels per C tile
constexpr int kAmxDepth = 64;  // inputs per tile product

static_assert(kPerTokenAmxMinRows == kAmxRows && kAmxDepth == 64 && kTokenBlockMax == 65536, "the plan's per-token shape");

bool amx_per_token_fits(const PackedPanelsInt8& w, int n) {
  return plan_cpu_linear(CpuFormat::kW8A8PerToken, n, CpuLinearShape{.out = w.out, .in = w.in}, CpuIsa::host()) ==
         CpuKernel::kPerTokenAmx;
}

// C tile `sums` (16 token rows from `row0`, `rows` of them real, x 16 channels of half h of
// panel p) into y: (float(sum - 128 Σx) * xs) * scale, as micro_tile rounds it.
inline void amx_store(const std::int32_t (*sums)[16], const int* rowsum, const float* xs, const float* scale, float* y,
                      std::size_t ldc, int row0, int rows) {
  const __m512 sw = _mm512_loadu_ps(scale);
  for (int r = 0; r < rows; ++r) {
    const __m512i ci = _mm512_sub_epi32(_mm512_load_si512(sums[r]), _mm512_set1_epi32(128 * rowsum[row0 + r]));
    const __m512 f = _mm512_fmadd_ps(to_float(ci), _mm512_set1_ps(xs[row0 + r]), _mm512_setzero_ps());
    _mm512_storeu_ps(y + static_cast<std::size_t>(row0 + r) * ldc, _mm512_mul_ps(f, sw));
  }
}

void amx_per_token(const std::int8_t* xq, const float* xs, const PackedPanelsInt8& w, float* y, int n, ThreadPool& pool) {
  const int in = w.in, out = w.out, panels = out / kCols, tiles = (n + kAmxRows - 1) / kAmxRows;
  const std::size_t pbytes = full_panel_bytes(in);
  // The rows' code sums, and the last tile's rows copied into a zero-padded [16][in] block.
  thread_local std::vector<int> rowsum;
  thread_local std::vector<std::int8_t> tail;
  rowsum.assign(static_cast<std::size_t>(n), 0);
  for (int r = 0; r < n; ++r) {
    const std::int8_t* x = xq + static_cast<std::size_t>(r) * in;
    __m512i acc = _mm512_setzero_si512();
    for (int k = 0; k < in; k += 16)
      acc = _mm512_add_epi32(acc, _mm512_maskz_cvtepi8_epi32(kAll, _mm_loadu_si128(reinterpret_cast<const __m128i*>(x + k))));
    alignas(64) std::int32_t lanes[16];
    _mm512_store_si512(lanes, acc);
    int sum = 0;
    for (int l : lanes) sum += l;
    rowsum[static_cast<std::size_t>(r)] = sum;
  }
  const int full = n / kAmxRows * kAmxRows;
  if (full < n) {
    tail.assign(static_cast<std::size_t>(kAmxRows) * in, 0);
    std::memcpy(tail.data(), xq + static_cast<std::size_t>(full) * in, static_cast<std::size_t>(n - full) * in);
  }
  const int* sums_of_rows = rowsum.data();
  const std::int8_t* tail_rows = tail.data();
  auto rows_of = [&](int t) { return (t + 1) * kAmxRows <= n ? xq + static_cast<std::size_t>(t) * kAmxRows * in : tail_rows; };
  const auto lda = static_cast<long>(in);
  const std::size_t ldc = static_cast<std::size_t>(out);
  pool.parallel_for(static_cast<std::size_t>(panels), [&](std::size_t begin, std::size_t end) {
    // C tiles 0-3 (16 x 16 int32), A (tokens) 4, 5 and B (channels) 6, 7: 16 rows x 64 bytes.
    static_assert(kAmxRows == 16, "amx_full_tiles: 16-row tiles");
    amx_full_tiles().load();
    alignas(64) std::int32_t c[4][kAmxRows][16];
    for (auto p = static_cast<int>(begin); p < static_cast<int>(end); ++p) {
      const std::uint8_t* wp = w.data.data() + static_cast<std::size_t>(p) * pbytes;
      const float* scale = w.scale.data() + static_cast<std::size_t>(p) * kCols;
      float* yp = y + static_cast<std::size_t>(p) * kCols;
      int t = 0;
      for (; t + 1 < tiles; t += 2) {  // two token tiles: C 0, 1 (tile t, halves), 2, 3 (tile t + 1)
        const std::int8_t* a0 = rows_of(t);
        const std::int8_t* a1 = rows_of(t + 1);
        _tile_zero(0);
        _tile_zero(1);
        _tile_zero(2);
        _tile_zero(3);
        for (int k = 0; k < in; k += kAmxDepth) {
          const std::uint8_t* b = wp + static_cast<std::size_t>(k / 4) * kCols * 4;
          _tile_loadd(4, a0 + k, lda);
          _tile_loadd(5, a1 + k, lda);
          _tile_loadd(6, b, 128);
          _tile_loadd(7, b + 64, 128);
          _tile_dpbsud(0, 4, 6);
          _tile_dpbsud(1, 4, 7);
          _tile_dpbsud(2, 5, 6);
          _tile_dpbsud(3, 5, 7);
        }
        _tile_stored(0, c[0], 64);
        _tile_stored(1, c[1], 64);
        _tile_stored(2, c[2], 64);
        _tile_stored(3, c[3], 64);
        const int rows1 = std::min(kAmxRows, n - (t + 1) * kAmxRows);
        for (int h = 0; h < 2; ++h) {
          amx_store(c[h], sums_of_rows, xs, scale + 16 * h, yp + 16 * h, ldc, t * kAmxRows, kAmxRows);
          amx_store(c[2 + h], sums_of_rows, xs, scale + 16 * h, yp + 16 * h, ldc, (t + 1) * kAmxRows, rows1);
        }
      }
      if (t < tiles) {  // a last tile alone: C 0, 1
        const std::int8_t* a0 = rows_of(t);
        _tile_zero(0);
        _tile_zero(1);
        for (int k = 0; k < in; k += kAmxDepth) {
          const std::uint8_t* b = wp + static_cast<std::size_t>(k / 4) * kCols * 4;
          _tile_loadd(4, a0 + k, lda);
          _tile_loadd(6, b, 128);
          _tile_loadd(7, b + 64, 128);
          _tile_dpbsud(0, 4, 6);
          _tile_dpbsud(1, 4, 7);
        }
        _tile_stored(0, c[0], 64);
        _tile_stored(1, c[1], 64);
        const int rows0 = std::min(kAmxRows, n - t * kAmxRows);
        for (int h = 0; h < 2; ++h) amx_store(c[h], sums_of_rows, xs, scale + 16 * h, yp + 16 * h, ldc, t * kAmxRows, rows0);
      }
    }
  });
}
#endif

}  // namespace

void gemm_panels_int8(const std::int8_t* xq, const float* xs, const PackedPanelsInt8& w, float* y, int n,
                      ThreadPool& pool) {
  const GemmPanelsInt8Output one{&w, y};
  gemm_panels_int8_group(xq, xs, std::span<const GemmPanelsInt8Output>(&one, 1), n, pool);
}

void gemm_panels_int8_group(const std::int8_t* xq, const float* xs, std::span<const GemmPanelsInt8Output> group,
                            int n, ThreadPool& pool) {
  if (n <= 0 || group.empty()) return;
#if INFERLAB_GEMM_INT8_PANELS
  run_gemm(xq, xs, kBlock, group, n, pool);
#else
  (void)xq, (void)xs, (void)pool;
  check(false, "gemm_panels_int8: this build has neither AVX-512 VNNI nor AVX2 (use matmul_int8_act)");
#endif
}

void gemm_panels_int8_per_token(const std::int8_t* xq, const float* xs, const PackedPanelsInt8& w, float* y, int n,
                                ThreadPool& pool) {
  if (n <= 0 || w.out <= 0) return;
#if INFERLAB_GEMM_INT8_PANELS
#if INFERLAB_GEMM_INT8_AMX
  if (amx_per_token_fits(w, n)) return amx_per_token(xq, xs, w, y, n, pool);
#endif
  const GemmPanelsInt8Output one[] = {{&w, y}};
  const int in4 = round4(w.in);
  if (in4 <= kTokenBlockMax) {
    run_gemm(xq, xs, in4, one, n, pool);
    return;
  }
  // A row too long for one int32 sum: blocks of kTokenBlockMax inputs sharing the row's scale.
  const int blocks = (w.in + kTokenBlockMax - 1) / kTokenBlockMax;
  thread_local std::vector<float> spread;  // [n][blocks]
  spread.resize(static_cast<std::size_t>(n) * blocks);
  for (int r = 0; r < n; ++r)
    std::fill_n(spread.begin() + static_cast<std::ptrdiff_t>(r) * blocks, blocks, xs[r]);
  run_gemm(xq, spread.data(), kTokenBlockMax, one, n, pool);
#else
  (void)xq, (void)xs, (void)y, (void)pool;
  check(false, "gemm_panels_int8_per_token: this build has neither AVX-512 VNNI nor AVX2");
#endif
}

bool gemm_panels_int8_uses_amx(const PackedPanelsInt8& w, int n) {
#if INFERLAB_GEMM_INT8_AMX
  return amx_blocks_fit(w, n);
#else
  (void)w, (void)n;
  return false;
#endif
}

bool gemm_panels_int8_per_token_uses_amx(const PackedPanelsInt8& w, int n) {
#if INFERLAB_GEMM_INT8_AMX
  return amx_per_token_fits(w, n);
#else
  (void)w, (void)n;
  return false;
#endif
}

}  // namespace inferlab::cpu
