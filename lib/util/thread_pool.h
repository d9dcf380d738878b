#ifndef LLM42_UTIL_THREAD_POOL_H_
#define LLM42_UTIL_THREAD_POOL_H_

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace llm42 {

// A fixed set of workers for the forward pass. Each op is a fork-join over all threads; the
// caller's thread is worker 0. Workers spin briefly before sleeping because an op lasts
// microseconds during decode, and a condition-variable wakeup per op would cost more than the
// op itself.
class ThreadPool {
 public:
  explicit ThreadPool(int n_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }

  // Runs fn(thread_index) once on every thread and returns when all have finished.
  void RunOnAll(const std::function<void(int)>& fn);

  // Calls fn(begin, end) over [0, n) in chunks of `grain` items, chunks handed out dynamically.
  void ParallelFor(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

  // The same with guided chunks: each a (2 x threads)th of what is left, rounded up to a multiple
  // of `align`, at least min_grain: a few large grabs, then small ones, so that the threads finish
  // together (decode: a GEMV's last fixed-size chunk kept the other thread waiting ~5 us per
  // matrix). Each chunk's size depends only on where it starts, so the chunk boundaries depend
  // on n, min_grain and align alone, never on timing.
  void ParallelForGuided(int64_t n, int64_t min_grain, int64_t align,
                         const std::function<void(int64_t, int64_t)>& fn);

 private:
  void WorkerLoop(int index);

  const int n_threads_;
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  std::atomic<const std::function<void(int)>*> job_{nullptr};
};

}  // namespace llm42

#endif  // LLM42_UTIL_THREAD_POOL_H_
