#include "lib/engine/engine_stats.h"

#include "absl/strings/str_format.h"
#include "lib/util/logging.h"

namespace llm42 {

void EngineStats::Check(bool ok, const char* invariant) {
  if (ok) return;
  violations_.fetch_add(1, std::memory_order_relaxed);
  Log(LogLevel::kError, "engine invariant violated: ", invariant);
}

std::string EngineStats::Json(int64_t kv_cache_tokens) const {
  return absl::StrFormat(
      "{\"requests_finished\":%d,\"tokens_generated\":%d,\"tokens_verified\":%d,"
      "\"verify_passes\":%d,\"rollbacks\":%d,\"tokens_rolled_back\":%d,\"prefill_tokens\":%d,"
      "\"decode_steps\":%d,\"preemptions\":%d,\"tokens_decoded_fixed\":%d,\"cached_prompt_tokens\":%d,"
      "\"kv_evictions\":%d,\"kv_blocks_in_use\":%d,\"kv_cache_tokens\":%d}",
      Get(Stat::kRequestsFinished), Get(Stat::kTokensGenerated),
      Get(Stat::kTokensVerified), Get(Stat::kVerifyPasses),
      Get(Stat::kRollbacks), Get(Stat::kTokensRolledBack),
      Get(Stat::kPrefillTokens), Get(Stat::kDecodeSteps),
      Get(Stat::kPreemptions), Get(Stat::kTokensDecodedFixed), Get(Stat::kCachedPromptTokens),
      Get(Stat::kKvEvictions), blocks_in_use(), kv_cache_tokens);
}

}  // namespace llm42
