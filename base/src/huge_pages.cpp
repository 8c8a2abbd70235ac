#include "inferlab/huge_pages.h"

#include <sys/mman.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <string>
#include <cstdint>
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
    free_huge(it->first, c.size);
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
#if defined(INFERLAB_HUGE_PAGES_ASAN)
  // Through the default allocator, so AddressSanitizer sees overflows past the store.
  void* p = ::operator new(rounded, std::align_val_t{kHugePageBytes});
#else
  // Fresh pages of its own mapping: memory the heap hands back may already be faulted in on
  // 4 KiB pages (a loader's freed buffers), where madvise no longer changes anything — TinyLlama's
  // q and o projections sat on 4 KiB pages that way, the larger matrices on huge ones (smaps,
  // 2026-12-02). Mapped 2 MiB larger, then trimmed to a 2 MiB-aligned start.
  void* raw = ::mmap(nullptr, rounded + kHugePageBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto start = reinterpret_cast<std::uintptr_t>(raw);
  const std::uintptr_t aligned = round_up(start, kHugePageBytes);
  if (aligned > start) ::munmap(raw, aligned - start);
  const std::size_t tail = start + rounded + kHugePageBytes - (aligned + rounded);
  if (tail > 0) ::munmap(reinterpret_cast<void*>(aligned + rounded), tail);
  void* p = reinterpret_cast<void*>(aligned);
#endif
  // Advice only: refused (THP off, an old kernel) the block simply stays on small pages.
  (void)::madvise(p, rounded, MADV_HUGEPAGE);
  return p;
}

void free_huge(void* p, std::size_t bytes) noexcept {
  if (p == nullptr) return;
#if defined(INFERLAB_HUGE_PAGES_ASAN)
  (void)bytes;
  ::operator delete(p, std::align_val_t{kHugePageBytes});
#else
  ::munmap(p, round_up(bytes, kHugePageBytes));
#endif
}

void* allocate_huge_shared(std::size_t bytes) { return arena().allocate(bytes); }
void free_huge_shared(void* p) noexcept { arena().deallocate(p); }

std::size_t last_level_cache_bytes() {
  std::size_t best = 0;
  int best_level = 0;
  for (int i = 0; i < 16; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream level_file(dir + "level"), size_file(dir + "size");
    int level = 0;
    std::string size;
    if (!(level_file >> level) || !(size_file >> size) || size.empty()) continue;
    std::size_t digits = 0;
    while (digits < size.size() && std::isdigit(static_cast<unsigned char>(size[digits]))) ++digits;
    if (digits == 0) continue;
    std::size_t bytes = std::stoull(size.substr(0, digits));
    const char unit = digits < size.size() ? static_cast<char>(std::toupper(static_cast<unsigned char>(size[digits]))) : 'B';
    if (unit == 'K') bytes <<= 10;
    else if (unit == 'M') bytes <<= 20;
    else if (unit == 'G') bytes <<= 30;
    if (level > best_level || (level == best_level && bytes > best)) best = bytes, best_level = level;
  }
  return best;
}

std::size_t dram_stream_bytes() {
  static const std::size_t bytes = round_up(std::max(std::size_t{256} << 20, 2 * last_level_cache_bytes()), kHugePageBytes);
  return bytes;
}

}  // namespace inferlab
