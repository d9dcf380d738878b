#ifndef LLM42_ENGINE_TESTING_HOOKS_H_
#define LLM42_ENGINE_TESTING_HOOKS_H_

#include <atomic>
#include <cstdint>

namespace llm42 {

// The process-wide hooks of llm42_testing.h that are not part of a determinism policy, and the
// engine's own for C++ tests: each off (0) unless a test turns it on. Read on every use, so a
// test can turn one on and off again.
struct TestingHooks {
  // llm42_testing_set_load_stage_delay: every stage of every session creation takes at least this
  // long (LoadProgress::Reach), so that a test can watch a load's progress and cancel it mid-way.
  static std::atomic<int32_t>& LoadStageDelayMs() {
    static std::atomic<int32_t> ms{0};
    return ms;
  }
  // llm42_testing_fail_requests_after: a request that has committed this many tokens fails with
  // INTERNAL (Engine::CommitTokens), as a request whose forward pass broke would.
  static std::atomic<int32_t>& FailRequestsAfterTokens() {
    static std::atomic<int32_t> tokens{0};
    return tokens;
  }
  // C++ tests only: a session created while it is on draws and controls rows where the logits
  // are (EngineConfig::device_draws) on the CPU backend too, so that the path a device takes
  // runs in every suite.
  static std::atomic<int32_t>& DrawOnCpuBackend() {
    static std::atomic<int32_t> on{0};
    return on;
  }
};

}  // namespace llm42

#endif  // LLM42_ENGINE_TESTING_HOOKS_H_
