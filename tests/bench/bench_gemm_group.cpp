// One dispatch for the linears sharing an input (kernels/cpu/panel_union.h): a SmolLM2-135M
// decode layer's q/k/v and gate/up on GGUF Q8_0 / Q4_0 panels, run as the unfused model ran
// them before the groups (per linear: quantise x, gemm_gguf) and as it runs them now (x
// quantised once, gemm_gguf_group per group), alternating call by call in one process so the
// machine's noise hits both alike. 2 threads; `cold` weights (copies of 2x the last-level cache, at least 256 MiB: dram_stream_bytes, cycled) so
// they stream from DRAM as in a decode step.
//   ./inferlab_bench --benchmark_filter=gemm_group
// Counters: separate_us / grouped_us (median per layer: q/k/v + gate/up), grouped_gain = their
// ratio, separate_dispatches / grouped_dispatches per layer, *_gbs = the layer's bytes / time.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <vector>

#include "inferlab/huge_pages.h"
#include "inferlab/support/rng.h"
#include "inferlab/thread_pool.h"
#include "kernels/cpu/gemm_gguf.h"
#include "kernels/cpu/matmul_int8_act.h"
#include "tests/support/gguf_block_fixtures.h"

namespace {

using namespace inferlab;
using Clock = std::chrono::steady_clock;

constexpr int kDim = 576, kKv = 192, kHidden = 1536;  // SmolLM2-135M
constexpr int kOuts[] = {kDim, kKv, kKv, kHidden, kHidden};  // wq, wk, wv, w1, w3

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

void gemm_group(benchmark::State& state) {
  if (!cpu::gemm_gguf_available()) {
    state.SkipWithError("this build has no AVX-512 VNNI");
    return;
  }
  const auto type = static_cast<GgmlType>(state.range(0));
  std::vector<std::vector<float>> ys;  // one output per linear, [kOuts[i]]
  for (int out : kOuts) ys.emplace_back(static_cast<std::size_t>(out));
  std::vector<cpu::PackedGguf> first;
  std::uint64_t layer_bytes = 0;
  for (int i = 0; i < 5; ++i) {
    first.push_back(cpu::pack_gguf(type, testing::random_gguf_blocks(type, kOuts[i], kDim, 10 + i), kOuts[i], kDim));
    layer_bytes += cpu::packed_bytes(first.back());
  }
  const int copies = static_cast<int>(dram_stream_bytes() / layer_bytes) + 1;
  std::vector<std::vector<cpu::PackedGguf>> layers(static_cast<std::size_t>(copies), first);  // [copies][5]
  Rng rng(3);
  std::vector<float> x(kDim);  // [1, dim]: one decode row
  for (float& v : x) v = static_cast<float>(rng.normal());
  std::vector<std::int8_t> xq(kDim);
  std::vector<float> xs(kDim / 32);
  ThreadPool pool(2);
  auto separate = [&](const std::vector<cpu::PackedGguf>& layer) {
    for (int i = 0; i < 5; ++i) {
      cpu::quantize_act_rows(x.data(), 1, kDim, xq.data(), xs.data(), pool);
      cpu::gemm_gguf(xq.data(), xs.data(), layer[static_cast<std::size_t>(i)], ys[static_cast<std::size_t>(i)].data(), 1, pool);
    }
  };
  auto grouped = [&](const std::vector<cpu::PackedGguf>& layer) {
    cpu::GemmGgufOutput out[5];
    for (int i = 0; i < 5; ++i) out[i] = {&layer[static_cast<std::size_t>(i)], ys[static_cast<std::size_t>(i)].data()};
    cpu::quantize_act_rows(x.data(), 1, kDim, xq.data(), xs.data(), pool);
    cpu::gemm_gguf_group(xq.data(), xs.data(), std::span<const cpu::GemmGgufOutput>(out, 3), 1, pool);
    cpu::quantize_act_rows(x.data(), 1, kDim, xq.data(), xs.data(), pool);
    cpu::gemm_gguf_group(xq.data(), xs.data(), std::span<const cpu::GemmGgufOutput>(out + 3, 2), 1, pool);
  };
  std::vector<double> t_sep, t_grp;
  double d_sep = 0, d_grp = 0;
  int c = 0;
  for (auto _ : state) {
    for (int rep = 0; rep < copies; ++rep, c = (c + 1) % copies) {
      const auto& layer = layers[static_cast<std::size_t>(c)];
      const auto& next = layers[static_cast<std::size_t>((c + copies / 2) % copies)];  // another copy: cold too
      std::uint64_t d0 = pool.dispatches();
      auto t0 = Clock::now();
      separate(layer);
      t_sep.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      d_sep = static_cast<double>(pool.dispatches() - d0);
      d0 = pool.dispatches();
      t0 = Clock::now();
      grouped(next);
      t_grp.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
      d_grp = static_cast<double>(pool.dispatches() - d0);
    }
  }
  const double s = median(t_sep), g = median(t_grp);
  state.counters["separate_us"] = s * 1e6;
  state.counters["grouped_us"] = g * 1e6;
  state.counters["grouped_gain"] = s / g;
  state.counters["separate_dispatches"] = d_sep;
  state.counters["grouped_dispatches"] = d_grp;
  state.counters["separate_gbs"] = static_cast<double>(layer_bytes) / s * 1e-9;
  state.counters["grouped_gbs"] = static_cast<double>(layer_bytes) / g * 1e-9;
}
BENCHMARK(gemm_group)
    ->Arg(static_cast<int>(GgmlType::kQ8_0))
    ->Arg(static_cast<int>(GgmlType::kQ4_0))
    ->Iterations(20)
    ->Unit(benchmark::kMillisecond);

}  // namespace
