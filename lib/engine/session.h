#ifndef LLM42_ENGINE_SESSION_H_
#define LLM42_ENGINE_SESSION_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <span>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "lib/backend/backend.h"
#include "lib/chat/chat_template.h"
#include "lib/engine/options.h"
#include "lib/engine/request.h"

namespace llm42 {

class GgufFile;
class KvCache;
class LlamaModel;
class Tokenizer;
struct Sequence;

enum class SessionStat : int32_t {
  kRequestsFinished = 0,
  kTokensGenerated = 1,
  kTokensVerified = 2,
  kVerifyPasses = 3,
  kRollbacks = 4,
  kTokensRolledBack = 5,
  kPrefillTokens = 6,
  kDecodeSteps = 7,
  kPreemptions = 9,
};

// A loaded model and the engine thread that serves its requests. Thread-safe.
//
// The engine runs continuous batching: every step is one forward pass over a mixed batch of
// one decode token for each running request that has its prompt in the cache and prefill
// chunks of the others, bounded by max_batch_tokens. Requests join (first come, first served)
// and leave between steps; at most max_running_requests run at once. KV memory is paged; when
// it runs out the newest running request is preempted (its blocks freed, its tokens
// recomputed when it is readmitted) so that older requests always progress.
class Session {
 public:
  static absl::StatusOr<std::unique_ptr<Session>> Create(const SessionOptions& options);
  // Cancels queued and running requests and joins the engine thread.
  ~Session();

  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const LlamaModel& model() const { return *model_; }
  int32_t context_length() const { return context_length_; }
  int64_t kv_cache_tokens() const;
  const SessionOptions& options() const { return options_; }
  // The schedule every forward pass of this session runs under (fixed in batch_invariant mode).
  Schedule schedule() const { return schedule_; }

  // Validates and queues a request. `handle` is passed to its callback.
  absl::StatusOr<std::shared_ptr<Request>> Submit(const RequestOptions& options, void* handle);

  // The chat messages (role, content) rendered in the model's chat format, assistant header
  // appended. UNSUPPORTED when the model's format is not one llm42 renders.
  absl::StatusOr<std::string> RenderChat(
      const std::vector<std::pair<std::string, std::string>>& messages) const;

  int64_t stat(SessionStat which) const;
  std::string StatsJson() const;
  // KV blocks in use; 0 once every request has finished (engine thread quiescent).
  int64_t kv_blocks_in_use() const;
  // Times an invariant of docs/deterministic-requests.md failed (logged as errors); tests
  // require 0.
  int64_t invariant_violations() const { return invariant_violations_.load(); }

 private:
  Session();
  void EngineLoop();
  // One scheduling step and forward pass; false when there was nothing to do.
  bool Step();
  void Admit();
  void Preempt(Sequence& victim);
  bool ReserveOrPreempt(Sequence& seq, int64_t positions);
  void Finish(Sequence& seq, FinishReason reason, absl::Status status);
  void Check(bool ok, const char* invariant);
  // Why `token`, making the sequence `length` long with `generated` tokens, would end it.
  FinishReason EndsRequest(const Sequence& s, int32_t token, int64_t length, int64_t generated,
                           bool stop_string) const;
  // Commits tokens in order, stopping at the first that ends the request; streams them.
  // True when the request finished (its cache is then released).
  bool CommitTokens(Sequence& s, std::span<const int32_t> tokens, std::span<const float> logprobs);
  // Compares a deterministic request's candidates with the fixed-schedule replay, commits the
  // agreed prefix plus the replay's token at the first disagreement, rolls back the rest.
  bool VerifyWindow(Sequence& s, const std::function<std::span<float>(int64_t)>& row);
  void Release(Sequence& seq);

  SessionOptions options_;
  std::shared_ptr<const GgufFile> file_;
  std::unique_ptr<Tokenizer> tokenizer_;
  absl::StatusOr<ChatTemplate> chat_template_ = absl::UnknownError("not detected");
  std::unique_ptr<LlamaModel> model_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<KvCache> cache_;
  int32_t context_length_ = 0;
  int64_t max_sequence_ = 0;  // min(context, KV capacity)
  Schedule schedule_ = Schedule::kFast;

  absl::Mutex mu_;
  std::deque<std::unique_ptr<Sequence>> incoming_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_arrival_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread engine_;

  // Engine thread only.
  std::deque<std::unique_ptr<Sequence>> waiting_;  // arrival order
  std::vector<std::unique_ptr<Sequence>> running_;  // arrival order
  std::vector<float> logits_;

  std::atomic<int64_t> requests_finished_{0}, tokens_generated_{0}, prefill_tokens_{0},
      decode_steps_{0}, preemptions_{0}, blocks_in_use_{0}, tokens_verified_{0},
      verify_passes_{0}, rollbacks_{0}, tokens_rolled_back_{0}, invariant_violations_{0};
};

}  // namespace llm42

#endif  // LLM42_ENGINE_SESSION_H_
