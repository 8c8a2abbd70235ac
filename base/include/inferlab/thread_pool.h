// A fixed pool of worker threads with a blocking parallel_for. Kernels split work by
// output rows or heads; one call per matmul/attention, never per element.
//
// Synchronisation: an idle worker first spins (polling an atomic job generation with pause
// instructions, yielding between polls) for up to spin_us microseconds, then sleeps on a
// condition variable; the caller likewise spins before sleeping while the last chunks finish. A
// decode step issues a few hundred dispatches tens of microseconds apart, so a worker usually
// catches the next one while spinning instead of paying a futex wake-up; the yield keeps the
// spin from starving other threads on an oversubscribed machine
// (tests/bench/bench_decode_overheads.cpp measures the per-dispatch cost).
#pragma once
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace inferlab {

class ThreadPool {
 public:
  // threads <= 0 picks std::thread::hardware_concurrency(). spin_us: how long an idle thread
  // spins before sleeping (0: sleep at once).
  explicit ThreadPool(int threads = 0, int spin_us = kDefaultSpinUs);
  static constexpr int kDefaultSpinUs = 100;
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) over disjoint chunks covering [0, n); the caller's thread takes a
  // chunk too. `grain` is the smallest chunk worth a thread. Blocks until all chunks finish;
  // the first exception thrown by fn is rethrown here.
  void parallel_for(std::size_t n, const std::function<void(std::size_t, std::size_t)>& fn,
                    std::size_t grain = 1);

  // parallel_for calls handed to the workers so far (calls run inline on the caller are not
  // counted): what the per-op synchronisation cost multiplies.
  std::uint64_t dispatches() const { return dispatches_.load(std::memory_order_relaxed); }

 private:
  void worker_loop(int index);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(std::size_t, std::size_t)>* job_ = nullptr;
  std::size_t job_n_ = 0, job_chunk_ = 0, job_chunks_ = 0;
  std::size_t next_chunk_ = 0;
  std::atomic<std::size_t> finished_chunks_{0};  // written under mutex_, read while spinning
  std::atomic<std::uint64_t> generation_{0};     // likewise
  std::atomic<std::uint64_t> dispatches_{0};
  std::exception_ptr error_;
  std::atomic<bool> stop_{false};
  int spin_us_;
};

}  // namespace inferlab
