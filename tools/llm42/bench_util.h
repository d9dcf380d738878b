#ifndef LLM42_TOOLS_LLM42_BENCH_UTIL_H_
#define LLM42_TOOLS_LLM42_BENCH_UTIL_H_

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "lib/engine/session.h"
#include "lib/numerics/philox.h"

ABSL_DECLARE_FLAG(std::string, backend);
ABSL_DECLARE_FLAG(std::string, kv_dtype);
ABSL_DECLARE_FLAG(int32_t, threads);

namespace llm42::cli {

// A benchmark session's options from the shared flags (--backend, --kv_dtype, --threads),
// for `model`: without the prefix cache, which measures computation — a repeated prompt would
// not be computed at all (bench-chat turns it back on to measure the cache) — and with the KV
// cache resident from the start, as llama-bench and llama-batched-bench clear their KV buffer
// when they make a context, outside their timings (a warm-up cannot touch every page: the KV
// allocator hands freed blocks out again first).
inline SessionOptions BenchSessionOptions(const std::string& model) {
  SessionOptions o;
  o.model_path = model;
  o.threads = absl::GetFlag(FLAGS_threads);
  o.backend = absl::GetFlag(FLAGS_backend);
  o.kv_dtype = absl::GetFlag(FLAGS_kv_dtype);
  o.prefix_caching = false;
  o.kv_prefault = true;
  return o;
}

// Seconds from `since` until now.
inline double SecondsSince(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// The p-quantile (0..1) of `v`, nearest rank.
inline double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

// Token i of random prompt `stream`: uniform over the vocabulary past its first three ids (the
// special tokens of the presets), the same for the same stream and position.
inline int32_t RandomToken(int32_t vocab, uint64_t stream, int64_t i) {
  return 3 + static_cast<int32_t>(PhiloxUniform(stream, static_cast<uint64_t>(i)) * (vocab - 3));
}

// Milliseconds per engine step between two readings of Session::step_times: the forward pass,
// the logits' copy to the host, and the rest on the host.
struct StepSplit {
  double forward_ms = 0, logits_ms = 0, host_ms = 0;
};
inline StepSplit StepSplitBetween(const EngineStats::StepTimes& before, const EngineStats::StepTimes& after) {
  const double steps = static_cast<double>(std::max<int64_t>(1, after.steps - before.steps));
  return StepSplit{(after.forward_s - before.forward_s) / steps * 1000, (after.logits_s - before.logits_s) / steps * 1000,
                   (after.host_s - before.host_s) / steps * 1000};
}

// Pages the weights in and sizes the scratch buffers before a measurement starts.
inline void WarmUp(Session& session, int prompt_len) {
  RequestOptions warm;
  warm.has_prompt_tokens = true;
  warm.prompt_tokens.assign(static_cast<size_t>(std::max(1, std::min(prompt_len, 64))), 3);
  warm.max_tokens = 2;
  auto r = session.Submit(warm, nullptr);
  if (r.ok()) (*r)->Wait(-1);
}

}  // namespace llm42::cli

#endif  // LLM42_TOOLS_LLM42_BENCH_UTIL_H_
