// Helpers shared by the kernel benchmarks: one thread pool of all hardware threads, seeded
// Gaussian inputs.
#pragma once
#include <cstdint>
#include <vector>

#include "inferlab/rng.h"
#include "inferlab/thread_pool.h"

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

}  // namespace inferlab::bench
