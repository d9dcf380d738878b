#include "lib/engine/session_loader.h"

#include <utility>

namespace llm42 {

SessionLoader::SessionLoader(SessionOptions options) {
  thread_ = std::thread([this, options = std::move(options)] {
    absl::StatusOr<std::unique_ptr<Session>> made = Session::Create(options, &progress_);
    MutexLock lock(&mu_);
    result_ = std::move(made);
    ended_ = true;
  });
}

SessionLoader::~SessionLoader() {
  progress_.Cancel();
  thread_.join();
}

double SessionLoader::fraction() const {
  MutexLock lock(&mu_);
  return ended_ ? 1.0 : progress_.fraction();
}

bool SessionLoader::Wait(int32_t timeout_ms) {
  MutexLock lock(&mu_);
  return mu_.AwaitMs(absl::Condition(&ended_), timeout_ms);
}

absl::StatusOr<std::unique_ptr<Session>> SessionLoader::Take() {
  MutexLock lock(&mu_);
  if (!ended_) return absl::FailedPreconditionError("the session is still loading");
  if (taken_) return absl::FailedPreconditionError("the session was taken already");
  taken_ = true;
  return std::move(result_);
}

}  // namespace llm42
