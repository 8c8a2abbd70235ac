// fp32 matmul (kernels/cpu/matmul_f32) at real linear shapes, for decode (n = 1) and batched
// rows (n = 8, 64). Counters: GFLOP/s (2 * n * out * in per call) and weight GB/s (out * in * 4
// bytes per call: the roofline at n = 1 is memory bandwidth, at large n the FMA peak).
//   inferlab_bench --benchmark_filter=Matmul
#include <benchmark/benchmark.h>

#include <vector>

#include "bench_support.h"
#include "kernels/cpu/matmul.h"

namespace {

using inferlab::bench::pool;
using inferlab::bench::random_vector;


// args: n rows, out features, in features
void BM_MatmulF32(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0)), out = static_cast<int>(state.range(1)),
            in = static_cast<int>(state.range(2));
  const auto x = random_vector(static_cast<std::size_t>(n) * in, 1);
  const auto w = random_vector(static_cast<std::size_t>(out) * in, 2);
  std::vector<float> y(static_cast<std::size_t>(n) * out);
  inferlab::cpu::matmul_f32(x.data(), w.data(), y.data(), n, out, in, pool());  // warm-up
  for (auto _ : state) {
    inferlab::cpu::matmul_f32(x.data(), w.data(), y.data(), n, out, in, pool());
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  const double flops = 2.0 * n * out * in, bytes = 4.0 * out * in;
  state.counters["GFLOP/s"] = benchmark::Counter(flops * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["weight_GB/s"] = benchmark::Counter(bytes * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["threads"] = pool().size();
}

void shapes(benchmark::internal::Benchmark* b) {
  b->ArgNames({"n", "out", "in"});
  const int linears[][2] = {
      {288, 288}, {768, 288}, {288, 768}, {32000, 288},      // stories15M: wq, w1, w2, classifier
      {576, 576}, {1536, 576}, {576, 1536}, {49152, 576},  // SmolLM2-135M
  };
  for (const auto& l : linears)
    for (int n : {1, 8, 64}) b->Args({n, l[0], l[1]});
}

BENCHMARK(BM_MatmulF32)->Apply(shapes)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
