// ThreadPool: persistent workers that pull chunks of one parallel_for at a time.
// The caller takes chunks too, so a pool of size 1 has no workers and runs everything inline.
#include "inferlab/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <exception>
#include <thread>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace inferlab {
namespace {

// Set while a thread runs a chunk: a nested parallel_for from inside fn runs inline instead of
// waiting on workers that are busy with the outer call.
thread_local bool t_in_job = false;

// The pool's job state, by reference (the fields are private members of ThreadPool).
struct JobState {
  const std::function<void(std::size_t, std::size_t)>*& job;
  std::size_t& n;
  std::size_t& chunk;
  std::size_t& chunks;
  std::size_t& next;
  std::atomic<std::size_t>& finished;
  std::exception_ptr& error;
  std::condition_variable& done;
};

// Takes chunks of the current job until none is left. Called with `lock` held and returns
// with it held. Once a chunk has thrown, chunks not yet started are counted without running.
void run_chunks(std::unique_lock<std::mutex>& lock, JobState s) {
  t_in_job = true;
  while (s.job != nullptr && s.next < s.chunks) {
    const std::size_t c = s.next++;
    if (s.error) {
      ++s.finished;
      continue;
    }
    const std::size_t begin = c * s.chunk;
    const std::size_t end = std::min(s.n, begin + s.chunk);
    const auto* fn = s.job;
    lock.unlock();
    std::exception_ptr err;
    try {
      (*fn)(begin, end);
    } catch (...) {
      err = std::current_exception();
    }
    lock.lock();
    if (err && !s.error) s.error = err;
    if (++s.finished == s.chunks) s.done.notify_all();
  }
  t_in_job = false;
}

// Spins until done() or spin_us have passed; true when done() held.
template <class Done>
bool spin_until(Done done, int spin_us) {
  if (spin_us <= 0) return done();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::microseconds(spin_us);
  for (;;) {
    for (int i = 0; i < 16; ++i) {
      if (done()) return true;
#if defined(__x86_64__) || defined(__i386__)
      _mm_pause();
#endif
    }
    // Yield between polls: on a machine with more runnable threads than cores, a thread that
    // only pauses burns the slice the thread it waits for needs.
    std::this_thread::yield();
    if (std::chrono::steady_clock::now() >= deadline) return done();
  }
}

}  // namespace

ThreadPool::ThreadPool(int threads, int spin_us) : spin_us_(spin_us) {
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  workers_.reserve(static_cast<std::size_t>(threads - 1));
  for (int i = 0; i < threads - 1; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::parallel_for(std::size_t n, const std::function<void(std::size_t, std::size_t)>& fn,
                              std::size_t grain) {
  if (n == 0) return;
  if (grain == 0) grain = 1;
  // A few chunks per thread balance uneven progress (the machine may be shared); a chunk is
  // never smaller than grain.
  const std::size_t max_chunks = static_cast<std::size_t>(size()) * 3;
  std::size_t chunks = std::min((n + grain - 1) / grain, max_chunks);
  if (chunks <= 1 || workers_.empty() || t_in_job) {
    fn(0, n);
    return;
  }
  const std::size_t chunk = std::max(grain, (n + chunks - 1) / chunks);  // only the last is shorter
  chunks = (n + chunk - 1) / chunk;

  std::unique_lock<std::mutex> lock(mutex_);
  if (job_ != nullptr) {
    // Another thread is using the pool right now: run this call on the caller's thread.
    lock.unlock();
    fn(0, n);
    return;
  }
  job_ = &fn;
  job_n_ = n;
  job_chunk_ = chunk;
  job_chunks_ = chunks;
  next_chunk_ = 0;
  finished_chunks_ = 0;
  error_ = nullptr;
  generation_.fetch_add(1, std::memory_order_release);
  dispatches_.fetch_add(1, std::memory_order_relaxed);
  wake_.notify_all();  // reaches the sleeping workers; spinning ones see generation_

  JobState state{job_, job_n_, job_chunk_, job_chunks_, next_chunk_, finished_chunks_, error_, done_};
  run_chunks(lock, state);
  if (finished_chunks_ != job_chunks_) {  // others still run chunks: spin a while, then sleep
    const std::size_t chunks_now = job_chunks_;
    lock.unlock();
    spin_until([&] { return finished_chunks_.load(std::memory_order_acquire) == chunks_now; }, spin_us_);
    lock.lock();
  }
  done_.wait(lock, [this] { return finished_chunks_ == job_chunks_; });
  std::exception_ptr err = error_;
  error_ = nullptr;
  job_ = nullptr;
  lock.unlock();
  if (err) std::rethrow_exception(err);
}

void ThreadPool::worker_loop(int /*index*/) {
  std::uint64_t seen = 0;
  JobState state{job_, job_n_, job_chunk_, job_chunks_, next_chunk_, finished_chunks_, error_, done_};
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    lock.unlock();  // spin for the next job before sleeping on wake_
    spin_until([&] { return stop_.load(std::memory_order_acquire) || generation_.load(std::memory_order_acquire) != seen; },
               spin_us_);
    lock.lock();
    wake_.wait(lock, [&] { return stop_ || (generation_ != seen && job_ != nullptr); });
    if (stop_) return;
    seen = generation_;
    run_chunks(lock, state);
  }
}

}  // namespace inferlab
