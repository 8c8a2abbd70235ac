// Weight-only int8 vs fp32 matmul on the CPU at SmolLM2-135M's MLP shapes (576 -> 1536 and
// 1536 -> 576), for decode (n = 1) and a small batch (n = 16), 2 threads.
//   ./inferlab_bench --benchmark_filter=matmul_
// Counter weight_bytes_per_s: bytes of weight storage (int8 + scales, or fp32) per call
// divided by wall time. `cold:1` cycles through enough copies of the matrix (of the bytes it
// streams, inferlab::dram_stream_bytes(): 2x the last-level cache, at least 256 MiB) that the
// weights stream from DRAM as in a real decode step, where a whole model does not fit the
// last-level cache; `cold:0` keeps one matrix hot in cache, which
// shows the compute cost of widening int8 to float. Decode from DRAM is memory bound: compare
// weight_bytes_per_s with the machine's bandwidth; int8 reads a quarter of the bytes.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "inferlab/huge_pages.h"
#include "inferlab/support/rng.h"
#include "inferlab/thread_pool.h"
#include "kernels/cpu/matmul.h"
#include "kernels/cpu/matmul_int8.h"
#include "kernels/cpu/matmul_int8_act.h"
#include "kernels/ref/matmul_int8.h"
#include "bench_support.h"

namespace {

// `copies` identical weight matrices at distinct addresses; call i uses copy i % copies.
struct Problem {
  int n, out, in, copies;
  std::size_t size;  // out * in
  std::vector<float> x, w, y, scale;  // x: [n, in], w: [copies, out, in], y: [n, out]
  std::vector<std::int8_t> q;         // [copies, out, in], scale: [copies, out]
  Problem(const benchmark::State& state, bool int8)
      : n(static_cast<int>(state.range(0))),
        out(static_cast<int>(state.range(1))),
        in(static_cast<int>(state.range(2))),
        size(static_cast<std::size_t>(out) * in) {
    copies = state.range(3) ? static_cast<int>(inferlab::dram_stream_bytes() / ((int8 ? 1 : 4) * size)) + 1 : 1;
    inferlab::Rng rng(17);
    x.resize(static_cast<std::size_t>(n) * in);
    for (float& v : x) v = static_cast<float>(rng.normal());
    y.resize(static_cast<std::size_t>(n) * out);
    std::vector<float> w0(size);
    for (float& v : w0) v = static_cast<float>(0.02 * rng.normal());
    if (!int8) {
      w.resize(size * copies);
      for (int c = 0; c < copies; ++c) std::copy(w0.begin(), w0.end(), w.begin() + c * size);
      return;
    }
    q.resize(size * copies);
    scale.resize(static_cast<std::size_t>(out) * copies);
    for (int c = 0; c < copies; ++c)
      inferlab::ref::quantize_int8_rows(w0.data(), out, in, q.data() + c * size,
                                        scale.data() + static_cast<std::size_t>(c) * out);
  }
};

template <class Fn>
void run(benchmark::State& state, const Problem& p, double weight_bytes, Fn&& call) {
  for (int c = 0; c < p.copies; ++c) call(c);  // warm-up: page faults, thread pool wake-up
  int c = 0;
  for (auto _ : state) {
    call(c);
    c = c + 1 == p.copies ? 0 : c + 1;
    benchmark::ClobberMemory();
  }
  state.counters["weight_bytes_per_s"] = benchmark::Counter(
      weight_bytes * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

// Args: n, out, in, cold.
void matmul_f32(benchmark::State& state) {
  Problem p(state, false);
  inferlab::ThreadPool pool(2);
  run(state, p, 4.0 * static_cast<double>(p.size), [&](int c) {
    inferlab::cpu::matmul_f32(p.x.data(), p.w.data() + c * p.size, p.y.data(), p.n, p.out, p.in,
                              pool);
  });
}

void matmul_int8(benchmark::State& state) {
  Problem p(state, true);
  inferlab::ThreadPool pool(2);
  run(state, p, static_cast<double>(p.size) + 4.0 * p.out, [&](int c) {
    inferlab::cpu::matmul_int8(p.x.data(), p.q.data() + c * p.size,
                               p.scale.data() + static_cast<std::size_t>(c) * p.out, p.y.data(),
                               p.n, p.out, p.in, pool);
  });
}

// W8A8 on the portable row kernel (what builds without AVX2 run; the others run the panels,
// bench_gemm_panels.cpp): the activations quantised per 32-block on every call (as the plugin
// does), then the integer loop; the quantisation is inside the timed call.
void matmul_int8_act(benchmark::State& state) {
  Problem p(state, true);
  inferlab::ThreadPool pool(2);
  std::vector<std::int8_t> xq(p.x.size());
  std::vector<float> xs(static_cast<std::size_t>(p.n) * inferlab::ref::act_blocks(p.in));
  run(state, p, static_cast<double>(p.size) + 4.0 * p.out, [&](int c) {
    inferlab::cpu::quantize_act_rows(p.x.data(), p.n, p.in, xq.data(), xs.data(), pool);
    inferlab::cpu::matmul_int8_act(xq.data(), xs.data(), p.q.data() + c * p.size,
                                   p.scale.data() + static_cast<std::size_t>(c) * p.out, p.y.data(), p.n, p.out,
                                   p.in, pool);
  });
}

void shapes(benchmark::internal::Benchmark* b) {
  for (int cold : {0, 1})
    for (int n : {1, 16}) {
      b->Args({n, 1536, 576, cold});
      b->Args({n, 576, 1536, cold});
    }
  b->ArgNames({"n", "out", "in", "cold"})->UseRealTime()->Repetitions(3)
      ->ReportAggregatesOnly(true);
}

BENCHMARK(matmul_f32)->Apply(shapes);
BENCHMARK(matmul_int8)->Apply(shapes);
BENCHMARK(matmul_int8_act)->Apply(shapes);

}  // namespace
