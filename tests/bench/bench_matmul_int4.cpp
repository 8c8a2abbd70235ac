// int4 (asymmetric; groups of 32, the plugin's default, and 128, GPTQ / AWQ's usual), weight-only
// and W4A8 (matmul_int4_act), at SmolLM2-135M's MLP shapes, for decode (n = 1), a few rows (n = 4:
// the few-row cost is n:4 over n:1) and a small batch (n = 16), 2 threads. Same arguments and counter
// as matmul_f32 / matmul_int8 in bench_matmul_int8.cpp, so one run compares all three:
//   ./inferlab_bench --benchmark_filter='matmul_(f32|int8|int4)/n:(1|16)/out:576/in:1536/cold:0/gs:32'
// Counter weight_bytes_per_s: bytes of weight storage (codes + scales + zero points) per call
// divided by wall time. `cold:1` cycles through enough copies of the packed matrix
// (inferlab::dram_stream_bytes(): 2x the last-level cache, at least 256 MiB) that the weights
// stream from DRAM;
// `cold:0` keeps one matrix hot, which shows the cost of unpacking nibbles.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "inferlab/huge_pages.h"
#include "inferlab/support/rng.h"
#include "inferlab/thread_pool.h"
#include "kernels/cpu/matmul_int4.h"
#include "kernels/cpu/matmul_int4_act.h"
#include "kernels/cpu/matmul_int8_act.h"
#include "kernels/ref/matmul_int8.h"
#include "kernels/ref/matmul_int4.h"

namespace {

// Args: n, out, in, cold, group size. int8_act: activations quantised per 32-block inside the timed call
// and the W4A8 integer kernel instead of the fp32-activation one.
void run_int4(benchmark::State& state, bool int8_act) {
  const int n = static_cast<int>(state.range(0)), out = static_cast<int>(state.range(1)),
            in = static_cast<int>(state.range(2)), group_size = static_cast<int>(state.range(4));
  const std::size_t size = static_cast<std::size_t>(out) * in;
  const std::size_t packed_bytes =
      static_cast<std::size_t>(out) * inferlab::ref::int4_row_bytes(in);
  const int copies = state.range(3) ? static_cast<int>(inferlab::dram_stream_bytes() / packed_bytes) + 1 : 1;
  const std::size_t cells =
      static_cast<std::size_t>(out) * inferlab::ref::int4_groups(in, group_size);

  inferlab::Rng rng(17);
  std::vector<float> x(static_cast<std::size_t>(n) * in), y(static_cast<std::size_t>(n) * out);
  for (float& v : x) v = static_cast<float>(rng.normal());
  std::vector<float> w(size);
  for (float& v : w) v = static_cast<float>(0.02 * rng.normal());
  std::vector<std::uint8_t> packed(packed_bytes * copies), zero(cells * copies);
  std::vector<float> scale(cells * copies);
  for (int c = 0; c < copies; ++c)
    inferlab::ref::quantize_int4_groups(w.data(), out, in, group_size,
                                        packed.data() + c * packed_bytes, scale.data() + c * cells,
                                        zero.data() + c * cells);

  inferlab::ThreadPool pool(2);
  std::vector<std::int8_t> xq(x.size());
  std::vector<float> xs(static_cast<std::size_t>(n) * inferlab::ref::act_blocks(in));
  auto call = [&](int c) {
    if (int8_act) {
      inferlab::cpu::quantize_act_rows(x.data(), n, in, xq.data(), xs.data(), pool);
      inferlab::cpu::matmul_int4_act(xq.data(), xs.data(), packed.data() + c * packed_bytes, scale.data() + c * cells,
                                     zero.data() + c * cells, y.data(), n, out, in, group_size, pool);
      return;
    }
    inferlab::cpu::matmul_int4(x.data(), packed.data() + c * packed_bytes, scale.data() + c * cells,
                               zero.data() + c * cells, y.data(), n, out, in, group_size, pool);
  };
  for (int c = 0; c < copies; ++c) call(c);  // warm-up: page faults, thread pool wake-up
  int c = 0;
  for (auto _ : state) {
    call(c);
    c = c + 1 == copies ? 0 : c + 1;
    benchmark::ClobberMemory();
  }
  const double weight_bytes = static_cast<double>(packed_bytes) + 5.0 * static_cast<double>(cells);
  state.counters["weight_bytes_per_s"] = benchmark::Counter(
      weight_bytes * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

void matmul_int4(benchmark::State& state) { run_int4(state, false); }
void matmul_int4_act(benchmark::State& state) { run_int4(state, true); }

void int4_shapes(benchmark::internal::Benchmark* b) {
  for (int cold : {0, 1})
    for (int n : {1, 4, 16})
      for (int gs : {32, 128}) {  // g128: quant_decode_cpu.toml's int4 row, GPTQ / AWQ's usual groups
        b->Args({n, 1536, 576, cold, gs});
        b->Args({n, 576, 1536, cold, gs});
      }
  b->ArgNames({"n", "out", "in", "cold", "gs"})
      ->UseRealTime()
      ->Repetitions(3)
      ->ReportAggregatesOnly(true);
}

BENCHMARK(matmul_int4)->Apply(int4_shapes);
BENCHMARK(matmul_int4_act)->Apply(int4_shapes);

}  // namespace
