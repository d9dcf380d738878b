/*
 * llm42_testing.h — hooks for tests. Not for production: they make a session's fast path wrong on
 * purpose so that tests and benchmarks can show that verification catches it
 * (docs/determinism-tests.md), or slow a session's creation down so that its progress can be
 * watched. Same conventions as llm42.h.
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

/* Makes every request of every session in this process fail with LLM42_INTERNAL ("injected
 * failure") once it has committed this many tokens (0, the default, turns it off), so that a test
 * can watch a request fail after it was accepted: its stream, the bindings' iteration and async
 * forms raise at the end. */
LLM42_API llm42_status llm42_testing_fail_requests_after(int32_t tokens);
/* Makes every stage of every session creation in this process take at least this long (0..10000
 * ms; 0, the default, turns it off), so that a test can watch llm42_session_create_async's
 * progress and cancel it mid-way. */
LLM42_API llm42_status llm42_testing_set_load_stage_delay(int32_t milliseconds);

#ifdef __cplusplus
}
#endif

#endif /* LLM42_LLM42_TESTING_H_ */
