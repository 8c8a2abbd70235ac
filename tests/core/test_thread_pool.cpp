#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <set>
#include <stdexcept>
#include <thread>
#include <utility>
#include <vector>

#include "inferlab/thread_pool.h"

namespace inferlab {
namespace {

// Runs parallel_for and returns the chunks it produced, sorted by begin.
std::vector<std::pair<std::size_t, std::size_t>> chunks_of(ThreadPool& pool, std::size_t n, std::size_t grain) {
  std::mutex m;
  std::vector<std::pair<std::size_t, std::size_t>> chunks;
  pool.parallel_for(
      n,
      [&](std::size_t b, std::size_t e) {
        std::lock_guard<std::mutex> lock(m);
        chunks.emplace_back(b, e);
      },
      grain);
  std::sort(chunks.begin(), chunks.end());
  return chunks;
}

TEST(ThreadPool, SizeCountsTheCaller) {
  EXPECT_EQ(ThreadPool(1).size(), 1);
  EXPECT_EQ(ThreadPool(3).size(), 3);
  EXPECT_GE(ThreadPool(0).size(), 1);
}

TEST(ThreadPool, ChunksCoverTheRangeExactlyOnceAndRespectGrain) {
  ThreadPool pool(4);
  const std::size_t ns[] = {1, 2, 7, 9, 100, 1001};
  const std::size_t grains[] = {1, 3, 4, 64, 5000};
  for (std::size_t n : ns)
    for (std::size_t grain : grains) {
      SCOPED_TRACE("n=" + std::to_string(n) + " grain=" + std::to_string(grain));
      const auto chunks = chunks_of(pool, n, grain);
      ASSERT_FALSE(chunks.empty());
      std::size_t expect_begin = 0;
      for (std::size_t i = 0; i < chunks.size(); ++i) {
        EXPECT_EQ(chunks[i].first, expect_begin);
        EXPECT_LT(chunks[i].first, chunks[i].second);
        if (i + 1 < chunks.size()) {
          EXPECT_GE(chunks[i].second - chunks[i].first, grain);
        }
        expect_begin = chunks[i].second;
      }
      EXPECT_EQ(expect_begin, n);
    }
}

TEST(ThreadPool, EveryIndexRunsOnceAcrossManyCalls) {
  ThreadPool pool(3);
  std::vector<std::atomic<int>> hits(5000);
  for (int rep = 0; rep < 200; ++rep)
    pool.parallel_for(hits.size(), [&](std::size_t b, std::size_t e) {
      for (std::size_t i = b; i < e; ++i) hits[i].fetch_add(1);
    });
  for (const auto& h : hits) ASSERT_EQ(h.load(), 200);
}

TEST(ThreadPool, SmallWorkRunsInlineOnTheCaller) {
  ThreadPool pool(4);
  const auto caller = std::this_thread::get_id();
  std::thread::id ran;
  pool.parallel_for(10, [&](std::size_t b, std::size_t e) {
    EXPECT_EQ(b, 0u);
    EXPECT_EQ(e, 10u);
    ran = std::this_thread::get_id();
  }, 100);
  EXPECT_EQ(ran, caller);
  pool.parallel_for(0, [&](std::size_t, std::size_t) { FAIL() << "called for n = 0"; });
}

TEST(ThreadPool, WorkersAndCallerShareTheWork) {
  // Two chunks; each waits until both are running, which only a worker plus the caller can
  // achieve (the wait is bounded so a broken pool fails instead of hanging).
  ThreadPool pool(2);
  std::mutex m;
  std::condition_variable cv;
  std::set<std::thread::id> ids;
  pool.parallel_for(2, [&](std::size_t, std::size_t) {
    std::unique_lock<std::mutex> lock(m);
    ids.insert(std::this_thread::get_id());
    cv.notify_all();
    cv.wait_for(lock, std::chrono::seconds(30), [&] { return ids.size() == 2; });
  });
  EXPECT_EQ(ids.size(), 2u);
  EXPECT_EQ(ids.count(std::this_thread::get_id()), 1u);
}

TEST(ThreadPool, ExceptionPropagatesAndPoolStaysUsable) {
  ThreadPool pool(3);
  EXPECT_THROW(pool.parallel_for(100,
                                 [](std::size_t b, std::size_t e) {
                                   if (b <= 50 && 50 < e) throw std::runtime_error("chunk 50");
                                 }),
               std::runtime_error);
  std::atomic<std::size_t> sum{0};
  pool.parallel_for(100, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i) sum += i;
  });
  EXPECT_EQ(sum.load(), 4950u);
}

TEST(ThreadPool, NestedCallsRunInline) {
  ThreadPool pool(3);
  std::atomic<int> total{0};
  pool.parallel_for(6, [&](std::size_t b, std::size_t e) {
    for (std::size_t i = b; i < e; ++i)
      pool.parallel_for(10, [&](std::size_t b2, std::size_t e2) { total += static_cast<int>(e2 - b2); });
  });
  EXPECT_EQ(total.load(), 60);
}

TEST(ThreadPool, ConcurrentCallersBothComplete) {
  ThreadPool pool(3);
  std::atomic<long> a{0}, b{0};
  auto work = [&](std::atomic<long>& acc) {
    for (int rep = 0; rep < 100; ++rep)
      pool.parallel_for(1000, [&](std::size_t lo, std::size_t hi) { acc += static_cast<long>(hi - lo); });
  };
  std::thread t([&] { work(a); });
  work(b);
  t.join();
  EXPECT_EQ(a.load(), 100000);
  EXPECT_EQ(b.load(), 100000);
}

}  // namespace
}  // namespace inferlab
