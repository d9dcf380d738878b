#ifndef LLM42_ENGINE_STAT_H_
#define LLM42_ENGINE_STAT_H_

#include <cstdint>

namespace llm42 {

// The engine's counters, numbered as the C ABI's llm42_stat (c_api.cc static_asserts each
// value): one enum for the session's totals and each request's own.
enum class Stat : int32_t {
  kRequestsFinished = 0,  // session only
  kTokensGenerated = 1,
  kTokensVerified = 2,
  kVerifyPasses = 3,
  kRollbacks = 4,
  kTokensRolledBack = 5,
  kPrefillTokens = 6,
  kDecodeSteps = 7,
  kTimeToFirstTokenUs = 8,  // request only
  kPreemptions = 9,
  kTokensDecodedFixed = 10,
  kCachedPromptTokens = 11,  // prompt positions taken from the prefix cache, not prefilled
  kKvEvictions = 12,         // session only: cached KV blocks evicted to make room
  kKvWindowReleases = 13,    // session only: KV blocks released behind sliding windows
  kDraftTokens = 14,         // candidates drafted (RequestOptions::draft) rather than decoded
  kDraftTokensAccepted = 15, // of them, those the fixed replay agreed with (committed)
};
inline constexpr int32_t kStatCount = 16;

constexpr bool IsSessionStat(Stat s) {
  return s >= Stat::kRequestsFinished && s <= Stat::kDraftTokensAccepted && s != Stat::kTimeToFirstTokenUs;
}
constexpr bool IsRequestStat(Stat s) {
  return (s >= Stat::kTokensGenerated && s <= Stat::kCachedPromptTokens) || s == Stat::kDraftTokens ||
         s == Stat::kDraftTokensAccepted;
}

}  // namespace llm42

#endif  // LLM42_ENGINE_STAT_H_
