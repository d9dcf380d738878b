#include "lib/backend/step_recordings.h"

#include <algorithm>

namespace llm42 {
namespace {

// Keys that come and go (batch sizes, plans) are forgotten past this many.
constexpr size_t kMaxSeen = 4096;

}  // namespace

int64_t StepRowBucket(int64_t m, int64_t max_rows) {
  if (m < 1 || m > max_rows) return m;
  if (m <= 8) {
    int64_t b = 1;
    while (b < m) b *= 2;
    return b;
  }
  return std::min(max_rows, m <= 64 ? (m + 7) / 8 * 8 : (m + 31) / 32 * 32);
}

StepRecordings::Action StepRecordings::Next(const Key& key, uint64_t allocations, void** recording) {
  if (allocations != allocations_) {
    Clear();
    allocations_ = allocations;
  }
  if (auto it = recordings_.find(key); it != recordings_.end()) {
    *recording = it->second;
    return Action::kReplay;
  }
  if (seen_.size() >= kMaxSeen) seen_.clear();
  int& seen = seen_[key];
  if (seen < 0) return Action::kRun;
  if (seen == 0) {
    seen = 1;
    return Action::kRun;
  }
  return Action::kRecord;
}

bool StepRecordings::Recorded(const Key& key, void* recording, uint64_t allocations) {
  if (allocations != allocations_) {
    // Memory moved while it was recorded: the recording may hold old addresses. Recorded anew
    // at the key's next step.
    release_(recording);
    Clear();
    allocations_ = allocations;
    return false;
  }
  if (recordings_.size() >= capacity_) Clear();
  auto [it, inserted] = recordings_.try_emplace(key, recording);
  if (!inserted) {
    release_(it->second);
    it->second = recording;
  }
  seen_.erase(key);
  return true;
}

void StepRecordings::Refused(const Key& key) { seen_[key] = -1; }

void StepRecordings::Clear() {
  for (auto& [key, recording] : recordings_) release_(recording);
  recordings_.clear();
}

}  // namespace llm42
