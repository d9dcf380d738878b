#ifndef LLM42_BACKEND_STEP_RECORDINGS_H_
#define LLM42_BACKEND_STEP_RECORDINGS_H_

#include <cstdint>
#include <functional>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace llm42 {

// When a device backend records a forward pass's ops (a CUDA graph) and when it replays one:
// the policy, device-free so that it is tested on any machine (tests/step_recordings_test.cc);
// lib/backend/cuda owns the recordings themselves, as opaque handles with a release function.
//
// A step is named by its key: everything on the host that decides which kernels run with which
// arguments (the rows, their schedules, the attention plan's shape, the caller). Its recording
// holds device addresses, so every recording is dropped once the device's allocations change
// (a buffer grown may have moved). The first step of a key runs as it is, which also does the
// one-time work recording cannot hold (algorithm choices and their checks, buffers grown);
// the second is recorded and replayed; later ones replay. A key whose recording failed (an op
// that a recording cannot hold, such as a copy from the host) is never tried again.
// The rows a step of m rows runs as where steps are recorded per bucket of row counts (padding
// rows fill the rest; Backend::StepRows): 1, 2, 4, 8, then multiples of 8 up to 64 and of 32
// up to max_rows; m itself past max_rows.
int64_t StepRowBucket(int64_t m, int64_t max_rows);

class StepRecordings {
 public:
  using Key = std::vector<int64_t>;
  using Release = std::function<void(void*)>;

  // At most `capacity` recordings (then all are dropped and recorded anew).
  StepRecordings(Release release, size_t capacity = 64) : release_(std::move(release)), capacity_(capacity) {}
  StepRecordings(const StepRecordings&) = delete;
  StepRecordings& operator=(const StepRecordings&) = delete;
  ~StepRecordings() { Clear(); }

  enum class Action { kRun, kRecord, kReplay };
  // What to do for a step of `key` on a device whose allocations are now `allocations` (a
  // count that changes whenever device memory is allocated or freed); for kReplay, *recording
  // is the handle to launch.
  Action Next(const Key& key, uint64_t allocations, void** recording);
  // The step of `key` was recorded as `recording` (owned from now on), with the device's
  // allocations then `allocations`. False when they changed since Next: the recording was
  // released unused, and the step must run as it is.
  bool Recorded(const Key& key, void* recording, uint64_t allocations);
  // The step of `key` could not be recorded: it runs as it is from now on.
  void Refused(const Key& key);
  // Every recording released.
  void Clear();

  size_t size() const { return recordings_.size(); }

 private:
  Release release_;
  size_t capacity_;
  uint64_t allocations_ = 0;
  absl::flat_hash_map<Key, void*> recordings_;
  // Steps run per key not yet recorded; -1: refused.
  absl::flat_hash_map<Key, int> seen_;
};

}  // namespace llm42

#endif  // LLM42_BACKEND_STEP_RECORDINGS_H_
