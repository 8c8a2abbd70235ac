// A size-class caching pool over a raw allocator (the CUDA device's cudaMalloc/cudaFree; a
// counting fake in tests): freed blocks go to a free list of their size class and the next
// request of that class reuses one, so a steady decode loop never calls the raw allocator.
// Host logic only — no CUDA here, so the policy is tested on any machine.
//
// Size classes: requests round up to 512 bytes below 4 KiB; above, to one of 8 steps per
// power of two (2^k · (8 + j) / 8, j in 0..7), so a block wastes at most 12.5 % of itself.
// One stream orders every use of the memory, so a block freed by the host may be handed out
// again at once: later work on the same stream runs after the earlier work that used it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <unordered_map>
#include <vector>

namespace inferlab {

// The class `bytes` rounds up to (see above); 512 for 0.
std::size_t caching_size_class(std::size_t bytes);

class CachingAllocator {
 public:
  // raw_alloc returns nullptr when the memory cannot be had; raw_free releases a block.
  CachingAllocator(std::function<void*(std::size_t)> raw_alloc, std::function<void(void*)> raw_free);
  ~CachingAllocator();  // releases every block, in use or cached
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  // A block of at least `bytes`: a cached one of the same class, or a fresh one; when the raw
  // allocator fails it releases the cache and tries once more. nullptr when that fails too.
  void* allocate(std::size_t bytes);
  // Returns a block of this pool to its class's free list. false (and nothing done) for a
  // pointer the pool did not hand out.
  bool deallocate(void* ptr);
  // Gives every cached (free) block back to the raw allocator.
  void release_cached();

  struct Stats {
    std::uint64_t bytes_in_use = 0;  // class bytes of blocks handed out
    std::uint64_t bytes_cached = 0;  // class bytes on the free lists
    std::uint64_t raw_allocs = 0;    // raw_alloc calls that succeeded
    std::uint64_t reuses = 0;        // requests served from a free list
    std::uint64_t frees = 0;         // blocks returned by deallocate (the device's memory epoch)
  };
  const Stats& stats() const { return stats_; }

 private:
  std::function<void*(std::size_t)> raw_alloc_;
  std::function<void(void*)> raw_free_;
  std::map<std::size_t, std::vector<void*>> free_;  // class -> cached blocks
  std::unordered_map<void*, std::size_t> live_;     // block handed out -> its class
  Stats stats_;
};

}  // namespace inferlab
