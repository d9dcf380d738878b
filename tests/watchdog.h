#ifndef LLM42_TESTS_WATCHDOG_H_
#define LLM42_TESTS_WATCHDOG_H_

// A deadlock guard for concurrency tests: unless disarmed (destroyed) within `seconds`, it
// prints every thread's stack to stderr (each thread dumps its own from a signal handler) and
// aborts, so that a hang fails the test with the evidence instead of running into CI's timeout.
// Elsewhere than Linux (Windows, under Wine) it aborts without the stacks.
#if defined(__linux__)
#include <dirent.h>
#include <execinfo.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace llm42::testing {

class Watchdog {
 public:
  explicit Watchdog(int seconds) {
#if defined(__linux__)
    // backtrace() loads libgcc (and allocates) on its first call: do that here, not in the
    // signal handler.
    void* frame[1];
    backtrace(frame, 1);
#endif
    thread_ = std::thread([this, seconds] { Run(seconds); });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      disarmed_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

 private:
#if defined(__linux__)
  static void DumpOwnStack(int) {
    void* frames[64];
    const int n = backtrace(frames, 64);
    char header[64];
    const int len = std::snprintf(header, sizeof header, "--- thread %ld\n", static_cast<long>(syscall(SYS_gettid)));
    (void)!write(STDERR_FILENO, header, static_cast<size_t>(len));
    backtrace_symbols_fd(frames, n, STDERR_FILENO);
  }
#endif

  void Run(int seconds) {
    std::unique_lock<std::mutex> lock(mu_);
    if (cv_.wait_for(lock, std::chrono::seconds(seconds), [this] { return disarmed_; })) return;
#if defined(__linux__)
    std::fprintf(stderr, "watchdog: no progress after %d s; every thread's stack follows\n", seconds);
    struct sigaction sa = {};
    sa.sa_handler = DumpOwnStack;
    sigaction(SIGUSR2, &sa, nullptr);
    const long self = syscall(SYS_gettid);
    if (DIR* dir = opendir("/proc/self/task")) {
      while (dirent* e = readdir(dir)) {
        const long tid = std::atol(e->d_name);
        if (tid <= 0 || tid == self) continue;
        syscall(SYS_tgkill, getpid(), tid, SIGUSR2);
        std::this_thread::sleep_for(std::chrono::milliseconds(50));  // one dump at a time
      }
      closedir(dir);
    }
#else
    std::fprintf(stderr, "watchdog: no progress after %d s\n", seconds);
#endif
    std::abort();
  }

  std::mutex mu_;
  std::condition_variable cv_;
  bool disarmed_ = false;
  std::thread thread_;
};

}  // namespace llm42::testing

#endif  // LLM42_TESTS_WATCHDOG_H_
