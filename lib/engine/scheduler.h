#ifndef LLM42_ENGINE_SCHEDULER_H_
#define LLM42_ENGINE_SCHEDULER_H_

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "lib/engine/engine_stats.h"
#include "lib/engine/sequence.h"

namespace llm42 {

class KvCache;

enum class RowKind {
  kDecode,   // one token fed, the next sampled
  kVerify,   // a deterministic request's candidates replayed under fixed
  kPrefill,  // a chunk of a prompt (or of a preempted request's committed tokens)
};

// Rows [begin, begin + n) of one sequence in a step's batch.
struct PlanEntry {
  Sequence* seq;
  RowKind kind;
  int64_t begin;
  int64_t n;
};

struct SchedulerLimits {
  int64_t max_batch_tokens = 512;
  int64_t max_running_requests = 16;
  int32_t verify_group = 8;  // ready requests verified per step, at most
  // Every layer of the model attends to at most this many recent positions (0: some layer
  // attends to all): blocks behind every window are released as sequences advance.
  int64_t kv_window = 0;
};

// Admission, preemption and the plan of each engine step (continuous batching over a paged KV
// cache). Owns the waiting and running queues, both in arrival order. Engine thread only.
//
// A step's plan, within max_batch_tokens rows:
//   1. one decode row for every running request that is decoding, oldest first, so no request
//      ever waits on anyone's verification (docs/determinism-tests.md item 10);
//   2. verification with what is left: up to verify_group ready requests, oldest first, each
//      its candidates from the last committed token on; a window that does not fit is verified
//      in parts over several steps (every part commits what it agrees with);
//   3. prefill chunks, oldest first, as far as the KV pool allows.
// When more requests decode than the batch holds and some request awaits verification, the
// last decode row yields to one verify row, so verification always progresses.
// Before planning, each running sequence releases the cache blocks its rows will never read
// again (SchedulerLimits::kv_window): those before the window of the lowest position it may
// still write (its next row; a deterministic request's last committed token, from which a
// verify pass rewrites).
class Scheduler {
 public:
  Scheduler(SchedulerLimits limits, KvCache& cache, EngineStats& stats);

  void Enqueue(std::unique_ptr<Sequence> seq);
  // Removes the requests whose cancel was requested, from both queues, cache released.
  std::vector<std::unique_ptr<Sequence>> TakeCancelled();
  // Moves waiting requests to running (first come, first served) while the cache can start them.
  void Admit();
  // The next step's rows; may preempt the newest running requests when the pool is short.
  std::vector<PlanEntry> Plan();
  // Takes a finished request out of the running queue.
  std::unique_ptr<Sequence> Remove(Sequence* seq);
  // Everything, waiting and running (the session is shutting down).
  std::vector<std::unique_ptr<Sequence>> TakeAll();
  // Frees a sequence's cache blocks.
  void Release(Sequence& seq);

  bool idle() const { return running_.empty() && waiting_.empty(); }
  const std::vector<std::unique_ptr<Sequence>>& running() const { return running_; }
  size_t waiting() const { return waiting_.size(); }

 private:
  void Preempt(Sequence& victim);
  bool ReserveOrPreempt(Sequence& seq, int64_t positions);
  void UpdateBlocksInUse();
  // The blocks behind every running sequence's window (SchedulerLimits::kv_window).
  void ReleaseBehindWindows();

  SchedulerLimits limits_;
  KvCache& cache_;
  EngineStats& stats_;
  std::deque<std::unique_ptr<Sequence>> waiting_;
  std::vector<std::unique_ptr<Sequence>> running_;
  int64_t evictions_reported_ = 0;
  int64_t window_releases_reported_ = 0;
};

}  // namespace llm42

#endif  // LLM42_ENGINE_SCHEDULER_H_
