#ifndef LLM42_UTIL_SIMD_SWITCH_H_
#define LLM42_UTIL_SIMD_SWITCH_H_

#include <cstdlib>
#include <cstring>

namespace llm42 {

// LLM42_CPU_SIMD=off (or 0) makes every kernel with a SIMD path take its portable one,
// process-wide: to compare machines, and for the tests that rerun a generation as a CPU without
// AVX2 would. Read once per caller (the callers cache it in a static).
inline bool SimdDisabledByEnvironment() {
  const char* v = std::getenv("LLM42_CPU_SIMD");
  return v != nullptr && (std::strcmp(v, "off") == 0 || std::strcmp(v, "0") == 0);
}

}  // namespace llm42

#endif  // LLM42_UTIL_SIMD_SWITCH_H_
