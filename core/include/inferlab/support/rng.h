// Small, fast, seedable generators. Every random choice in inferlab takes its seed from the
// experiment, so the same config and commit give the same tokens.
#pragma once
#include <cmath>
#include <cstdint>

namespace inferlab {

inline std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Mixes several values into one seed (e.g. experiment seed, request id).
inline std::uint64_t mix_seed(std::uint64_t a, std::uint64_t b) {
  std::uint64_t s = a ^ (b * 0xD1B54A32D192ED03ull + 0x9E3779B97F4A7C15ull);
  return splitmix64(s);
}

class Rng {
 public:
  explicit Rng(std::uint64_t seed = 0) : state_(seed) {}
  std::uint64_t next_u64() { return splitmix64(state_); }
  // Uniform in [0, 1).
  double uniform() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
  // Uniform integer in [lo, hi).
  std::int64_t uniform_int(std::int64_t lo, std::int64_t hi) {
    return lo + static_cast<std::int64_t>(next_u64() % static_cast<std::uint64_t>(hi - lo));
  }
  double normal() {
    double u1 = uniform(), u2 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }
  std::uint64_t state() const { return state_; }

 private:
  std::uint64_t state_;
};

}  // namespace inferlab
