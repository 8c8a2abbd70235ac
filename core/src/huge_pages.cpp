#include "inferlab/huge_pages.h"

#include <sys/mman.h>

#include <algorithm>
#include <iterator>
#include <map>
#include <mutex>
#include <new>

namespace inferlab {
namespace {

std::size_t round_up(std::size_t bytes, std::size_t to) { return (bytes + to - 1) / to * to; }

// The arena for mid-sized stores: chunks of huge pages carved front to back. A chunk counts its
// live allocations and is returned once the last one goes (weights are built together and freed
// together, so carving without reuse wastes at most a chunk's unused tail). The current chunk is
// reset instead, so building and dropping models in a loop reuses it.
class Arena {
 public:
  void* allocate(std::size_t bytes) {
    bytes = round_up(bytes, kAlign);
    std::lock_guard<std::mutex> lock(mutex_);
    if (current_ == nullptr || current_->used + bytes > current_->size) {
      const std::size_t size = std::max(kHugeArenaChunkBytes, round_up(bytes, kHugePageBytes));
      auto* base = static_cast<char*>(allocate_huge(size));
      current_ = &chunks_.emplace(base, Chunk{base, size, 0, 0}).first->second;
    }
    void* p = current_->base + current_->used;
    current_->used += bytes;
    ++current_->live;
    return p;
  }

  void deallocate(void* p) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = chunks_.upper_bound(static_cast<char*>(p));
    if (it == chunks_.begin()) return;  // not ours: cannot happen through HugePageAllocator
    --it;
    Chunk& c = it->second;
    if (--c.live > 0) return;
    if (&c == current_) {
      c.used = 0;  // keep the current chunk (and its faulted huge pages) for the next store
      return;
    }
    free_huge(it->first);
    chunks_.erase(it);
  }

 private:
  static constexpr std::size_t kAlign = 64;  // a cache line: every store starts on one
  struct Chunk {
    char* base;
    std::size_t size, used, live;
  };
  std::mutex mutex_;
  std::map<char*, Chunk> chunks_;  // by base address
  Chunk* current_ = nullptr;
};

Arena& arena() {
  static Arena* a = new Arena;  // never destroyed: stores may outlive static destruction order
  return *a;
}

}  // namespace

void* allocate_huge(std::size_t bytes) {
  const std::size_t rounded = round_up(bytes, kHugePageBytes);
  void* p = ::operator new(rounded, std::align_val_t{kHugePageBytes});
  // Advice only: refused (THP off, an old kernel) the block simply stays on small pages.
  (void)::madvise(p, rounded, MADV_HUGEPAGE);
  return p;
}

void free_huge(void* p) noexcept { ::operator delete(p, std::align_val_t{kHugePageBytes}); }

void* allocate_huge_shared(std::size_t bytes) { return arena().allocate(bytes); }
void free_huge_shared(void* p) noexcept { arena().deallocate(p); }

}  // namespace inferlab
