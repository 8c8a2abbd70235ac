// Size-class caching pool (see inferlab/device/caching_allocator.h).
#include "inferlab/device/caching_allocator.h"

#include <bit>

namespace inferlab {

std::size_t caching_size_class(std::size_t bytes) {
  constexpr std::size_t kSmall = 4096, kGrain = 512;
  if (bytes <= kSmall) return bytes == 0 ? kGrain : (bytes + kGrain - 1) / kGrain * kGrain;
  // 2^k <= bytes < 2^(k+1); steps of 2^k / 8 (2^k >= 4096, so the step is a whole number).
  const std::size_t power = std::bit_floor(bytes), step = power / 8;
  return (bytes + step - 1) / step * step;
}

CachingAllocator::CachingAllocator(std::function<void*(std::size_t)> raw_alloc, std::function<void(void*)> raw_free)
    : raw_alloc_(std::move(raw_alloc)), raw_free_(std::move(raw_free)) {}

CachingAllocator::~CachingAllocator() {
  release_cached();
  for (auto& [ptr, size] : live_) raw_free_(ptr);
}

void* CachingAllocator::allocate(std::size_t bytes) {
  const std::size_t size = caching_size_class(bytes);
  auto it = free_.find(size);
  if (it != free_.end() && !it->second.empty()) {
    void* p = it->second.back();
    it->second.pop_back();
    stats_.bytes_cached -= size;
    stats_.bytes_in_use += size;
    stats_.reuses++;
    live_.emplace(p, size);
    return p;
  }
  void* p = raw_alloc_(size);
  if (p == nullptr && stats_.bytes_cached > 0) {
    release_cached();
    p = raw_alloc_(size);
  }
  if (p == nullptr) return nullptr;
  stats_.raw_allocs++;
  stats_.bytes_in_use += size;
  live_.emplace(p, size);
  return p;
}

bool CachingAllocator::deallocate(void* ptr) {
  auto it = live_.find(ptr);
  if (it == live_.end()) return false;
  const std::size_t size = it->second;
  live_.erase(it);
  free_[size].push_back(ptr);
  stats_.bytes_in_use -= size;
  stats_.bytes_cached += size;
  stats_.frees++;
  return true;
}

void CachingAllocator::release_cached() {
  for (auto& [size, blocks] : free_)
    for (void* p : blocks) raw_free_(p);
  free_.clear();
  stats_.bytes_cached = 0;
}

}  // namespace inferlab
