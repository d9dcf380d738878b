/*
 * llm42_testing.h — fault injection for testing the determinism guarantee. Not for production:
 * these hooks make a session's fast path wrong on purpose so that tests and benchmarks can show
 * that verification catches it (docs/determinism-tests.md). Same conventions as llm42.h.
 */
#ifndef LLM42_LLM42_TESTING_H_
#define LLM42_LLM42_TESTING_H_

#include "llm42/llm42.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Force a rollback in this fraction (0..1) of verify windows. Off (0) by default. */
LLM42_API llm42_status llm42_determinism_set_mismatch_injection(llm42_determinism* policy,
                                                                double fraction_of_windows);
/* Add Gaussian noise of this stddev (0 <= stddev < 1e6) to fast-path logits. Off by default. */
LLM42_API llm42_status llm42_determinism_set_fast_path_noise(llm42_determinism* policy, double stddev);

#ifdef __cplusplus
}
#endif

#endif /* LLM42_LLM42_TESTING_H_ */
