#include "lib/engine/engine_stats.h"

#include "absl/strings/str_format.h"
#include "lib/engine/request.h"
#include "lib/util/logging.h"

namespace llm42 {

void EngineStats::Count(Request& request, Stat which, int64_t n) {
  Add(which, n);
  request.Count(which, n);
}

void EngineStats::Check(bool ok, const char* invariant) {
  if (ok) return;
  violations_.fetch_add(1, std::memory_order_relaxed);
  Log(LogLevel::kError, "engine invariant violated: ", invariant);
}

void EngineStats::AddStepTimes(double forward_s, double logits_s, double host_s) {
  auto ns = [](double s) { return static_cast<int64_t>(s * 1e9); };
  forward_ns_.fetch_add(ns(forward_s), std::memory_order_relaxed);
  logits_ns_.fetch_add(ns(logits_s), std::memory_order_relaxed);
  host_ns_.fetch_add(ns(host_s), std::memory_order_relaxed);
  steps_timed_.fetch_add(1, std::memory_order_relaxed);
}

void EngineStats::AddControlledRow(double seconds) {
  controls_ns_.fetch_add(static_cast<int64_t>(seconds * 1e9), std::memory_order_relaxed);
  controlled_rows_.fetch_add(1, std::memory_order_relaxed);
}

EngineStats::StepTimes EngineStats::step_times() const {
  return StepTimes{steps_timed_.load(),
                   static_cast<double>(forward_ns_.load()) * 1e-9,
                   static_cast<double>(logits_ns_.load()) * 1e-9,
                   static_cast<double>(host_ns_.load()) * 1e-9,
                   controlled_rows_.load(),
                   static_cast<double>(controls_ns_.load()) * 1e-9};
}

std::string EngineStats::Json(int64_t kv_cache_tokens) const {
  const StepTimes t = step_times();
  return absl::StrFormat(
      "{\"requests_finished\":%d,\"tokens_generated\":%d,\"tokens_verified\":%d,"
      "\"verify_passes\":%d,\"rollbacks\":%d,\"tokens_rolled_back\":%d,\"prefill_tokens\":%d,"
      "\"decode_steps\":%d,\"preemptions\":%d,\"tokens_decoded_fixed\":%d,\"cached_prompt_tokens\":%d,"
      "\"kv_evictions\":%d,\"kv_window_releases\":%d,\"kv_blocks_in_use\":%d,\"kv_cache_tokens\":%d,"
      "\"step_forward_us\":%d,\"step_logits_us\":%d,\"step_host_us\":%d,\"controlled_rows\":%d,"
      "\"controls_us\":%d,\"draft_tokens\":%d,\"draft_tokens_accepted\":%d}",
      Get(Stat::kRequestsFinished), Get(Stat::kTokensGenerated),
      Get(Stat::kTokensVerified), Get(Stat::kVerifyPasses),
      Get(Stat::kRollbacks), Get(Stat::kTokensRolledBack),
      Get(Stat::kPrefillTokens), Get(Stat::kDecodeSteps),
      Get(Stat::kPreemptions), Get(Stat::kTokensDecodedFixed), Get(Stat::kCachedPromptTokens),
      Get(Stat::kKvEvictions), Get(Stat::kKvWindowReleases), blocks_in_use(), kv_cache_tokens, static_cast<int64_t>(t.forward_s * 1e6),
      static_cast<int64_t>(t.logits_s * 1e6), static_cast<int64_t>(t.host_s * 1e6), t.controlled_rows,
      static_cast<int64_t>(t.controls_s * 1e6), Get(Stat::kDraftTokens), Get(Stat::kDraftTokensAccepted));
}

}  // namespace llm42
