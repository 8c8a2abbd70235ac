// Helpers shared by the kernel benchmarks: one thread pool of all hardware threads, seeded
// Gaussian inputs, the decode-prefetch A/B.
#pragma once
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "inferlab/support/rng.h"
#include "inferlab/thread_pool.h"
#include "kernels/cpu/decode_prefetch.h"

namespace inferlab::bench {

inline ThreadPool& pool() {
  static ThreadPool p(0);
  return p;
}

inline std::vector<float> random_vector(std::size_t n, std::uint64_t seed) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = static_cast<float>(rng.normal());
  return v;
}

// The decode prefetch (kernels/cpu/decode_prefetch.h) A/B: call() runs one timed call and
// returns its seconds; each iteration runs it with set_decode_prefetch(ahead), then with 0, so
// the machine's drift hits both alike (after `warm` calls with the prefetch). Counters over the
// median calls of `bytes` each: prefetch_GB/s, plain_GB/s, gain = plain / prefetch time. The
// setting before is restored.
template <class Call>
void decode_prefetch_ab(benchmark::State& state, int ahead, int warm, double bytes, Call call) {
  const int was = cpu::decode_prefetch_bytes();
  auto timed = [&](int b) {
    cpu::set_decode_prefetch(b);
    return call();
  };
  for (int i = 0; i < warm; ++i) timed(ahead);
  std::vector<double> on, off;
  for (auto _ : state) {
    on.push_back(timed(ahead));
    off.push_back(timed(0));
    benchmark::ClobberMemory();
  }
  cpu::set_decode_prefetch(was);
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  state.counters["prefetch_GB/s"] = bytes / median(on) * 1e-9;
  state.counters["plain_GB/s"] = bytes / median(off) * 1e-9;
  state.counters["gain"] = median(off) / median(on);
}

}  // namespace inferlab::bench
