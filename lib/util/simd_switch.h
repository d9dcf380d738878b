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

// LLM42_CPU_SIMD=avx2 stops at the AVX2 kernels where the CPU has AVX-512 too: to measure and
// test, on one machine, what a CPU with AVX2 only runs.
inline bool SimdCappedAtAvx2() {
  const char* v = std::getenv("LLM42_CPU_SIMD");
  return v != nullptr && std::strcmp(v, "avx2") == 0;
}

}  // namespace llm42

#endif  // LLM42_UTIL_SIMD_SWITCH_H_
