#ifndef LLM42_ENGINE_LOAD_PROGRESS_H_
#define LLM42_ENGINE_LOAD_PROGRESS_H_

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <thread>

#include "absl/status/status.h"
#include "lib/engine/testing_hooks.h"

namespace llm42 {

// How far a session's creation has got (0..1), and whether it is to stop: written by the thread
// that creates the session (Session::Create), read and cancelled from any thread
// (llm42_session_create_async polls it; nothing calls back into the host).
class LoadProgress {
 public:
  double fraction() const { return fraction_.load(std::memory_order_relaxed); }
  void Cancel() { cancelled_.store(true, std::memory_order_relaxed); }
  bool cancelled() const { return cancelled_.load(std::memory_order_relaxed); }

  // Records that the creation reached `fraction` (it never goes back), then says whether to go on:
  // CANCELLED once Cancel was called.
  absl::Status Reach(double fraction) {
    if (const int32_t delay = TestingHooks::LoadStageDelayMs().load(std::memory_order_relaxed); delay > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(delay));
    }
    double now = fraction_.load(std::memory_order_relaxed);
    while (now < fraction && !fraction_.compare_exchange_weak(now, std::min(fraction, 1.0))) {
    }
    if (cancelled()) return absl::CancelledError("the session's creation was cancelled");
    return absl::OkStatus();
  }

 private:
  std::atomic<double> fraction_{0.0};
  std::atomic<bool> cancelled_{false};
};

}  // namespace llm42

#endif  // LLM42_ENGINE_LOAD_PROGRESS_H_
