#ifndef LLM42_ENGINE_ENGINE_STATS_H_
#define LLM42_ENGINE_ENGINE_STATS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

namespace llm42 {

// Session-wide counters (llm42_stat without the request-only ones).
enum class SessionStat : int32_t {
  kRequestsFinished = 0,
  kTokensGenerated = 1,
  kTokensVerified = 2,
  kVerifyPasses = 3,
  kRollbacks = 4,
  kTokensRolledBack = 5,
  kPrefillTokens = 6,
  kDecodeSteps = 7,
  kPreemptions = 9,
  kTokensDecodedFixed = 10,
  kCachedPromptTokens = 11,  // prompt positions taken from the prefix cache, not prefilled
  kKvEvictions = 12,         // cached KV blocks evicted to make room
};

// The engine's counters: written by the engine thread, read from any thread.
class EngineStats {
 public:
  void Add(SessionStat which, int64_t n = 1) {
    counters_[Index(which)].fetch_add(n, std::memory_order_relaxed);
  }
  int64_t Get(SessionStat which) const { return counters_[Index(which)].load(); }

  void set_blocks_in_use(int64_t n) { blocks_in_use_.store(n, std::memory_order_relaxed); }
  int64_t blocks_in_use() const { return blocks_in_use_.load(); }

  // Records a failed invariant of docs/deterministic-requests.md (logged as an error); the
  // tests require the count to stay 0.
  void Check(bool ok, const char* invariant);
  int64_t invariant_violations() const { return violations_.load(); }

  std::string Json(int64_t kv_cache_tokens) const;

 private:
  static size_t Index(SessionStat which) { return static_cast<size_t>(which); }

  std::array<std::atomic<int64_t>, 13> counters_{};
  std::atomic<int64_t> blocks_in_use_{0}, violations_{0};
};

}  // namespace llm42

#endif  // LLM42_ENGINE_ENGINE_STATS_H_
