// Native GGUF-block matmuls (kernels/cpu/matmul_gguf) and the VNNI GEMM on repacked blocks
// (kernels/cpu/gemm_gguf, Q8_0 / Q4_0 / Q4_1) at SmolLM2-135M's MLP shapes, against the
// machine's read bandwidth, 2 threads.
//   ./inferlab_bench --benchmark_filter='matmul_gguf|gemm_gguf|memory_read'
// gemm_gguf_prefetch: the AVX2 decode tiles with and without their software prefetch, call by call.
// weight_bytes_per_s: bytes of blocks (scales included: the file's bytes) per call / wall time;
// GFLOP/s: 2 * n * out * in per call / wall time (integer ops for the int8-activation kernels).
// memory_read: 2 threads summing an array of inferlab::dram_stream_bytes() (2x the last-level
// cache, at least 256 MiB), the read roofline a decode GEMV can reach
// (huge:1 on the packed panels' huge pages, huge:0 on 4 KiB pages);
// weight_bytes_per_s / memory_read's bytes_per_s is the roofline fraction. `cold:1` cycles
// through enough copies of the blocks (dram_stream_bytes) that they stream from DRAM as in a decode
// step. K-quants need in % 256 == 0: SmolLM2's width 576 is not, so their rows are 1536 wide
// (ffn_down, 576 x 1536), the one SmolLM2 matrix llama-quantize keeps in K-quants.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "inferlab/formats/formats.h"
#include "inferlab/huge_pages.h"
#include "inferlab/support/rng.h"
#include "inferlab/thread_pool.h"
#include "kernels/cpu/amx.h"
#include "kernels/cpu/decode_prefetch.h"
#include "kernels/cpu/gemm_gguf.h"
#include "kernels/cpu/gemm_gguf_avx2.h"
#include "kernels/cpu/matmul_gguf.h"
#include "kernels/cpu/matmul_int8_act.h"
#include "bench_support.h"
#include "tests/support/gguf_block_fixtures.h"

namespace {

using inferlab::GgmlType;

struct Problem {
  GgmlType type;
  int n, out, in, copies;
  std::size_t bytes;                // one copy of the blocks
  std::vector<std::uint8_t> w;      // [copies, out, row bytes]
  std::vector<float> x, y;          // [n, in], [n, out]
  explicit Problem(const benchmark::State& state)
      : type(static_cast<GgmlType>(state.range(0))),
        n(static_cast<int>(state.range(1))),
        out(static_cast<int>(state.range(2))),
        in(static_cast<int>(state.range(3))) {
    const std::vector<std::uint8_t> one = inferlab::testing::random_gguf_blocks(type, out, in, 5);
    bytes = one.size();
    copies = state.range(4) ? static_cast<int>(inferlab::dram_stream_bytes() / bytes) + 1 : 1;
    w.resize(bytes * static_cast<std::size_t>(copies));
    for (int c = 0; c < copies; ++c) std::copy(one.begin(), one.end(), w.begin() + static_cast<std::ptrdiff_t>(c * bytes));
    inferlab::Rng rng(6);
    x.resize(static_cast<std::size_t>(n) * in);
    for (float& v : x) v = static_cast<float>(rng.normal());
    y.resize(static_cast<std::size_t>(n) * out);
  }
  const std::uint8_t* copy(int c) const { return w.data() + static_cast<std::size_t>(c) * bytes; }
};

// call(c) runs copy c of the weights.
template <class Fn>
void run(benchmark::State& state, const Problem& p, Fn&& call) {
  for (int c = 0; c < p.copies; ++c) call(c);  // warm-up
  int c = 0;
  for (auto _ : state) {
    call(c);
    c = c + 1 == p.copies ? 0 : c + 1;
    benchmark::ClobberMemory();
  }
  state.SetLabel(inferlab::ggml_type_name(static_cast<std::uint32_t>(p.type)));
  state.counters["weight_bytes_per_s"] =
      benchmark::Counter(static_cast<double>(p.bytes) * static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
  state.counters["GFLOP/s"] = benchmark::Counter(2e-9 * p.n * p.out * p.in, benchmark::Counter::kIsIterationInvariantRate);
}

// Args: type, n, out, in, cold. fp32 activations.
void matmul_gguf(benchmark::State& state) {
  Problem p(state);
  inferlab::ThreadPool pool(2);
  run(state, p, [&](int c) {
    inferlab::cpu::matmul_gguf(p.type, p.copy(c), p.x.data(), p.y.data(), p.n, p.out, p.in, pool);
  });
}

// int8 activation blocks (32, or 256 for the K-quants), quantised inside the timed call as the plugin does.
void matmul_gguf_act(benchmark::State& state) {
  Problem p(state);
  inferlab::ThreadPool pool(2);
  std::vector<std::int8_t> xq(p.x.size());
  const int block = inferlab::cpu::gguf_act_block(p.type);
  std::vector<float> xs(static_cast<std::size_t>(p.n) * static_cast<std::size_t>(p.in / block));
  run(state, p, [&](int c) {
    inferlab::cpu::quantize_act_rows(p.x.data(), p.n, p.in, xq.data(), xs.data(), pool, block);
    inferlab::cpu::matmul_gguf_act(p.type, p.copy(c), xq.data(), xs.data(), p.y.data(), p.n, p.out, p.in, pool);
  });
}

// The VNNI GEMM on the blocks repacked into its panels (each copy packed; packing is untimed, as
// at load), activations quantised per 32-block inside the timed call as the plugin does. The
// label names the tiles that ran: amx, vnni, or avx2 (gemm_gguf_avx2.cpp, builds without VNNI).
#if INFERLAB_GEMM_GGUF_AVX2
constexpr const char* kTiles = " avx2";
#else
constexpr const char* kTiles = " vnni";
#endif
// True (the benchmark skipped) where gemm_gguf does not run or does not pack the type.
bool skip_unless_packed(benchmark::State& state) {
  if (inferlab::cpu::gemm_gguf_available() && inferlab::cpu::gemm_gguf_packs(static_cast<GgmlType>(state.range(0))))
    return false;
  state.SkipWithError("no AVX2 or AVX-512 VNNI in this build, or a type gemm_gguf does not pack");
  return true;
}
void gemm_gguf(benchmark::State& state) {
  if (skip_unless_packed(state)) return;
  Problem p(state);
  inferlab::ThreadPool pool(2);
  std::vector<inferlab::cpu::PackedGguf> packs;
  for (int c = 0; c < p.copies; ++c)
    packs.push_back(inferlab::cpu::pack_gguf(p.type, std::vector<std::uint8_t>(p.copy(c), p.copy(c) + p.bytes), p.out, p.in));
  std::vector<std::int8_t> xq(p.x.size());
  std::vector<float> xs(static_cast<std::size_t>(p.n) * static_cast<std::size_t>(p.in / 32));
  run(state, p, [&](int c) {
    inferlab::cpu::quantize_act_rows(p.x.data(), p.n, p.in, xq.data(), xs.data(), pool);
    inferlab::cpu::gemm_gguf(xq.data(), xs.data(), packs[static_cast<std::size_t>(c)], p.y.data(), p.n, pool);
  });
  state.SetLabel(std::string(inferlab::ggml_type_name(static_cast<std::uint32_t>(p.type))) +
                 (inferlab::cpu::gemm_gguf_uses_amx(p.type, p.n) ? " amx" : kTiles));
}

// gemm_gguf with the AMX tiles switched off (kernels/cpu/amx.h): the VNNI tiles at the prefill
// shapes, beside gemm_gguf's AMX ones in the same run where AMX runs.
void gemm_gguf_vnni(benchmark::State& state) {
  const bool was = inferlab::cpu::set_amx_int8(false);
  gemm_gguf(state);
  inferlab::cpu::set_amx_int8(was);
}

// What prefill's unpacking buys (set_gemm_gguf_unpack, gemm_gguf.h): the same call with each
// panel unpacked first and on the packed tiles, alternating call by call in one process so the
// machine's drift hits both alike (warm weights). Counters: unpacked_ms / packed_ms (medians),
// unpack_gain = packed / unpacked, and each side's GFLOP/s.
void gemm_gguf_unpack(benchmark::State& state) {
  if (skip_unless_packed(state)) return;
  Problem p(state);
  inferlab::ThreadPool pool(2);
  const inferlab::cpu::PackedGguf w =
      inferlab::cpu::pack_gguf(p.type, std::vector<std::uint8_t>(p.copy(0), p.copy(0) + p.bytes), p.out, p.in);
  std::vector<std::int8_t> xq(p.x.size());
  std::vector<float> xs(static_cast<std::size_t>(p.n) * static_cast<std::size_t>(p.in / 32));
  inferlab::cpu::quantize_act_rows(p.x.data(), p.n, p.in, xq.data(), xs.data(), pool);
  const bool was_amx = inferlab::cpu::set_amx_int8(false);  // the VNNI / AVX2 tiles on both sides
  auto timed = [&](bool unpack) {
    inferlab::cpu::set_gemm_gguf_unpack(unpack);
    const auto t0 = std::chrono::steady_clock::now();
    inferlab::cpu::gemm_gguf(xq.data(), xs.data(), w, p.y.data(), p.n, pool);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  timed(true), timed(false);  // warm-up
  std::vector<double> on, off;
  for (auto _ : state) {
    on.push_back(timed(true));
    off.push_back(timed(false));
    benchmark::ClobberMemory();
  }
  inferlab::cpu::set_gemm_gguf_unpack(true);
  inferlab::cpu::set_amx_int8(was_amx);
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  const double u = median(on), k = median(off), flop = 2e-9 * p.n * p.out * p.in;
  state.counters["unpacked_ms"] = u * 1e3;
  state.counters["packed_ms"] = k * 1e3;
  state.counters["unpack_gain"] = k / u;
  state.counters["unpacked_GFLOP/s"] = flop / u;
  state.counters["packed_GFLOP/s"] = flop / k;
  state.SetLabel(std::string(inferlab::ggml_type_name(static_cast<std::uint32_t>(p.type))) + kTiles);
}

// What the decode and few-row tiles' software prefetch buys (set_decode_prefetch,
// kernels/cpu/decode_prefetch.h; the AVX2 tiles, and the VNNI ones below the AMX tiles' rows):
// n token rows against cold weights (each call the next copy, as a decode step streams its
// matrices), prefetching `ahead` bytes ahead and not at all, alternating call by call in one
// process, on 1 and 2 threads. Counters: prefetch_GB/s and plain_GB/s (the file's bytes over the
// median call) and gain = plain / prefetch time.
void gemm_gguf_prefetch(benchmark::State& state) {
  if (skip_unless_packed(state)) return;
  Problem p(state);
  inferlab::ThreadPool pool(static_cast<int>(state.range(6)));
  std::vector<inferlab::cpu::PackedGguf> packs;
  for (int c = 0; c < p.copies; ++c)
    packs.push_back(inferlab::cpu::pack_gguf(p.type, std::vector<std::uint8_t>(p.copy(c), p.copy(c) + p.bytes), p.out, p.in));
  std::vector<std::int8_t> xq(p.x.size());
  std::vector<float> xs(static_cast<std::size_t>(p.n) * static_cast<std::size_t>(p.in / 32));
  inferlab::cpu::quantize_act_rows(p.x.data(), p.n, p.in, xq.data(), xs.data(), pool);
  int c = 0;
  inferlab::bench::decode_prefetch_ab(state, static_cast<int>(state.range(5)), p.copies, static_cast<double>(p.bytes), [&] {
    const auto t0 = std::chrono::steady_clock::now();
    inferlab::cpu::gemm_gguf(xq.data(), xs.data(), packs[static_cast<std::size_t>(c)], p.y.data(), p.n, pool);
    c = c + 1 == p.copies ? 0 : c + 1;
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  });
  state.SetLabel(std::string(inferlab::ggml_type_name(static_cast<std::uint32_t>(p.type))) + kTiles);
}

// matmul_gguf_act's decode (the row kernels of the types the panels do not hold) with and
// without its software prefetch, alternating call by call (decode_prefetch_ab).
void matmul_gguf_act_prefetch(benchmark::State& state) {
  Problem p(state);
  inferlab::ThreadPool pool(2);
  std::vector<std::int8_t> xq(p.x.size());
  const int block = inferlab::cpu::gguf_act_block(p.type);
  std::vector<float> xs(static_cast<std::size_t>(p.n) * static_cast<std::size_t>(p.in / block));
  inferlab::cpu::quantize_act_rows(p.x.data(), p.n, p.in, xq.data(), xs.data(), pool, block);
  int c = 0;
  inferlab::bench::decode_prefetch_ab(state, static_cast<int>(state.range(5)), p.copies, static_cast<double>(p.bytes), [&] {
    const auto t0 = std::chrono::steady_clock::now();
    inferlab::cpu::matmul_gguf_act(p.type, p.copy(c), xq.data(), xs.data(), p.y.data(), p.n, p.out, p.in, pool);
    c = c + 1 == p.copies ? 0 : c + 1;
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  });
  state.SetLabel(inferlab::ggml_type_name(static_cast<std::uint32_t>(p.type)));
}

// The read roofline: 2 threads each summing half of a dram_stream_bytes() array of floats, on 4 KiB pages
// (huge:0, as matmul_gguf's copies of the file's blocks) or on the weights' huge pages (huge:1,
// inferlab/huge_pages.h, where gemm_gguf's packed panels and the CLI's probe sit): compare a
// kernel with the probe on its own page size.
template <class Vec>
void sum_halves(benchmark::State& state, const Vec& a) {
  inferlab::ThreadPool pool(2);
  std::vector<double> sums(2);
  const std::size_t count = a.size();
  for (auto _ : state) {
    pool.parallel_for(2, [&](std::size_t begin, std::size_t end) {
      for (std::size_t t = begin; t < end; ++t) {
        float s = 0.0f;
        const float* p = a.data() + t * count / 2;
#pragma omp simd reduction(+ : s)
        for (std::size_t i = 0; i < count / 2; ++i) s += p[i];
        sums[t] = s;
      }
    });
    benchmark::DoNotOptimize(sums.data());
  }
}
void memory_read(benchmark::State& state) {
  const std::size_t count = inferlab::dram_stream_bytes() / sizeof(float);
  if (state.range(0)) sum_halves(state, inferlab::HugeVector<float>(count, 1.0f));
  else sum_halves(state, std::vector<float>(count, 1.0f));
  state.counters["bytes_per_s"] =
      benchmark::Counter(static_cast<double>(count * sizeof(float)) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}

// TinyLlama-1.1B's w1 / w3 (5632 x 2048) for gemm_gguf: batched decode (n <= 32) cold, prefill warm.
void add_prefill_shapes(benchmark::internal::Benchmark* b, std::initializer_list<int> rows) {
  for (int n : rows)
    for (GgmlType t : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K})
      b->Args({static_cast<int>(t), n, 5632, 2048, n <= 32 ? 1 : 0});
}

// Args {type, n, out, in, cold} at SmolLM2's MLP shapes; K-quants (ffn_down only: 576 is not a
// whole number of super-blocks) when asked; with row_types also the types only matmul_gguf runs
// (Q5_0, Q5_1, IQ4_NL, Q2_K, Q3_K, IQ4_XS: what llama-quantize's presets put in a SmolLM2 file).
void add_shapes(benchmark::internal::Benchmark* b, bool k_quants, bool prefill = false, bool row_types = false) {
  for (int cold : {1, 0})
    for (int n : {1, 16, 128}) {
      for (GgmlType t : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ5_0, GgmlType::kQ5_1,
                         GgmlType::kIQ4_NL}) {
        if (!row_types && !inferlab::cpu::gemm_gguf_packs(t)) continue;
        b->Args({static_cast<int>(t), n, 1536, 576, cold});
        b->Args({static_cast<int>(t), n, 576, 1536, cold});
      }
      if (k_quants)
        for (GgmlType t : {GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K,
                           GgmlType::kIQ4_XS})
          if (row_types || inferlab::cpu::gemm_gguf_packs(t)) b->Args({static_cast<int>(t), n, 576, 1536, cold});
    }
  // TinyLlama-1.1B's MLP at decode, cold: Q4_0 / Q8_0 and the K-quants Q4_K_M / Q5_K_M files mix.
  if (k_quants)
    for (GgmlType t : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K}) {
      b->Args({static_cast<int>(t), 1, 5632, 2048, 1});
      b->Args({static_cast<int>(t), 1, 2048, 5632, 1});
    }
  // TinyLlama-1.1B's w1 / w3 (gemm_gguf only): batched decode of 8 and 16 sequences, cold, and
  // prefill of 128 and 512 tokens, warm (its fractions of the int8 peaks).
  if (prefill) add_prefill_shapes(b, {8, 16, 32, 128, 512});
  b->ArgNames({"type", "n", "out", "in", "cold"})->UseRealTime()->Repetitions(3)->ReportAggregatesOnly(true);
}
void gguf_shapes(benchmark::internal::Benchmark* b) { add_shapes(b, true, false, true); }

BENCHMARK(matmul_gguf)->Apply(gguf_shapes);
BENCHMARK(matmul_gguf_act)->Apply(gguf_shapes);
BENCHMARK(gemm_gguf)->Apply([](benchmark::internal::Benchmark* b) { add_shapes(b, true, true); });
BENCHMARK(gemm_gguf_vnni)->Apply([](benchmark::internal::Benchmark* b) {
  add_prefill_shapes(b, {16, 32, 128, 512});
  b->ArgNames({"type", "n", "out", "in", "cold"})->UseRealTime()->Repetitions(3)->ReportAggregatesOnly(true);
});
BENCHMARK(gemm_gguf_unpack)->Apply([](benchmark::internal::Benchmark* b) {
  add_prefill_shapes(b, {32, 128, 512});
  b->ArgNames({"type", "n", "out", "in", "cold"})->UseRealTime()->Iterations(40);
});
BENCHMARK(gemm_gguf_prefetch)->Apply([](benchmark::internal::Benchmark* b) {
  for (int threads : {1, 2})
    for (GgmlType t : {GgmlType::kQ8_0, GgmlType::kQ4_0, GgmlType::kQ4_1, GgmlType::kQ4_K, GgmlType::kQ5_K, GgmlType::kQ6_K})
      for (int n : {1, 2, 4, 8})
        for (int ahead : {1024, inferlab::cpu::kDecodePrefetch, 4096}) b->Args({static_cast<int>(t), n, 5632, 2048, 1, ahead, threads});
  b->ArgNames({"type", "n", "out", "in", "cold", "ahead", "threads"})->UseRealTime()->Iterations(60);
});
BENCHMARK(matmul_gguf_act_prefetch)->Apply([](benchmark::internal::Benchmark* b) {
  for (GgmlType t : {GgmlType::kQ5_1, GgmlType::kQ2_K, GgmlType::kQ3_K, GgmlType::kIQ4_XS})
    b->Args({static_cast<int>(t), 1, 5632, 2048, 1, inferlab::cpu::kDecodePrefetch});
  b->ArgNames({"type", "n", "out", "in", "cold", "ahead"})->UseRealTime()->Iterations(40);
});
BENCHMARK(memory_read)->ArgName("huge")->Arg(0)->Arg(1)->UseRealTime()->Repetitions(3)->ReportAggregatesOnly(true);

}  // namespace
