// Prefill GEMM benchmarks: the machine's measured compute peaks (Peak*), then the packed-panel
// GEMMs (kernels/cpu/gemm_panels_f32.h, gemm_panels_half.h, gemm_panels_int8.h) against the
// row-major kernels they replace in FloatLinear (matmul_f32) and the
// W8A8 Int8Linear (matmul_int8_act: since 2026-12-07 only the portable loop, for builds without AVX2), and the per-token W8A8 of SmoothQuant (GemmPanelsInt8PerToken), at SmolLM2-135M
// and TinyLlama-1.1B linear shapes for n in {1, 8, 128, 512} token rows, on the shared pool
// (all hardware threads).
//   inferlab_bench --benchmark_filter='Peak|GemmPanels|RowMajor'
// Counters: GFLOP/s (2 * n * out * in per call; for int8, integer ops), weight_GB/s (bytes of
// weights per call: the roofline at n = 1), peak_fraction (over the measured fp32 FMA or int8
// dot peak of as many threads as the pool has: PeakFma / PeakInt8Dot at threads:N; the per-token
// W8A8's rows on the AMX tiles against PeakInt8Amx).
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "bench_support.h"
#include "kernels/cpu/amx.h"
#include "kernels/cpu/gemm_amx_bf16.h"
#include "kernels/cpu/gemm_panels_f32.h"
#include "kernels/cpu/gemm_panels_half.h"
#include "kernels/cpu/gemm_panels_int8.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_int8_act.h"
#include "kernels/cpu/peak_probe.h"
#include "kernels/ref/half.h"
#include "kernels/ref/matmul_int8.h"

namespace {

using inferlab::bench::pool;
using inferlab::bench::random_vector;


double fma_peak_gflops() {
  static const double peak = inferlab::cpu::measure_fma_peak(pool().size()).ops_per_second * 1e-9;
  return peak;
}
double amx_peak_gops() {
  static const double peak = inferlab::cpu::measure_amx_int8_peak(pool().size()).ops_per_second * 1e-9;
  return peak;
}
double int8_peak_gops() {
  static const double peak = inferlab::cpu::measure_int8_dot_peak(pool().size()).ops_per_second * 1e-9;
  return peak;
}

void peak(benchmark::State& state, inferlab::cpu::Peak (*probe)(int)) {
  const int threads = static_cast<int>(state.range(0));
  inferlab::cpu::Peak p;
  for (auto _ : state) p = probe(threads);
  state.counters["Gop/s"] = p.ops_per_second * 1e-9;
  state.counters["per_thread_Gop/s"] = p.ops_per_second * 1e-9 / threads;
  state.SetLabel(p.instruction);
}
void BM_PeakFma(benchmark::State& state) { peak(state, inferlab::cpu::measure_fma_peak); }
void BM_PeakInt8Dot(benchmark::State& state) { peak(state, inferlab::cpu::measure_int8_dot_peak); }
void BM_PeakInt8Amx(benchmark::State& state) { peak(state, inferlab::cpu::measure_amx_int8_peak); }
BENCHMARK(BM_PeakFma)->ArgName("threads")->Arg(1)->Arg(2)->Iterations(3)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_PeakInt8Dot)->ArgName("threads")->Arg(1)->Arg(2)->Iterations(3)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_PeakInt8Amx)->ArgName("threads")->Arg(1)->Arg(2)->Iterations(3)->Unit(benchmark::kMillisecond)->UseRealTime();

// One warm-up call, then the timed calls of `call` (which writes y).
template <typename Call>
void time_calls(benchmark::State& state, const Call& call, float* y) {
  call();
  for (auto _ : state) {
    call();
    benchmark::DoNotOptimize(y);
    benchmark::ClobberMemory();
  }
}

void set_counters(benchmark::State& state, int n, int out, int in, double weight_bytes = 0.0, double peak = 0.0) {
  const double flops = 2.0 * n * out * in, bytes = weight_bytes > 0 ? weight_bytes : 4.0 * out * in;
  if (peak <= 0) peak = fma_peak_gflops();
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["weight_GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["peak_fraction"] =
      benchmark::Counter(flops * 1e-9 / peak, benchmark::Counter::kIsIterationInvariantRate);
}

// x [n, in] and W [out, in] for args (n rows, out features, in features).
struct F32Problem {
  int n, out, in;
  std::vector<float> x, w, y;
  explicit F32Problem(const benchmark::State& state)
      : n(static_cast<int>(state.range(0))), out(static_cast<int>(state.range(1))), in(static_cast<int>(state.range(2))),
        x(random_vector(static_cast<std::size_t>(n) * in, 1)), w(random_vector(static_cast<std::size_t>(out) * in, 2)),
        y(static_cast<std::size_t>(n) * out) {}
};

void BM_GemmPanelsF32(benchmark::State& state) {
  F32Problem p(state);
  const auto packed = inferlab::cpu::pack_panels_f32(p.w.data(), p.out, p.in);
  time_calls(state, [&] { inferlab::cpu::gemm_panels_f32(p.x.data(), packed, p.y.data(), p.n, pool()); }, p.y.data());
  set_counters(state, p.n, p.out, p.in);
}

void BM_MatmulRowMajorF32(benchmark::State& state) {
  F32Problem p(state);
  time_calls(state, [&] { inferlab::cpu::matmul_f32(p.x.data(), p.w.data(), p.y.data(), p.n, p.out, p.in, pool()); },
             p.y.data());
  set_counters(state, p.n, p.out, p.in);
}

// f16 weights (2 bytes each; the roofline's bytes at n = 1).
std::vector<std::uint16_t> to_f16(const std::vector<float>& w) {
  std::vector<std::uint16_t> h(w.size());
  for (std::size_t i = 0; i < w.size(); ++i) h[i] = inferlab::ref::float_to_f16(w[i]);
  return h;
}

void BM_GemmPanelsF16(benchmark::State& state) {
  F32Problem p(state);
  const auto h = to_f16(p.w);
  const auto packed = inferlab::cpu::pack_panels_half(h.data(), p.out, p.in, inferlab::cpu::HalfFormat::kF16);
  time_calls(state, [&] { inferlab::cpu::gemm_panels_half(p.x.data(), packed, p.y.data(), p.n, pool()); }, p.y.data());
  set_counters(state, p.n, p.out, p.in, 2.0 * p.out * p.in);
}

// The AMX bf16 tiles of HalfLinear's prefill (gemm_amx_bf16.h): f16 weights as two bf16 terms
// and x split (amx = split, f16's default), bf16 weights with x split (bf16's default) or rounded
// once (amx = bf16). peak_fraction is over the fp32 FMA peak, as for GemmPanelsF16.
template <inferlab::cpu::HalfFormat F, int XTerms>
void BM_GemmAmxHalf(benchmark::State& state) {
  if (!inferlab::cpu::amx_bf16_enabled()) {
    state.SkipWithError("the AMX bf16 tiles do not run here");
    return;
  }
  F32Problem p(state);
  std::vector<std::uint16_t> h(p.w.size());
  for (std::size_t i = 0; i < h.size(); ++i)
    h[i] = F == inferlab::cpu::HalfFormat::kF16 ? inferlab::ref::float_to_f16(p.w[i]) : inferlab::ref::float_to_bf16(p.w[i]);
  const int w_terms = F == inferlab::cpu::HalfFormat::kF16 && XTerms == 2 ? 2 : 1;
  const auto packed = inferlab::cpu::pack_amx_bf16(h.data(), p.out, p.in, F, w_terms);
  time_calls(state, [&] { inferlab::cpu::gemm_amx_bf16(p.x.data(), packed, XTerms, p.y.data(), p.n, pool()); }, p.y.data());
  set_counters(state, p.n, p.out, p.in, 2.0 * w_terms * p.out * p.in);
}
void BM_GemmAmxF16Split(benchmark::State& state) { BM_GemmAmxHalf<inferlab::cpu::HalfFormat::kF16, 2>(state); }
void BM_GemmAmxBf16Split(benchmark::State& state) { BM_GemmAmxHalf<inferlab::cpu::HalfFormat::kBF16, 2>(state); }
void BM_GemmAmxBf16Rounded(benchmark::State& state) { BM_GemmAmxHalf<inferlab::cpu::HalfFormat::kBF16, 1>(state); }

// W8A8: activations quantised per 32-block outside the timed loop (both kernels take them).
struct Int8Problem {
  int n, out, in;
  std::vector<std::int8_t> q, xq;  // [out, in], [n, in]
  std::vector<float> scale, xs;    // [out], [n, act_blocks(in)]
  std::vector<float> y;            // [n, out]
  explicit Int8Problem(const benchmark::State& state)
      : n(static_cast<int>(state.range(0))), out(static_cast<int>(state.range(1))), in(static_cast<int>(state.range(2))) {
    const auto w = random_vector(static_cast<std::size_t>(out) * in, 2);
    const auto x = random_vector(static_cast<std::size_t>(n) * in, 1);
    q.resize(w.size());
    scale.resize(static_cast<std::size_t>(out));
    xq.resize(x.size());
    xs.resize(static_cast<std::size_t>(n) * inferlab::ref::act_blocks(in));
    y.resize(static_cast<std::size_t>(n) * out);
    inferlab::ref::quantize_int8_rows(w.data(), out, in, q.data(), scale.data());
    inferlab::ref::quantize_act_rows(x.data(), n, in, xq.data(), xs.data());
  }
};

void BM_GemmPanelsInt8(benchmark::State& state) {
  if (!inferlab::cpu::gemm_panels_int8_available()) {
    state.SkipWithError("this build has no AVX-512 VNNI");
    return;
  }
  Int8Problem p(state);
  const auto packed = inferlab::cpu::pack_panels_int8(p.q.data(), p.scale.data(), p.out, p.in);
  time_calls(state, [&] { inferlab::cpu::gemm_panels_int8(p.xq.data(), p.xs.data(), packed, p.y.data(), p.n, pool()); },
             p.y.data());
  // The AMX tiles' rows (kernels/cpu/amx_blocks.h) count against the tile unit's peak.
  const bool amx = inferlab::cpu::gemm_panels_int8_uses_amx(packed, p.n);
  set_counters(state, p.n, p.out, p.in, static_cast<double>(inferlab::cpu::packed_bytes(packed)),
               amx ? amx_peak_gops() : int8_peak_gops());
  state.SetLabel(amx ? "amx" : "vnni");
}
// The same with the AMX tiles switched off: the VNNI micro-tiles beside them in one run.
void BM_GemmPanelsInt8Vnni(benchmark::State& state) {
  const bool was = inferlab::cpu::set_amx_int8(false);
  BM_GemmPanelsInt8(state);
  inferlab::cpu::set_amx_int8(was);
}

// The same weights against per-token activations (SmoothQuant's W8A8: one scale per row, one
// int32 sum per output, no per-32-block conversion); the activations are quantised per row here.
void BM_GemmPanelsInt8PerToken(benchmark::State& state) {
  if (!inferlab::cpu::gemm_panels_int8_available()) {
    state.SkipWithError("this build has no AVX-512 VNNI");
    return;
  }
  Int8Problem p(state);
  const auto x = random_vector(static_cast<std::size_t>(p.n) * p.in, 1);
  std::vector<float> xs(static_cast<std::size_t>(p.n));
  inferlab::cpu::quantize_act_rows(x.data(), p.n, p.in, p.xq.data(), xs.data(), pool(), p.in);
  const auto packed = inferlab::cpu::pack_panels_int8(p.q.data(), p.scale.data(), p.out, p.in);
  time_calls(state, [&] { inferlab::cpu::gemm_panels_int8_per_token(p.xq.data(), xs.data(), packed, p.y.data(), p.n, pool()); },
             p.y.data());
  // The AMX tiles' rows (kernels/cpu/amx.h) count against the tile unit's peak.
  const bool amx = inferlab::cpu::gemm_panels_int8_per_token_uses_amx(packed, p.n);
  set_counters(state, p.n, p.out, p.in, static_cast<double>(inferlab::cpu::packed_bytes(packed)),
               amx ? amx_peak_gops() : int8_peak_gops());
  state.SetLabel(amx ? "amx" : "vnni");
}
// The same with the AMX tiles switched off: the VNNI tiles beside them in one run.
void BM_GemmPanelsInt8PerTokenVnni(benchmark::State& state) {
  const bool was = inferlab::cpu::set_amx_int8(false);
  BM_GemmPanelsInt8PerToken(state);
  inferlab::cpu::set_amx_int8(was);
}

void BM_MatmulRowMajorInt8Act(benchmark::State& state) {
  Int8Problem p(state);
  time_calls(state, [&] {
    inferlab::cpu::matmul_int8_act(p.xq.data(), p.xs.data(), p.q.data(), p.scale.data(), p.y.data(), p.n, p.out, p.in,
                                   pool());
  }, p.y.data());
  set_counters(state, p.n, p.out, p.in, static_cast<double>(p.q.size() + 4 * p.scale.size()), int8_peak_gops());
}

void prefill_shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"n", "out", "in"});
  const int linears[][2] = {
      {576, 576}, {1536, 576},     // SmolLM2-135M: wq/wo, w1/w3
      {2048, 2048}, {5632, 2048},  // TinyLlama-1.1B: wq/wo, w1/w3
  };
  for (const auto& l : linears)
    for (int n : {1, 8, 128, 512}) b->Args({n, l[0], l[1]});
}

// Where the AMX tiles take over (16 rows, one tile) and a tile pair, at TinyLlama's shapes.
void amx_edge_shapes(benchmark::internal::Benchmark* b) {
  for (int n : {16, 32}) {
    b->Args({n, 2048, 2048});
    b->Args({n, 5632, 2048});
  }
}

BENCHMARK(BM_GemmPanelsF32)->Apply(prefill_shapes)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_MatmulRowMajorF32)->Apply(prefill_shapes)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_GemmPanelsF16)->Apply(prefill_shapes)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_GemmAmxF16Split)->Apply(prefill_shapes)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_GemmAmxBf16Split)->Apply(prefill_shapes)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_GemmAmxBf16Rounded)->Apply(prefill_shapes)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_GemmPanelsInt8)->Apply(prefill_shapes)->Apply(amx_edge_shapes)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_GemmPanelsInt8Vnni)->Apply(prefill_shapes)->Apply(amx_edge_shapes)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_GemmPanelsInt8PerToken)->Apply(prefill_shapes)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_GemmPanelsInt8PerTokenVnni)->Apply(prefill_shapes)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_MatmulRowMajorInt8Act)->Apply(prefill_shapes)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
