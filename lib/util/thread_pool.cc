#include "lib/util/thread_pool.h"

#include <algorithm>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define LLM42_CPU_RELAX() _mm_pause()
#else
#define LLM42_CPU_RELAX() std::this_thread::yield()
#endif

namespace llm42 {
namespace {
constexpr int kSpinIterations = 20000;
}

ThreadPool::ThreadPool(int n_threads) : n_threads_(std::max(1, n_threads)) {
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int i = 1; i < n_threads_; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
    generation_.fetch_add(1);
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::RunOnAll(const std::function<void(int)>& fn) {
  if (n_threads_ == 1) {
    fn(0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_.store(&fn, std::memory_order_relaxed);
    pending_.store(n_threads_ - 1, std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  cv_.notify_all();
  fn(0);
  for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < kSpinIterations) {
      LLM42_CPU_RELAX();
    } else {
      std::this_thread::yield();
    }
  }
}

void ThreadPool::ParallelFor(int64_t n, int64_t grain,
                             const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  grain = std::max<int64_t>(1, grain);
  if (n_threads_ == 1 || n <= grain) {
    fn(0, n);
    return;
  }
  std::atomic<int64_t> next{0};
  RunOnAll([&](int) {
    for (;;) {
      const int64_t begin = next.fetch_add(grain, std::memory_order_relaxed);
      if (begin >= n) break;
      fn(begin, std::min(n, begin + grain));
    }
  });
}

void ThreadPool::ParallelForGuided(int64_t n, int64_t min_grain, int64_t align,
                                   const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  align = std::max<int64_t>(1, align);
  min_grain = std::max<int64_t>(1, min_grain);
  if (n_threads_ == 1 || n <= min_grain) {
    fn(0, n);
    return;
  }
  const int64_t parts = 2 * static_cast<int64_t>(n_threads_);
  auto chunk = [&](int64_t begin) {
    const int64_t want = std::max(min_grain, (n - begin + parts - 1) / parts);
    return std::min(n - begin, (want + align - 1) / align * align);
  };
  std::atomic<int64_t> next{0};
  RunOnAll([&](int) {
    int64_t begin = next.load(std::memory_order_relaxed);
    for (;;) {
      if (begin >= n) break;
      const int64_t end = begin + chunk(begin);
      if (!next.compare_exchange_weak(begin, end, std::memory_order_relaxed)) continue;  // begin reloaded
      fn(begin, end);
      begin = next.load(std::memory_order_relaxed);
    }
  });
}

void ThreadPool::WorkerLoop(int index) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t gen = generation_.load(std::memory_order_acquire);
    for (int spins = 0; gen == seen && spins < kSpinIterations; ++spins) {
      LLM42_CPU_RELAX();
      gen = generation_.load(std::memory_order_acquire);
    }
    if (gen == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen; });
      gen = generation_.load(std::memory_order_acquire);
    }
    seen = gen;
    if (stop_.load()) return;
    (*job_.load(std::memory_order_relaxed))(index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace llm42
