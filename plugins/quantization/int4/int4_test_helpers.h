// Helpers shared by the int4 plugin's tests: Gaussian data, running a linear on the CPU, the
// relative output error.
#pragma once
#include <cmath>
#include <cstdint>
#include <vector>

#include "inferlab/device/device.h"
#include "inferlab/plugin/quantization.h"
#include "inferlab/support/rng.h"

namespace inferlab::int4_test {

inline std::vector<float> gaussian(std::size_t count, std::uint64_t seed, double sigma) {
  Rng rng(seed);
  std::vector<float> v(count);
  for (float& f : v) f = static_cast<float>(sigma * rng.normal());
  return v;
}

// Runs `linear` on x [n, in] (2 threads) and returns y [n, out].
inline std::vector<float> run(const Linear& linear, const std::vector<float>& x, int n) {
  CpuDevice device(2);
  std::vector<float> y(static_cast<std::size_t>(n) * linear.out_features(), std::nanf(""));
  linear.forward(x.data(), y.data(), n, device);
  return y;
}

// ||got - want|| / ||want||.
inline double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    num += (got[i] - want[i]) * static_cast<double>(got[i] - want[i]);
    den += want[i] * static_cast<double>(want[i]);
  }
  return std::sqrt(num / den);
}

}  // namespace inferlab::int4_test
