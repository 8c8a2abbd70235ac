// Naive vs flash paged attention on the CPU: decode (1 query row, contexts 128..4096) and
// prefill (512 rows over a 512-token context), head_dim 64, 8 heads over 4 kv heads,
// block_size 16, shuffled block tables, 1 and 2 threads; and attention_prefill_smol, SmolLM2's
// shape (9 heads over 3 kv heads, head_dim 64) at 128 and 512 rows, and attention_decode_smol, its
// decode (one row) at contexts 64, 256 and 1024; attention_decode_lanes, flash's decode with its
// lane kernels on and off (the `lanes` parameter) at GQA groups 3 and 8; attention_decode_kv,
// flash's decode over every stored KV format.
//   ./inferlab_bench --benchmark_filter='attention|Peak'
// Counter kv_bytes_per_s: bytes of K and V the problem must read at least once per call,
// divided by wall time: compare it with the machine's memory bandwidth (decode is bound by it;
// naive re-reads each kv head once per query head of its group, flash once per group).
// Counter flops_per_s: the causal attention's useful FLOPs (2 per multiply-add of QK^T and of
// P·V over the positions each row may see) per second of wall time: compare it with PeakFma at
// the same thread count (prefill is bound by it).
//
// The strategies live in plugin modules that this binary does not link, and the random-batch
// builder lives in the test-support library; their sources are compiled in here directly so
// the benchmark times exactly the classes the plugins ship, with no registry in the loop.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "inferlab/thread_pool.h"
#include "plugins/attention/flash/flash_attention.cpp"
#if INFERLAB_HAVE_CUDA  // the CUDA paths exist only in a CUDA build
#include "plugins/attention/flash/flash_attention_cuda.cpp"
#endif
#include "plugins/attention/naive/naive_attention.cpp"
#if INFERLAB_HAVE_CUDA  // the CUDA paths exist only in a CUDA build
#include "plugins/attention/naive/naive_attention_cuda.cpp"
#endif
#include "tests/support/attention_fixtures.cpp"

namespace {

using inferlab::testing::AttentionProblem;
using inferlab::testing::AttentionProblemSpec;

AttentionProblemSpec bench_spec(int context, int rows, int n_heads = 8, int n_kv_heads = 4) {
  AttentionProblemSpec s;
  s.seqs = {{context, rows}};
  s.n_heads = n_heads;
  s.n_kv_heads = n_kv_heads;
  s.head_dim = 64;
  s.block_size = 16;
  s.seed = 7;
  return s;
}

// 4 * head_dim FLOPs per (row, head, visible position): QK^T and P·V, 2 each per multiply-add.
double causal_attention_flops(const AttentionProblemSpec& s) {
  double visible = 0;
  for (const auto& seq : s.seqs)
    for (int r = 0; r < seq.query_rows; ++r) visible += seq.context_len - seq.query_rows + r + 1;
  return 4.0 * s.head_dim * s.n_heads * visible;
}

template <class Strategy>
void run(benchmark::State& state, const AttentionProblemSpec& spec, int threads, Strategy attention = Strategy()) {
  const AttentionProblem problem(spec);
  inferlab::CpuDevice device(threads);
  std::vector<float> out(problem.out_size());
  const auto batch = problem.batch();
  const auto kv = problem.kv();
  attention.forward(batch, kv, problem.q(), out.data(), device);  // warm-up
  for (auto _ : state) {
    attention.forward(batch, kv, problem.q(), out.data(), device);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.counters["kv_bytes_per_s"] = benchmark::Counter(
      static_cast<double>(problem.kv_floats_read() * sizeof(float)) *
          static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
  state.counters["flops_per_s"] = benchmark::Counter(
      causal_attention_flops(spec) * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}

template <class Strategy>
void attention_decode(benchmark::State& state) {
  run<Strategy>(state, bench_spec(static_cast<int>(state.range(0)), 1), static_cast<int>(state.range(1)));
}

template <class Strategy>
void attention_prefill(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  run<Strategy>(state, bench_spec(n, n), static_cast<int>(state.range(1)));
}

// SmolLM2-135M's attention: 9 query heads over 3 kv heads (GQA group 3), head_dim 64.
template <class Strategy>
void attention_decode_smol(benchmark::State& state) {
  run<Strategy>(state, bench_spec(static_cast<int>(state.range(0)), 1, 9, 3), static_cast<int>(state.range(1)));
}

template <class Strategy>
void attention_prefill_smol(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  run<Strategy>(state, bench_spec(n, n, 9, 3), static_cast<int>(state.range(1)));
}

using inferlab::plugins::FlashAttention;
using inferlab::plugins::NaiveAttention;

// Flash decode with its lane kernels on (lanes:1, the default) and off (lanes:0: the transposed K
// tile at group 8, per-vector dot products below), over GQA groups 1 (multi-head: 8 heads over 8),
// 2 (8 over 4), 3 (SmolLM2: 9 heads over 3) and 8 (TinyLlama-1.1B: 32 over 4), head_dim 64.
// Args: {context, threads, group, lanes}.
void attention_decode_lanes(benchmark::State& state) {
  const int group = static_cast<int>(state.range(2)), kv_heads = group == 8 ? 4 : group == 3 ? 3 : 8 / group;
  run<FlashAttention>(state, bench_spec(static_cast<int>(state.range(0)), 1, group * kv_heads, kv_heads),
                      static_cast<int>(state.range(1)),
                      FlashAttention(FlashAttention::kDefaultTile, FlashAttention::kDefaultQueryRows, state.range(3) != 0));
}

// Args: {context, threads}. With 1 thread the CPU-time column is the whole computation even on
// a loaded machine; with 2 the real-time column includes the pool's scheduling.
constexpr int kDecodeContexts[] = {128, 256, 512, 1024, 2048, 4096};

// On a shared machine the fastest repetition is the least disturbed one: report it too.
double fastest(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

void decode_args(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2})
    for (int context : kDecodeContexts) b->Args({context, threads});
  b->Repetitions(5)->ReportAggregatesOnly(true)->UseRealTime()->ComputeStatistics("min", fastest);
}

void prefill_args(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2}) b->Args({512, threads});
  b->Unit(benchmark::kMillisecond)->Repetitions(5)->ReportAggregatesOnly(true)->UseRealTime();
  b->ComputeStatistics("min", fastest);
}

BENCHMARK_TEMPLATE(attention_decode, NaiveAttention)->Apply(decode_args);
BENCHMARK_TEMPLATE(attention_decode, FlashAttention)->Apply(decode_args);
BENCHMARK_TEMPLATE(attention_prefill, NaiveAttention)->Apply(prefill_args);
BENCHMARK_TEMPLATE(attention_prefill, FlashAttention)->Apply(prefill_args);

void prefill_smol_args(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2})
    for (int rows : {128, 512}) b->Args({rows, threads});
  b->Unit(benchmark::kMillisecond)->Repetitions(5)->ReportAggregatesOnly(true)->UseRealTime();
  b->ComputeStatistics("min", fastest);
}
BENCHMARK_TEMPLATE(attention_prefill_smol, FlashAttention)->Apply(prefill_smol_args);

// SmolLM2's decode at the depths of a short chat (one row, 9 heads over 3 kv heads).
void decode_smol_args(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2})
    for (int context : {64, 256, 1024}) b->Args({context, threads});
  b->Repetitions(5)->ReportAggregatesOnly(true)->UseRealTime()->ComputeStatistics("min", fastest);
}
BENCHMARK_TEMPLATE(attention_decode_smol, FlashAttention)->Apply(decode_smol_args);

BENCHMARK(attention_decode_lanes)->Apply([](benchmark::internal::Benchmark* b) {
  for (int group : {1, 2, 3, 8})
    for (int context : {64, 512, 2048})
      for (int threads : {1, 2})
        for (int lanes : {1, 0}) b->Args({context, threads, group, lanes});
  b->ArgNames({"context", "threads", "group", "lanes"});
  b->Repetitions(5)->ReportAggregatesOnly(true)->UseRealTime()->ComputeStatistics("min", fastest);
});

// Flash decode over each stored KV format (the `[kv] dtype` of a run), SmolLM2's shape (9 heads
// over 3 kv heads), one sequence at contexts 512 and 4096, each call the next of 30 layers' caches
// (as a decode step reads them: from memory, behind the other layers'). Args: {context, threads,
// dtype: 0 f32, 1 f16, 2 bf16, 3 int8, 4 int4}. Counter kv_bytes_per_s: the stored bytes (codes
// and scales) of a layer's K/V per second.
void attention_decode_kv(benchmark::State& state) {
  constexpr inferlab::KvDtype kDtypes[] = {inferlab::KvDtype::kF32, inferlab::KvDtype::kF16, inferlab::KvDtype::kBf16,
                                           inferlab::KvDtype::kInt8, inferlab::KvDtype::kInt4};
  const inferlab::KvDtype dtype = kDtypes[state.range(2)];
  std::vector<std::unique_ptr<AttentionProblem>> layers;
  for (int l = 0; l < 30; ++l) {
    AttentionProblemSpec s = bench_spec(static_cast<int>(state.range(0)), 1, 9, 3);
    s.seed = static_cast<std::uint64_t>(7 + l);
    s.kv_dtype = dtype;
    layers.push_back(std::make_unique<AttentionProblem>(s));
  }
  inferlab::CpuDevice device(static_cast<int>(state.range(1)));
  FlashAttention attention;
  std::vector<float> out(layers[0]->out_size());
  std::size_t l = 0;
  auto call = [&] {
    attention.forward(layers[l]->batch(), layers[l]->kv(), layers[l]->q(), out.data(), device);
    l = l + 1 == layers.size() ? 0 : l + 1;
  };
  for (std::size_t i = 0; i < layers.size(); ++i) call();  // warm-up
  for (auto _ : state) {
    call();
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  const double row = static_cast<double>(inferlab::kv_code_bytes(dtype, 64) +
                                         sizeof(float) * inferlab::kv_param_floats(dtype, 64, 64));
  state.counters["kv_bytes_per_s"] = benchmark::Counter(
      2.0 * row * static_cast<double>(state.range(0)) * 3 * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
}
BENCHMARK(attention_decode_kv)->Apply([](benchmark::internal::Benchmark* b) {
  for (int context : {512, 4096})
    for (int threads : {1, 2})
      for (int dtype = 0; dtype < 5; ++dtype) b->Args({context, threads, dtype});
  b->ArgNames({"context", "threads", "dtype"});
  b->Repetitions(5)->ReportAggregatesOnly(true)->UseRealTime()->ComputeStatistics("min", fastest);
});

}  // namespace
