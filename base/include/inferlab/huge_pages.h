// Weight storage on transparent huge pages.
//
// A decode step streams every weight once; on 4 KiB pages that is one TLB miss (a page walk)
// per 4 KiB read, and the hardware prefetchers stop at every page boundary. The shared 2-core
// EPYC of this project read 20-22 GB/s from a 256 MiB buffer on 4 KiB pages and 27-28 GB/s on
// 2 MiB pages (2 threads, the same read-sum loop, alternating runs, 2026-12-01; docs/kernels.md).
// HugePageAllocator gives allocations of 2 MiB or more a fresh 2 MiB-aligned mapping rounded up
// to whole huge pages and asks the kernel for huge pages with madvise(MADV_HUGEPAGE) before the
// first touch — what Linux's `transparent_hugepage = madvise` (Debian's default) needs; with
// `never` the call is a no-op and the memory stays on small pages. Mid-sized stores (64 KiB to
// 2 MiB: a small model's projections) are carved from shared 32 MiB chunks of huge pages, each
// returned when its last store goes (rounding each to 2 MiB would waste up to 30x); under
// AddressSanitizer they go to the default allocator instead, so overflows stay visible.
// Smaller allocations always go to the default allocator. The read-bandwidth probe (core/cli/read_bandwidth_probe.cpp) reads a
// buffer of this allocator, so the roofline it sets is the one the weights can reach.
#pragma once
#include <cstddef>
#include <memory>
#include <new>
#include <vector>

namespace inferlab {

constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

constexpr std::size_t kHugeArenaChunkBytes = std::size_t{32} << 20;
#if defined(__SANITIZE_ADDRESS__)  // GCC
#define INFERLAB_HUGE_PAGES_ASAN 1
#elif defined(__has_feature)  // Clang
#if __has_feature(address_sanitizer)
#define INFERLAB_HUGE_PAGES_ASAN 1
#endif
#endif
#if defined(INFERLAB_HUGE_PAGES_ASAN)
constexpr std::size_t kHugeArenaMinBytes = kHugePageBytes;  // no arena: ASan sees every store
#else
constexpr std::size_t kHugeArenaMinBytes = std::size_t{64} << 10;
#endif

// Rounds `bytes` up to whole huge pages, maps them fresh (never memory the heap reused),
// 2 MiB-aligned, and advises huge pages. Throws std::bad_alloc when the mapping fails.
void* allocate_huge(std::size_t bytes);
// Returns a block of allocate_huge(bytes) (the same bytes).
void free_huge(void* p, std::size_t bytes) noexcept;
// The largest cache the CPU reports (Linux sysfs, cpu0's highest cache level; 0 when unknown).
std::size_t last_level_cache_bytes();
// How large a buffer must be for reading it to stream from DRAM, as a decode step's weights do:
// twice the last-level cache, at least 256 MiB, in whole huge pages. On a VM reporting a 480 MiB
// L3 (2 threads, 2026-12-02) a read-sum read 36.6-38.4 GB/s from 256 MiB and 35.0-35.2 from 1-2
// GiB, and the cold decode benchmarks' 192 MiB of copies gave Q8_0 33 GB/s against 28.5-29.3
// from 960 MiB: partly from the cache, rates no model larger than it reaches.
std::size_t dram_stream_bytes();
// A 64-byte-aligned store carved from the shared chunks (thread-safe).
void* allocate_huge_shared(std::size_t bytes);
void free_huge_shared(void* p) noexcept;

template <class T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() noexcept = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    const std::size_t bytes = n * sizeof(T);
    if (bytes >= kHugePageBytes) return static_cast<T*>(allocate_huge(bytes));
    if (bytes >= kHugeArenaMinBytes) return static_cast<T*>(allocate_huge_shared(bytes));
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, std::size_t n) noexcept {
    const std::size_t bytes = n * sizeof(T);
    if (bytes >= kHugePageBytes)
      free_huge(p, bytes);
    else if (bytes >= kHugeArenaMinBytes)
      free_huge_shared(p);
    else
      std::allocator<T>().deallocate(p, n);
  }
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const noexcept {
    return true;
  }
};

// A vector whose storage, once 2 MiB or larger, sits on huge pages.
template <class T>
using HugeVector = std::vector<T, HugePageAllocator<T>>;

}  // namespace inferlab
