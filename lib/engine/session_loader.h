#ifndef LLM42_ENGINE_SESSION_LOADER_H_
#define LLM42_ENGINE_SESSION_LOADER_H_

#include <cstdint>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "lib/engine/load_progress.h"
#include "lib/engine/options.h"
#include "lib/engine/session.h"
#include "lib/util/mutex.h"

namespace llm42 {

// Creates a session on a thread of its own (llm42_session_create_async), so a host with a frame
// loop or an event loop polls how far it has got instead of blocking, and can cancel it; nothing
// calls back into the host. Thread-safe.
class SessionLoader {
 public:
  explicit SessionLoader(SessionOptions options);
  // Cancels a load still running and waits for it; a session not taken goes with it.
  ~SessionLoader();

  double fraction() const;  // 1 once ended
  // True once the load has ended; waits up to timeout_ms (negative = forever).
  bool Wait(int32_t timeout_ms);
  void Cancel() { progress_.Cancel(); }
  // The session or why there is none; FailedPrecondition while running or once taken.
  absl::StatusOr<std::unique_ptr<Session>> Take();

 private:
  LoadProgress progress_;
  mutable Mutex mu_;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  bool taken_ ABSL_GUARDED_BY(mu_) = false;
  absl::StatusOr<std::unique_ptr<Session>> result_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace llm42

#endif  // LLM42_ENGINE_SESSION_LOADER_H_
