#ifndef LLM42_ENGINE_ENGINE_STATS_H_
#define LLM42_ENGINE_ENGINE_STATS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <string>

#include "lib/engine/stat.h"

namespace llm42 {

class Request;

// The engine's counters: written by the engine thread, read from any thread.
class EngineStats {
 public:
  void Add(Stat which, int64_t n = 1) {
    counters_[Index(which)].fetch_add(n, std::memory_order_relaxed);
  }
  int64_t Get(Stat which) const { return counters_[Index(which)].load(); }
  // Adds n to the session's counter and to `request`'s own: the one call for every counter both
  // keep (the session-only and request-only ones use Add and Request::Count).
  void Count(Request& request, Stat which, int64_t n = 1);

  void set_blocks_in_use(int64_t n) { blocks_in_use_.store(n, std::memory_order_relaxed); }
  int64_t blocks_in_use() const { return blocks_in_use_.load(); }

  // Records a failed invariant of docs/deterministic-requests.md (logged as an error); the
  // tests require the count to stay 0.
  void Check(bool ok, const char* invariant);
  int64_t invariant_violations() const { return violations_.load(); }

  // Where the engine thread's steps spent their time, in total over the session: the forward
  // pass until the device had finished it, copying its logits to the host, and the rest of the
  // step on the host (scheduling, draws, commits, callbacks).
  // Of the host's time: the logit rows requests changed before sampling (logit bias, penalties,
  // grammar masks; Engine::ControlLogits) and the time that took.
  struct StepTimes {
    int64_t steps = 0;
    double forward_s = 0, logits_s = 0, host_s = 0;
    int64_t controlled_rows = 0;
    double controls_s = 0;
  };
  void AddStepTimes(double forward_s, double logits_s, double host_s);
  void AddControlledRow(double seconds);  // any thread
  StepTimes step_times() const;

  std::string Json(int64_t kv_cache_tokens) const;

 private:
  static size_t Index(Stat which) { return static_cast<size_t>(which); }

  std::array<std::atomic<int64_t>, kStatCount> counters_{};
  std::atomic<int64_t> blocks_in_use_{0}, violations_{0};
  std::atomic<int64_t> steps_timed_{0}, forward_ns_{0}, logits_ns_{0}, host_ns_{0};
  std::atomic<int64_t> controlled_rows_{0}, controls_ns_{0};
};

}  // namespace llm42

#endif  // LLM42_ENGINE_ENGINE_STATS_H_
