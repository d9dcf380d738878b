#ifndef LLM42_ENGINE_REQUEST_H_
#define LLM42_ENGINE_REQUEST_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "lib/engine/options.h"
#include "lib/engine/stat.h"
#include "lib/engine/watcher.h"
#include "lib/sampling/sampler.h"
#include "lib/util/mutex.h"

namespace llm42 {

class ReceiptContext;

enum class FinishReason : int32_t { kNone = 0, kStop = 1, kLength = 2, kCancelled = 3, kError = 4 };


// What the user sees of one request: its committed tokens and released text, and how it
// ended. Shared by the caller's handle and the engine; every method is thread-safe. Reads
// consume from per-kind cursors; the whole output stays available.
class Request {
 public:
  Request(RequestOptions options, std::vector<int32_t> prompt, uint64_t seed);

  const RequestOptions& options() const { return options_; }
  const std::vector<int32_t>& prompt() const { return prompt_; }
  // The session that accepted it (set once, before it is shared).
  const void* owner() const { return owner_; }
  void set_owner(const void* session) { owner_ = session; }
  // What makes its receipt (receipt.h); set with the owner.
  const std::shared_ptr<ReceiptContext>& receipts() const { return receipts_; }
  void set_receipts(std::shared_ptr<ReceiptContext> receipts) { receipts_ = std::move(receipts); }
  // What a continuation of this request starts from (RequestOptions::Parent); FailedPrecondition
  // until it has finished.
  absl::StatusOr<RequestOptions::Parent> AsParent() const;
  uint64_t seed() const { return seed_; }

  // --- Caller side ---------------------------------------------------------------------
  // Tokens committed since the last ReadTokens, at most `capacity`; waits up to timeout
  // (negative = forever) for one. OK with none once finished and drained; DeadlineExceeded
  // when the wait ends empty.
  absl::Status ReadTokens(int32_t* out, size_t capacity, size_t* n, int32_t timeout_ms);
  // Same for text, cut at a UTF-8 character boundary; OutOfRange (*n = bytes pending) when
  // the next character does not fit.
  absl::Status ReadText(char* out, size_t capacity, size_t* n, int32_t timeout_ms);
  bool Wait(int32_t timeout_ms);
  // Reports every later commit of new tokens or text, and the end, to `watcher` under `tag` (a
  // second Watch with the same watcher replaces the tag); reports at once too when output is
  // unread or the request has ended, so a watcher added late misses nothing.
  void Watch(std::shared_ptr<Watcher> watcher, uint64_t tag);
  // Stops reporting to `watcher`, or to every watcher when it is null.
  void Unwatch(const Watcher* watcher);
  void Cancel() { cancel_.store(true, std::memory_order_relaxed); }
  // Stops callbacks; returns once none is running. Must not be called from the callback.
  void DetachCallback();

  bool finished() const;
  absl::Status status() const;
  FinishReason finish_reason() const;
  std::vector<int32_t> output_tokens() const;
  std::string output_text() const;
  std::vector<float> logprobs() const;
  // options().top_logprobs entries per committed token, in order.
  std::vector<TopLogprob> top_logprobs() const;
  // options().prompt_logprobs: the logprob of prompt token i + 1 after tokens 0..i, for the
  // prompt rows computed so far (all prompt length - 1 once prefill is done).
  std::vector<float> prompt_logprobs() const;
  int64_t stat(Stat which) const;

  // --- Engine side ---------------------------------------------------------------------
  bool cancel_requested() const { return cancel_.load(std::memory_order_relaxed); }
  // Appends committed tokens (their logprobs when requested) and released text, then runs the
  // callback outside the lock. `handle` is what the callback receives as its request.
  void Commit(std::span<const int32_t> tokens, std::span<const float> logprobs, std::span<const TopLogprob> top,
              const std::string& text, bool finished, FinishReason reason, absl::Status status);
  void AddPromptLogprobs(std::span<const float> values);
  // Adds n to one of the request's own counters (IsRequestStat; TOKENS_GENERATED and
  // TIME_TO_FIRST_TOKEN_US are kept by Commit). The engine counts through EngineStats::Count,
  // which adds to the session's total too.
  void Count(Stat which, int64_t n = 1);
  void set_handle(void* handle) { handle_ = handle; }

 private:
  const RequestOptions options_;
  const std::vector<int32_t> prompt_;
  const uint64_t seed_;
  const absl::Time created_ = absl::Now();
  void* handle_ = nullptr;
  std::atomic<bool> cancel_{false};

  mutable Mutex mu_;
  std::vector<int32_t> tokens_ ABSL_GUARDED_BY(mu_);
  std::vector<float> logprobs_ ABSL_GUARDED_BY(mu_);
  std::vector<TopLogprob> top_logprobs_ ABSL_GUARDED_BY(mu_);
  std::vector<float> prompt_logprobs_ ABSL_GUARDED_BY(mu_);
  std::string text_ ABSL_GUARDED_BY(mu_);
  size_t tokens_read_ ABSL_GUARDED_BY(mu_) = 0;
  size_t text_read_ ABSL_GUARDED_BY(mu_) = 0;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  FinishReason reason_ ABSL_GUARDED_BY(mu_) = FinishReason::kNone;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  const void* owner_ = nullptr;
  std::shared_ptr<ReceiptContext> receipts_;
  // Indexed by Stat; TIME_TO_FIRST_TOKEN_US is -1 until the first commit.
  std::array<int64_t, kStatCount> counts_ ABSL_GUARDED_BY(mu_) = {};

  std::vector<std::pair<std::shared_ptr<Watcher>, uint64_t>> watchers_ ABSL_GUARDED_BY(mu_);

  // Held while a callback runs, so DetachCallback can wait it out.
  Mutex callback_mu_;
  bool callback_enabled_ ABSL_GUARDED_BY(callback_mu_) = true;
};

}  // namespace llm42

#endif  // LLM42_ENGINE_REQUEST_H_
