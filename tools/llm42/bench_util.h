#ifndef LLM42_TOOLS_LLM42_BENCH_UTIL_H_
#define LLM42_TOOLS_LLM42_BENCH_UTIL_H_

#include <algorithm>
#include <vector>

#include "lib/engine/session.h"

namespace llm42::cli {

// The p-quantile (0..1) of `v`, nearest rank.
inline double Percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
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
