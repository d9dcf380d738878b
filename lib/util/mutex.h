#ifndef LLM42_UTIL_MUTEX_H_
#define LLM42_UTIL_MUTEX_H_

// llm42's mutex: absl::Mutex with the same interface subset the engine uses, plus, in
// ThreadSanitizer builds, the happens-before edges of each hand-off. Debian's Abseil is a
// prebuilt library not compiled with -fsanitize=thread, so TSan cannot see absl::Mutex order
// memory and reports every guarded access as a race; the annotations (release before the lock
// is given up, acquire after it is taken) tell it what the mutex guarantees. absl also
// evaluates a waiter's condition on the unlocking thread, inside Unlock, where no annotation
// can order it; so under TSan Await waits on a CondVar that every Unlock signals and evaluates
// its condition itself, on its own thread with the lock held. In other builds the annotations
// compile to nothing and Await is absl's.
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

#if defined(__SANITIZE_THREAD__)
#define LLM42_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define LLM42_TSAN 1
#endif
#endif
#ifdef LLM42_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace llm42 {

class ABSL_LOCKABLE Mutex {
 public:
  void Lock() ABSL_EXCLUSIVE_LOCK_FUNCTION() {
    mu_.Lock();
    Acquired();
  }
  void Unlock() ABSL_UNLOCK_FUNCTION() {
#ifdef LLM42_TSAN
    changed_.SignalAll();
#endif
    Released();
    mu_.Unlock();
  }
  // As absl::Mutex's: returns (with the mutex held) once the condition holds.
  void Await(const absl::Condition& cond) ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
#ifdef LLM42_TSAN
    while (!cond.Eval()) Wait(absl::InfiniteFuture());
#else
    mu_.Await(cond);
#endif
  }
  bool AwaitWithTimeout(const absl::Condition& cond, absl::Duration timeout) ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
#ifdef LLM42_TSAN
    const absl::Time deadline = absl::Now() + timeout;
    while (!cond.Eval()) {
      if (absl::Now() >= deadline) return false;
      Wait(deadline);
    }
    return true;
#else
    return mu_.AwaitWithTimeout(cond, timeout);
#endif
  }
  // The ABI's timeouts: waits up to timeout_ms, or forever when it is negative.
  bool AwaitMs(const absl::Condition& cond, int32_t timeout_ms) ABSL_EXCLUSIVE_LOCKS_REQUIRED(this) {
    if (timeout_ms < 0) {
      Await(cond);
      return true;
    }
    return AwaitWithTimeout(cond, absl::Milliseconds(timeout_ms));
  }

 private:
  void Acquired() {
#ifdef LLM42_TSAN
    __tsan_acquire(this);
#endif
  }
  void Released() {
#ifdef LLM42_TSAN
    __tsan_release(this);
#endif
  }
#ifdef LLM42_TSAN
  void Wait(absl::Time deadline) {
    Released();
    changed_.WaitWithDeadline(&mu_, deadline);
    Acquired();
  }
  absl::CondVar changed_;
#endif

  absl::Mutex mu_;
};

class ABSL_SCOPED_LOCKABLE MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ABSL_EXCLUSIVE_LOCK_FUNCTION(mu) : mu_(mu) { mu_->Lock(); }
  ~MutexLock() ABSL_UNLOCK_FUNCTION() { mu_->Unlock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  Mutex* const mu_;
};

}  // namespace llm42

#endif  // LLM42_UTIL_MUTEX_H_
