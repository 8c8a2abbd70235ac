// Decode attention at long contexts: naive vs flash vs split_k (auto splits), 1 query row per
// sequence, contexts 1k/4k/16k, 1 and 8 sequences, 1 and 2 threads; head_dim 64, 8 heads over
// 4 kv heads (and, for 1 sequence at 2 threads, over 1 kv head: multi-query), block_size 16,
// shuffled block tables.
//   ./inferlab_bench --benchmark_filter=split_k_decode
// One sequence has only n_kv_heads flash work items; split_k makes 4 * threads or more.
//
// split_k's sources are compiled in here (as bench_attention.cpp does for naive and flash); the
// NaiveAttention, FlashAttention and AttentionProblem definitions come from bench_attention.cpp,
// which compiles their .cpp files into this same binary, so only their headers are included.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <vector>

#include "inferlab/thread_pool.h"
#include "plugins/attention/flash/flash_attention.h"
#include "plugins/attention/naive/naive_attention.h"
#include "plugins/attention/split_k/partial_attention.cpp"
#include "plugins/attention/split_k/split_k_attention.cpp"
#if INFERLAB_HAVE_CUDA  // the CUDA paths exist only in a CUDA build
#include "plugins/attention/split_k/split_k_attention_cuda.cpp"
#endif
#include "tests/support/attention_fixtures.h"

namespace {

using inferlab::testing::AttentionProblem;
using inferlab::testing::AttentionProblemSpec;

// Args: {context, sequences, threads, kv heads}.
template <class Strategy>
void split_k_decode(benchmark::State& state) {
  AttentionProblemSpec s;
  s.seqs.assign(static_cast<std::size_t>(state.range(1)),
                {static_cast<int>(state.range(0)), 1});
  s.n_heads = 8;
  s.n_kv_heads = static_cast<int>(state.range(3));
  s.head_dim = 64;
  s.block_size = 16;
  s.seed = 11;
  const AttentionProblem problem(s);
  inferlab::CpuDevice device(static_cast<int>(state.range(2)));
  Strategy attention;
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
}

// On a shared machine the fastest repetition is the least disturbed one.
double fastest_run(const std::vector<double>& v) { return *std::min_element(v.begin(), v.end()); }

void split_k_args(benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2})
    for (int seqs : {1, 8})
      for (int context : {1024, 4096, 16384}) b->Args({context, seqs, threads, 4});
  for (int context : {1024, 4096, 16384}) b->Args({context, 1, 2, 1});
  b->Unit(benchmark::kMicrosecond)->Repetitions(5)->ReportAggregatesOnly(true)->UseRealTime();
  b->ComputeStatistics("min", fastest_run);
}

BENCHMARK_TEMPLATE(split_k_decode, inferlab::plugins::NaiveAttention)->Apply(split_k_args);
BENCHMARK_TEMPLATE(split_k_decode, inferlab::plugins::FlashAttention)->Apply(split_k_args);
BENCHMARK_TEMPLATE(split_k_decode, inferlab::plugins::SplitKAttention)->Apply(split_k_args);

}  // namespace
