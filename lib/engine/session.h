#ifndef LLM42_ENGINE_SESSION_H_
#define LLM42_ENGINE_SESSION_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "lib/engine/options.h"
#include "lib/engine/request.h"

namespace llm42 {

class Backend;
class GgufFile;
class KvCache;
class LlamaModel;
class Tokenizer;

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
// This version runs one request at a time, first come first served: the prompt is prefilled
// in chunks of max_batch_tokens, then tokens are decoded one per step until a stop condition.
class Session {
 public:
  static absl::StatusOr<std::unique_ptr<Session>> Create(const SessionOptions& options);
  // Cancels queued and running requests and joins the engine thread.
  ~Session();

  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const LlamaModel& model() const { return *model_; }
  int32_t context_length() const { return context_length_; }
  const SessionOptions& options() const { return options_; }

  // Validates and queues a request. `handle` is passed to its callback.
  absl::StatusOr<std::shared_ptr<Request>> Submit(const RequestOptions& options, void* handle);

  int64_t stat(SessionStat which) const;
  std::string StatsJson() const;

 private:
  Session() = default;
  void EngineLoop();
  void Run(Request& request);
  void Finish(Request& request, FinishReason reason, absl::Status status);

  SessionOptions options_;
  std::shared_ptr<const GgufFile> file_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<LlamaModel> model_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<KvCache> cache_;
  int32_t context_length_ = 0;

  absl::Mutex mu_;
  std::deque<std::shared_ptr<Request>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread engine_;

  std::atomic<int64_t> requests_finished_{0}, tokens_generated_{0}, prefill_tokens_{0},
      decode_steps_{0};
};

}  // namespace llm42

#endif  // LLM42_ENGINE_SESSION_H_
