#ifndef LLM42_ENGINE_WATCHER_H_
#define LLM42_ENGINE_WATCHER_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_set.h"
#include "lib/util/mutex.h"

namespace llm42 {

// Lets one thread wait on many requests (llm42_watcher; the bindings' async dispatchers serve
// every stream of a session from one thread with it). Each watched request holds it shared and
// calls Notify with its tag after every commit of new tokens or text and when it ends; Wait
// hands out the tags that had news, each once however many events it had, in the order of their
// first event since they were last handed out. Thread-safe.
class Watcher {
 public:
  void Notify(uint64_t tag);
  // Up to `capacity` tags (the rest stay for the next call); waits up to timeout_ms (negative =
  // forever) for one, or for Wake. False when the wait ended with neither.
  bool Wait(uint64_t* tags, size_t capacity, size_t* n, int32_t timeout_ms);
  // Ends the current Wait, or the next one if none is waiting, at once.
  void Wake();

 private:
  Mutex mu_;
  std::vector<uint64_t> ready_ ABSL_GUARDED_BY(mu_);  // in event order
  absl::flat_hash_set<uint64_t> queued_ ABSL_GUARDED_BY(mu_);
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace llm42

#endif  // LLM42_ENGINE_WATCHER_H_
