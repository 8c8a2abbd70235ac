// Weight storage on transparent huge pages.
//
// A decode step streams every weight once; on 4 KiB pages that is one TLB miss (a page walk)
// per 4 KiB read, and the hardware prefetchers stop at every page boundary. The shared 2-core
// EPYC of this project read 20-22 GB/s from a 256 MiB buffer on 4 KiB pages and 27-28 GB/s on
// 2 MiB pages (2 threads, the same read-sum loop, alternating runs, 2026-12-01; docs/kernels.md).
// HugePageAllocator gives allocations of 2 MiB or more a 2 MiB-aligned block rounded up to
// whole huge pages and asks the kernel for huge pages with madvise(MADV_HUGEPAGE) before the
// first touch — what Linux's `transparent_hugepage = madvise` (Debian's default) needs; with
// `never` the call is a no-op and the memory stays on small pages. Smaller allocations go to
// the default allocator. The read-bandwidth probe (core/cli/read_bandwidth_probe.cpp) reads a
// buffer of this allocator, so the roofline it sets is the one the weights can reach.
#pragma once
#include <cstddef>
#include <memory>
#include <new>
#include <vector>

namespace inferlab {

constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

// Rounds `bytes` up to whole huge pages, allocates them 2 MiB-aligned and advises huge pages.
void* allocate_huge(std::size_t bytes);
void free_huge(void* p) noexcept;

template <class T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() noexcept = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
    if (n * sizeof(T) < kHugePageBytes) return std::allocator<T>().allocate(n);
    return static_cast<T*>(allocate_huge(n * sizeof(T)));
  }
  void deallocate(T* p, std::size_t n) noexcept {
    if (n * sizeof(T) < kHugePageBytes)
      std::allocator<T>().deallocate(p, n);
    else
      free_huge(p);
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
