// A fixed pool of worker threads with a blocking parallel_for. Kernels split work by
// output rows or heads; one call per matmul/attention, never per element.
#pragma once
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace inferlab {

class ThreadPool {
 public:
  // threads <= 0 picks std::thread::hardware_concurrency().
  explicit ThreadPool(int threads = 0);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return static_cast<int>(workers_.size()) + 1; }

  // Calls fn(begin, end) over disjoint chunks covering [0, n); the caller's thread takes a
  // chunk too. `grain` is the smallest chunk worth a thread. Blocks until all chunks finish;
  // the first exception thrown by fn is rethrown here.
  void parallel_for(std::size_t n, const std::function<void(std::size_t, std::size_t)>& fn,
                    std::size_t grain = 1);

 private:
  void worker_loop(int index);

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const std::function<void(std::size_t, std::size_t)>* job_ = nullptr;
  std::size_t job_n_ = 0, job_chunk_ = 0, job_chunks_ = 0;
  std::size_t next_chunk_ = 0, finished_chunks_ = 0;
  std::uint64_t generation_ = 0;
  std::exception_ptr error_;
  bool stop_ = false;
};

}  // namespace inferlab
