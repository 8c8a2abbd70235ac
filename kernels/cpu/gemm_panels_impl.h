// The packed-panel GEMM's algorithm (layout, blocking, micro-kernels: gemm_panels_f32.h), for
// any weight element type: Load::Storage is how a weight is stored (float, the 16-bit f16 /
// bf16 of gemm_panels_half.h, or the int8 codes of gemm_panels_w8.h) and Load::load widens
// Vec::kWidth of them to one fp32 vector, so the arithmetic (fp32 FMAs, fixed summation order)
// is the same for every type. Internal to kernels/cpu: included by gemm_panels_f32.cpp,
// gemm_panels_half.cpp and gemm_panels_w8.cpp only.
#pragma once
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "inferlab/error.h"
#include "inferlab/thread_pool.h"
#include "kernels/cpu/decode_prefetch.h"
#include "kernels/cpu/gemm_vec.h"
#include "kernels/cpu/panel_union.h"

namespace inferlab::cpu::gemm {

// Input channels per cache block: a [kDepth][kPanel] weight block is 32 KiB with AVX-512.
constexpr int kDepth = 256;

// c[rows, cols] (row stride ldc) = (accumulate ? c : 0) + a · b over kc input channels.
// a: [kc][R] (one row tile of packed x), b: [kc][kPanel] (one weight block), prefetched `ahead`
// bytes on (few_rows' streams; 0 for prefill, whose blocks are reused from L2 by every tile).
template <class Load, int R>
void micro_tile(const float* a, const typename Load::Storage* b, int kc, float* c, std::size_t ldc, int cols, bool accumulate,
                int ahead) {
  typename Vec::V acc[R][kVectors];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) acc[r][v] = Vec::zero();
  // Branch-free: with ahead = 0 each step prefetches its own line (a load-port uop, no traffic).
  // A branch on ahead in the loop made GCC 12 keep R = 8's 16 accumulators on the stack.
  const auto* pf = reinterpret_cast<const std::uint8_t*>(b) + (ahead > 0 ? ahead : 0);
  constexpr std::size_t kStepBytes = kPanel * sizeof(typename Load::Storage);
  for (int k = 0; k < kc; ++k) {
    typename Vec::V bv[kVectors];
#pragma GCC unroll 2
    for (std::size_t l = 0; l < kStepBytes; l += 64) prefetch_line(pf + k * kStepBytes + l);
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) bv[v] = Load::load(b + k * kPanel + v * Vec::kWidth);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const typename Vec::V av = Vec::broadcast(a[k * R + r]);
#pragma GCC unroll 4
      for (int v = 0; v < kVectors; ++v) acc[r][v] = Vec::fmadd(av, bv[v], acc[r][v]);
    }
  }
  // Constant indices (unrolled) keep acc in registers: with a loop over r here GCC 12 also kept
  // acc on the stack and stored all of it every step (16 zmm stores per step at R = 8: the 8-row
  // f16 pass store-bound at 2.2x a one-row pass).
  if (cols == kPanel) {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
      for (int v = 0; v < kVectors; ++v) {
        float* p = c + r * ldc + v * Vec::kWidth;
        Vec::store(p, accumulate ? Vec::add(Vec::load(p), acc[r][v]) : acc[r][v]);
      }
    return;
  }
  alignas(64) float tile[R][kPanel];  // the narrow last panel: spill, then write cols columns
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int v = 0; v < kVectors; ++v) Vec::store(&tile[r][v * Vec::kWidth], acc[r][v]);
  for (int r = 0; r < R; ++r)
    for (int j = 0; j < cols; ++j) c[r * ldc + j] = (accumulate ? c[r * ldc + j] : 0.0f) + tile[r][j];
}

template <class Load>
using MicroTile = void (*)(const float*, const typename Load::Storage*, int, float*, std::size_t, int, bool, int);

template <class Load, std::size_t... I>
constexpr std::array<MicroTile<Load>, sizeof...(I)> micro_tiles(std::index_sequence<I...>) {
  return {&micro_tile<Load, static_cast<int>(I) + 1>...};
}
// kMicroTiles<Load>[rows - 1]: the micro-kernel for a tile of `rows` token rows (the last tile
// may be short).
template <class Load>
constexpr auto kMicroTiles = micro_tiles<Load>(std::make_index_sequence<kRows>{});

// Packed x: tile t (rows [t * kRows, t * kRows + rows)) is [in][rows] from t * kRows * in.
inline void pack_rows(const float* x, int n, int in, float* packed, ThreadPool& pool) {
  const int tiles = (n + kRows - 1) / kRows;
  pool.parallel_for(static_cast<std::size_t>(tiles), [&](std::size_t t0, std::size_t t1) {
    for (std::size_t t = t0; t < t1; ++t) {
      const int r0 = static_cast<int>(t) * kRows, rows = std::min(kRows, n - r0);
      float* dst = packed + static_cast<std::size_t>(r0) * in;
      for (int r = 0; r < rows; ++r) {
        const float* src = x + static_cast<std::size_t>(r0 + r) * in;
        for (int k = 0; k < in; ++k) dst[static_cast<std::size_t>(k) * rows + r] = src[k];
      }
    }
  }, std::max<std::size_t>(1, 16384 / (static_cast<std::size_t>(kRows) * std::max(in, 1))));
}

template <class Load>
struct Problem {
  const float* a;                       // packed x
  const typename Load::Storage* w;      // W [out, in] in panels
  int out, in;
  float* y;
  int n, tiles;
  int ahead = 0;  // few_rows' software prefetch distance (decode_prefetch.h)
};

// All row tiles against weight block [k0, k0 + kc) of panel p.
template <class Load>
void block_times_rows(const Problem<Load>& pb, int p, int k0, int kc, int ahead = 0) {
  using S = typename Load::Storage;
  const int out = pb.out, in = pb.in, cols = std::min(kPanel, out - p * kPanel);
  const S* b = pb.w + static_cast<std::size_t>(p) * kPanel * in + static_cast<std::size_t>(k0) * cols;
  alignas(64) S padded[kDepth * kPanel];
  if (cols < kPanel) {  // the narrow last panel: widen the block to kPanel columns of zeros
    for (int k = 0; k < kc; ++k) {
      std::memcpy(padded + k * kPanel, b + static_cast<std::size_t>(k) * cols, sizeof(S) * cols);
      std::fill(padded + k * kPanel + cols, padded + (k + 1) * kPanel, S{0});  // +0 in every format
    }
    b = padded;
  }
  for (int t = 0; t < pb.tiles; ++t) {
    const int r0 = t * kRows, rows = std::min(kRows, pb.n - r0);
    const float* a = pb.a + static_cast<std::size_t>(r0) * in + static_cast<std::size_t>(k0) * rows;
    float* c = pb.y + static_cast<std::size_t>(r0) * out + static_cast<std::size_t>(p) * kPanel;
    kMicroTiles<Load>[static_cast<std::size_t>(rows - 1)](a, b, kc, c, static_cast<std::size_t>(out), cols, k0 > 0, t == 0 ? ahead : 0);
  }
}

// Full panels one row tile of `rows` token rows meets at once (few_rows below): one panel's
// kVectors chains per row would leave a thread one weight stream and, at one row, the kernel
// FMA-latency bound when W is in cache; several panels give it more streams and chains. As many
// as the accumulators (rows x panels x kVectors), the panels' weight vectors and a broadcast
// leave registers for (32 zmm, 16 ymm), at most 4; decode (one row) takes kGroup.
constexpr int kGroup = 4;
constexpr int group_panels(int rows) {
  if (rows <= 1) return kGroup;
  const int registers = kRows == 8 ? 32 : 16;  // AVX-512 / AVX2 (the scalar build: 1 panel)
  if (Vec::kWidth == 1) return 1;
  const int g = (registers - 1) / (kVectors * (rows + 1));
  return g < 1 ? 1 : g > kGroup ? kGroup : g;
}

// R token rows (one row tile, packed [in][R]; one row: x itself) against G full panels at once,
// weight block [k0, k0 + kc): per output the same arithmetic as micro_tile<R> (FMAs in k order
// within the block, the block added to what y holds), so a row's bits do not depend on how many
// rows or panels share its pass. Each panel's stream is prefetched pb.ahead bytes on
// (decode_prefetch.h): TinyLlama's f16 / bf16 one-row pass 72 -> 64.5 ms and 4-row cost 1.24-1.39
// -> 1.08-1.12x with it (AMX Xeon, 2026-12-06).
template <class Load, int R, int G>
void rows_times_panel_group(const Problem<Load>& pb, int p, int k0, int kc) {
  const int in = pb.in;
  const typename Load::Storage* b = pb.w + static_cast<std::size_t>(p) * kPanel * in + static_cast<std::size_t>(k0) * kPanel;
  const std::size_t stride = static_cast<std::size_t>(kPanel) * in;  // panel to panel
  const float* a = pb.a + static_cast<std::size_t>(k0) * R;
  typename Vec::V acc[R][G][kVectors];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g)
#pragma GCC unroll 4
      for (int v = 0; v < kVectors; ++v) acc[r][g][v] = Vec::zero();
  const int ahead = pb.ahead;
  for (int k = 0; k < kc; ++k) {
    typename Vec::V bv[G][kVectors];
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g) prefetch_ahead(b + g * stride + k * kPanel, kPanel * sizeof(typename Load::Storage), ahead);
    if constexpr (R == 1) {
      // One row: each vector into its FMA as it is loaded. Loaded all first, an int8 group's 8
      // widened vectors and 8 sums took 17 ymm on AVX2, and the spilled sum's store and reload
      // sat in the loop's dependency chain (W8A16 decode, 1536 x 576 x 150 streamed, one thread,
      // Zen 3, 2026-12-07, alternating: 10.6 -> 7.6 ms; f16 level, 11.4).
      const typename Vec::V av = Vec::broadcast(a[k]);
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g)
#pragma GCC unroll 4
        for (int v = 0; v < kVectors; ++v)
          acc[0][g][v] = Vec::fmadd(av, Load::load(b + g * stride + k * kPanel + v * Vec::kWidth), acc[0][g][v]);
      continue;
    }
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g)
#pragma GCC unroll 4
      for (int v = 0; v < kVectors; ++v) bv[g][v] = Load::load(b + g * stride + k * kPanel + v * Vec::kWidth);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const typename Vec::V av = Vec::broadcast(a[k * R + r]);
#pragma GCC unroll 4
      for (int g = 0; g < G; ++g)
#pragma GCC unroll 4
        for (int v = 0; v < kVectors; ++v) acc[r][g][v] = Vec::fmadd(av, bv[g][v], acc[r][g][v]);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 4
    for (int g = 0; g < G; ++g)
#pragma GCC unroll 4
      for (int v = 0; v < kVectors; ++v) {
        float* c = pb.y + static_cast<std::size_t>(r) * pb.out + static_cast<std::size_t>(p + g) * kPanel + v * Vec::kWidth;
        Vec::store(c, k0 > 0 ? Vec::add(Vec::load(c), acc[r][g][v]) : acc[r][g][v]);
      }
}

// Panels [p0, p1) for one row tile of R rows (decode, speculative verification, a few
// sequences): each panel streamed once from start to end, group_panels(R) full panels at a
// time, the narrow last panel (and a short remainder) one at a time.
template <class Load, int R>
void few_rows(const Problem<Load>& pb, int p0, int p1) {
  constexpr int G = group_panels(R);
  const int in = pb.in;
  const int full = std::min(p1, pb.out / kPanel);  // panels of kPanel columns
  int p = p0;
  if constexpr (G > 1)
    for (; p + G <= full; p += G)
      for (int k0 = 0; k0 < in; k0 += kDepth) rows_times_panel_group<Load, R, G>(pb, p, k0, std::min(kDepth, in - k0));
  for (; p < p1; ++p)
    for (int k0 = 0; k0 < in; k0 += kDepth) block_times_rows(pb, p, k0, std::min(kDepth, in - k0), pb.ahead);
}

template <class Load>
using FewRows = void (*)(const Problem<Load>&, int, int);
template <class Load, std::size_t... I>
constexpr std::array<FewRows<Load>, sizeof...(I)> few_rows_table(std::index_sequence<I...>) {
  return {&few_rows<Load, static_cast<int>(I) + 1>...};
}

// Panels [p0, p1). One row tile (decode, small batches): few_rows. Up to kStreamTiles: each panel
// from start to end (its blocks in k order, every tile per block), so the stream the first tile
// prefetches is the one read next (TinyLlama 12-row passes, AMX Xeon, 2026-12-06: see
// docs/performance.md). More: blocks of kDepth input channels outermost, so the row tiles' slice
// of x (n x kDepth) stays in L2 while the thread's panels pass. Same arithmetic every way: per
// output, FMAs in k order within a block, blocks added in k order.
constexpr int kStreamTiles = 2;
template <class Load>
void run_panels(const Problem<Load>& pb, int p0, int p1) {
  const int in = pb.in;
  if (pb.tiles == 1) {
    static constexpr auto kFewRows = few_rows_table<Load>(std::make_index_sequence<kRows>{});
    kFewRows[static_cast<std::size_t>(pb.n - 1)](pb, p0, p1);
    return;
  }
  if (pb.tiles <= kStreamTiles) {  // each panel streamed once, front to back, prefetched by tile 0
    for (int p = p0; p < p1; ++p)
      for (int k0 = 0; k0 < in; k0 += kDepth) block_times_rows(pb, p, k0, std::min(kDepth, in - k0), pb.ahead);
    return;
  }
  // Each block's first tile prefetches the block the next panel brings at this depth (a panel's
  // bytes on: block_times_rows' `ahead`; a full next panel's), which no hardware prefetcher guesses: 16-row f16 passes
  // 0.88x the time without it, 32 rows 0.94x, 128 rows 0.98x, same bits (5632 x 2048 x4 streamed,
  // 2 threads, Zen 3, 2026-12-07, in-process alternating, 30 pairs; an A/A of one build 1.00).
  const int next_panel = static_cast<int>(static_cast<std::size_t>(kPanel) * in * sizeof(typename Load::Storage));
  for (int k0 = 0; k0 < in; k0 += kDepth)
    for (int p = p0; p < p1; ++p) block_times_rows(pb, p, k0, std::min(kDepth, in - k0), p + 1 < p1 && (p + 2) * kPanel <= pb.out ? next_panel : 0);
}

// One matrix of a group reading the same x: W [out, in] in panels of Load::Storage, y [n, out].
template <class Load>
struct GroupOutput {
  const typename Load::Storage* w;
  int out;
  float* y;
};

// Every member's y[n, out] = x[n, in] · W^T (see gemm_panels_f32.h), x packed once and the union
// of the members' panels run as one parallel_for (kernels/cpu/panel_union.h); each output is
// summed as a lone gemm_panels call sums it.
template <class Load>
void gemm_panels_group(const float* x, std::span<const GroupOutput<Load>> group, int in, int n, ThreadPool& pool) {
  if (n <= 0 || group.empty()) return;
  const int tiles = (n + kRows - 1) / kRows;
  const float* a = x;  // one row: [in][1] is x itself
  const int ahead = decode_prefetch_bytes();
  thread_local std::vector<float> packed_x;  // reused across calls: no page faults per call
  if (n > 1) {
    packed_x.resize(std::max(packed_x.size(), static_cast<std::size_t>(n) * in));
    pack_rows(x, n, in, packed_x.data(), pool);
    a = packed_x.data();
  }
  thread_local std::vector<PanelSpan> spans;  // [members]
  spans.resize(group.size());
  for (std::size_t i = 0; i < group.size(); ++i)
    spans[i] = {(std::max(group[i].out, 0) + kPanel - 1) / kPanel,
                static_cast<std::size_t>(kPanel) * static_cast<std::size_t>(in) * sizeof(typename Load::Storage)};
  // A run should carry at least ~256K multiply-adds so the dispatch cost stays small.
  const std::size_t per_panel = static_cast<std::size_t>(kPanel) * static_cast<std::size_t>(in) *
                                static_cast<std::size_t>(n);
  const std::size_t grain = std::max<std::size_t>(1, (std::size_t{1} << 18) / per_panel);
  // One row tile claims a few_rows group's panels at a time; larger prefills run whole shares
  // (their depth blocks span the share's panels).
  parallel_for_panel_union(spans, grain, tiles == 1 ? static_cast<std::size_t>(group_panels(n)) : 0, pool,
                           [&](int member, int p0, int p1) {
    const GroupOutput<Load>& m = group[static_cast<std::size_t>(member)];
    run_panels(Problem<Load>{a, m.w, m.out, in, m.y, n, tiles, ahead}, p0, p1);
  });
}

// A public group call's members (each with w->data, w->out, w->in and y: GemmPanelsF32Output,
// GemmPanelsW8Output) checked to read one input and run as gemm_panels_group; `who` names the
// call in the error.
template <class Load, class Output>
void gemm_panels_outputs(const char* who, const float* x, std::span<const Output> group, int n, ThreadPool& pool) {
  if (group.empty()) return;
  const int in = group.front().w->in;
  thread_local std::vector<GroupOutput<Load>> members;
  members.clear();
  for (const Output& m : group) {
    check(m.w->in == in, [&] {
      return std::string(who) + ": the matrices read one input, but their in differ (" + std::to_string(in) + " and " +
             std::to_string(m.w->in) + ")";
    });
    members.push_back({m.w->data.data(), m.w->out, m.y});
  }
  gemm_panels_group<Load>(x, members, in, n, pool);
}

// y[n, out] = x[n, in] · W^T for W in panels of Load::Storage: the group of one.
template <class Load>
void gemm_panels(const float* x, const typename Load::Storage* w, int out, int in, float* y, int n, ThreadPool& pool) {
  const GroupOutput<Load> one{w, out, y};
  gemm_panels_group<Load>(x, std::span<const GroupOutput<Load>>(&one, 1), in, n, pool);
}

// W [out, in] row-major -> panels (the layout of gemm_panels_f32.h), any element type.
template <class S>
void pack_panels(const S* w, int out, int in, S* dst_all) {
  for (int p0 = 0; p0 < out; p0 += kPanel) {
    const int cols = std::min(kPanel, out - p0);
    S* dst = dst_all + static_cast<std::size_t>(p0) * in;
    for (int j = 0; j < cols; ++j) {
      const S* row = w + static_cast<std::size_t>(p0 + j) * in;
      for (int k = 0; k < in; ++k) dst[static_cast<std::size_t>(k) * cols + j] = row[k];
    }
  }
}

// Row `row` of panels back in row-major order, each value through widen (S -> the dst type).
template <class S, class D, class Widen>
void unpack_panel_row(const S* panels, int out, int in, int row, D* dst, Widen widen) {
  const int p0 = row / kPanel * kPanel, cols = std::min(kPanel, out - p0), j = row - p0;
  const S* panel = panels + static_cast<std::size_t>(p0) * in;
  for (int k = 0; k < in; ++k) dst[k] = widen(panel[static_cast<std::size_t>(k) * cols + j]);
}

}  // namespace inferlab::cpu::gemm
