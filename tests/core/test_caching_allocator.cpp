// The CUDA device's caching pool policy, on the host with a counting fake allocator: size
// classes, reuse without raw allocations, release and retry when the raw allocator fails.
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>

#include "inferlab/device/caching_allocator.h"

namespace inferlab {
namespace {

TEST(CachingAllocator, SizeClassesWasteAtMostAnEighth) {
  EXPECT_EQ(caching_size_class(0), 512u);
  EXPECT_EQ(caching_size_class(1), 512u);
  EXPECT_EQ(caching_size_class(513), 1024u);
  EXPECT_EQ(caching_size_class(4096), 4096u);
  EXPECT_EQ(caching_size_class(4097), 4608u);          // 4096 + 4096/8
  EXPECT_EQ(caching_size_class(1u << 20), 1u << 20);
  EXPECT_EQ(caching_size_class((1u << 20) + 1), (1u << 20) + (1u << 17));
  for (std::size_t b = 1; b < (64u << 20); b = b * 3 + 1) {
    const std::size_t c = caching_size_class(b);
    ASSERT_GE(c, b);
    if (b > 4096) {
      ASSERT_LE(c - b, b / 8) << b;
    }
    ASSERT_EQ(caching_size_class(c), c) << b;  // a class is its own class
  }
}

struct Fake {
  int allocs = 0, frees = 0;
  std::size_t limit = ~std::size_t{0}, live = 0;
  std::set<void*> blocks;
};

TEST(CachingAllocator, ReusesAFreedBlockOfTheSameClass) {
  Fake f;
  {
    CachingAllocator pool(
        [&](std::size_t b) -> void* {
          if (f.live + b > f.limit) return nullptr;
          f.allocs++;
          f.live += b;
          void* p = std::malloc(b);
          f.blocks.insert(p);
          return p;
        },
        [&](void* p) {
          f.frees++;
          f.blocks.erase(p);
          std::free(p);
        });
    void* a = pool.allocate(1000);
    EXPECT_TRUE(pool.deallocate(a));
    EXPECT_FALSE(pool.deallocate(a));         // not handed out any more
    EXPECT_FALSE(pool.deallocate(&f));        // never handed out
    void* b = pool.allocate(900);             // same class (1024): the cached block
    EXPECT_EQ(b, a);
    EXPECT_EQ(pool.stats().raw_allocs, 1u);
    EXPECT_EQ(pool.stats().reuses, 1u);
    void* c = pool.allocate(5000);            // another class: a raw allocation
    EXPECT_NE(c, a);
    EXPECT_EQ(pool.stats().raw_allocs, 2u);
    EXPECT_EQ(pool.stats().bytes_in_use, 1024u + caching_size_class(5000));
    pool.deallocate(c);
    EXPECT_EQ(pool.stats().bytes_cached, caching_size_class(5000));
    // The raw allocator is full: the pool gives back its cache and retries once.
    f.limit = f.live;
    void* d = pool.allocate(100000);
    EXPECT_EQ(d, nullptr);  // still too big after the release
    EXPECT_EQ(pool.stats().bytes_cached, 0u);
    EXPECT_EQ(f.frees, 1);
    f.live -= caching_size_class(5000);
    void* e = pool.allocate(5000);
    EXPECT_NE(e, nullptr);
  }
  EXPECT_TRUE(f.blocks.empty());  // the destructor released everything, in use or cached
}

}  // namespace
}  // namespace inferlab
