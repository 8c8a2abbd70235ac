#include "inferlab/huge_pages.h"

#include <sys/mman.h>

#include <new>

namespace inferlab {

void* allocate_huge(std::size_t bytes) {
  const std::size_t rounded = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
  void* p = ::operator new(rounded, std::align_val_t{kHugePageBytes});
  // Advice only: refused (THP off, an old kernel) the block simply stays on small pages.
  (void)::madvise(p, rounded, MADV_HUGEPAGE);
  return p;
}

void free_huge(void* p) noexcept { ::operator delete(p, std::align_val_t{kHugePageBytes}); }

}  // namespace inferlab
