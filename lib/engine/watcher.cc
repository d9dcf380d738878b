#include "lib/engine/watcher.h"

#include <algorithm>

namespace llm42 {

void Watcher::Notify(uint64_t tag) {
  MutexLock lock(&mu_);
  if (queued_.insert(tag).second) ready_.push_back(tag);
}

bool Watcher::Wait(uint64_t* tags, size_t capacity, size_t* n, int32_t timeout_ms) {
  MutexLock lock(&mu_);
  auto news = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return woken_ || !ready_.empty(); };
  const bool any = mu_.AwaitMs(absl::Condition(&news), timeout_ms);
  woken_ = false;
  *n = std::min(capacity, ready_.size());
  for (size_t i = 0; i < *n; ++i) {
    tags[i] = ready_[i];
    queued_.erase(ready_[i]);
  }
  ready_.erase(ready_.begin(), ready_.begin() + static_cast<std::ptrdiff_t>(*n));
  return any;
}

void Watcher::Wake() {
  MutexLock lock(&mu_);
  woken_ = true;
}

}  // namespace llm42
