// HugeVector (inferlab/huge_pages.h): the three size classes keep their contents, get the
// alignment each promises, and the shared chunks are reused once every store in them is gone.
#include <gtest/gtest.h>

#include <cstdint>
#include <numeric>
#include <vector>

#include "inferlab/huge_pages.h"

namespace inferlab {
namespace {

std::uintptr_t address(const void* p) { return reinterpret_cast<std::uintptr_t>(p); }

TEST(HugePages, EverySizeClassKeepsItsContentsAndAlignment) {
  for (std::size_t bytes : {std::size_t{1000}, kHugeArenaMinBytes, std::size_t{700} << 10, kHugePageBytes,
                            (std::size_t{5} << 20) + 12345}) {
    SCOPED_TRACE(bytes);
    HugeVector<std::uint32_t> v(bytes / 4);
    std::iota(v.begin(), v.end(), 7u);
    HugeVector<std::uint32_t> copy = v;  // through the allocator again
    for (std::size_t i = 0; i < v.size(); i += 997) ASSERT_EQ(copy[i], 7u + i);
    if (bytes >= kHugePageBytes) {
      EXPECT_EQ(address(v.data()) % kHugePageBytes, 0u);
    } else if (bytes >= kHugeArenaMinBytes) {
      EXPECT_EQ(address(v.data()) % 64, 0u);
    }
  }
}

TEST(HugePages, SharedChunksAreReusedOnceTheirStoresAreGone) {
  if (kHugeArenaMinBytes >= kHugePageBytes) GTEST_SKIP() << "no shared chunks in this build (AddressSanitizer)";
  const std::size_t n = kHugeArenaMinBytes * 2;  // bytes of each store, in the arena's range
  std::vector<HugeVector<std::uint8_t>> stores;
  for (int i = 0; i < 40; ++i) stores.emplace_back(n, static_cast<std::uint8_t>(i));  // 5 MiB: one chunk
  for (int i = 0; i < 40; ++i) ASSERT_EQ(stores[static_cast<std::size_t>(i)][n - 1], i);
  // Carved front to back: consecutive stores of one chunk sit n bytes apart.
  EXPECT_EQ(address(stores[1].data()) - address(stores[0].data()), n);
  const std::uintptr_t first = address(stores[0].data());
  stores.clear();
  // The chunk was the current one: emptied, it is carved again from its start.
  HugeVector<std::uint8_t> again(n, 1);
  EXPECT_EQ(address(again.data()), first);
}

}  // namespace
}  // namespace inferlab
