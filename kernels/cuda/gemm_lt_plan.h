// The host side of kernels/cuda/gemm_lt.cu (plain C++, tested on the CPU in tests/kernels/
// test_cuda_linear_plan.cpp): the key that names one cuBLASLt problem and a bounded cache of the
// plans (descriptors + chosen algorithm) built for them, so a shape seen before costs a lookup —
// no heuristic query, no allocation — and a captured CUDA graph replays the same algorithm.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <tuple>

namespace inferlab::cuda {

enum class LtOp : std::uint8_t { kF16, kBF16, kInt8 };

// One GEMM problem: y[n, out] = x[n, in] · W^T, plus its epilogue.
struct LtKey {
  LtOp op = LtOp::kBF16;
  int n = 0, out = 0, in = 0;
  bool bias = false;        // + bias[out] (CUBLASLT_EPILOGUE_BIAS)
  bool accumulate = false;  // y += (beta = 1), the residual add
  bool operator<(const LtKey& o) const {
    return std::tie(op, n, out, in, bias, accumulate) < std::tie(o.op, o.n, o.out, o.in, o.bias, o.accumulate);
  }
};

// Plans keyed by LtKey, at most `capacity` of them: past that the whole cache is dropped and
// rebuilt as shapes recur (prefill chunk lengths vary without bound; decode batch sizes do not).
template <class Plan>
class LtPlanCache {
 public:
  explicit LtPlanCache(std::size_t capacity) : capacity_(capacity) {}
  // The plan for `key`, built by make(key) on a miss. make may return null (no algorithm for the
  // problem): that answer is cached too, so an unsupported shape is asked about once.
  Plan* get(const LtKey& key, const std::function<std::unique_ptr<Plan>(const LtKey&)>& make) {
    auto it = plans_.find(key);
    if (it != plans_.end()) {
      ++hits_;
      return it->second.get();
    }
    ++misses_;
    if (plans_.size() >= capacity_) plans_.clear();
    return plans_.emplace(key, make(key)).first->second.get();
  }
  void clear() { plans_.clear(); }
  std::size_t size() const { return plans_.size(); }
  std::uint64_t hits() const { return hits_; }
  std::uint64_t misses() const { return misses_; }

 private:
  std::size_t capacity_;
  std::map<LtKey, std::unique_ptr<Plan>> plans_;
  std::uint64_t hits_ = 0, misses_ = 0;
};

}  // namespace inferlab::cuda
