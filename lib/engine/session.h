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
#include "lib/backend/backend.h"
#include "lib/chat/chat_template.h"
#include "lib/engine/engine.h"
#include "lib/engine/recurrent_slots.h"
#include "lib/engine/engine_stats.h"
#include "lib/engine/grammar_cache.h"
#include "lib/engine/load_progress.h"
#include "lib/engine/options.h"
#include "lib/engine/receipt.h"
#include "lib/engine/request.h"
#include "lib/engine/saved_conversation.h"
#include "lib/engine/sequence.h"
#include "lib/util/mutex.h"

namespace llm42 {

class GgufFile;
class KvCache;
class ModelWeights;
class ModelRunner;
class Tokenizer;

// A loaded model and the thread that drives its engine. Thread-safe.
//
// The session validates requests and queues them; its thread hands them to the Engine
// (engine.h), which runs continuous batching step by step: the Scheduler (scheduler.h) plans
// each step's batch over the paged KV cache, preempting the newest requests when it runs out,
// and the DvrController (dvr_controller.h) verifies deterministic requests' candidates.
class Session {
 public:
  // `progress` (optional) is told how far the creation has got and can stop it (a CANCELLED
  // result); llm42_session_create_async runs this on a thread of its own and polls it.
  static absl::StatusOr<std::unique_ptr<Session>> Create(const SessionOptions& options,
                                                         LoadProgress* progress = nullptr);
  // Cancels queued and running requests and joins the engine thread.
  ~Session();

  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const ModelWeights& model() const { return *model_; }
  int32_t context_length() const { return context_length_; }
  int64_t kv_cache_tokens() const;
  // Bytes of K/V one token adds to the cache (every layer, keys and values).
  int64_t kv_bytes_per_token() const;
  const SessionOptions& options() const { return options_; }
  // The schedule every forward pass of this session runs under (fixed in batch_invariant mode).
  Schedule schedule() const { return schedule_; }

  // Validates and queues a request. `handle` is passed to its callback.
  absl::StatusOr<std::shared_ptr<Request>> Submit(const RequestOptions& options, void* handle);

  // The chat messages (role, content) rendered in the model's chat format, assistant header
  // appended. UNSUPPORTED when the model's format is not one llm42 renders.
  absl::StatusOr<std::string> RenderChat(
      const std::vector<std::pair<std::string, std::string>>& messages, bool thinking = true) const;
  // OpenAI-form messages and options as JSON through the model's chat template
  // (ChatTemplate::Apply; llm42_session_apply_chat_template).
  absl::StatusOr<std::string> ApplyChatTemplate(std::string_view messages_json, std::string_view options_json) const;
  // A generated assistant text split by the model's syntax (ChatTemplate::syntax; plain for a
  // model without a chat format): ChatOutput's JSON (llm42_session_parse_chat_output).
  absl::StatusOr<std::string> ParseChatOutput(std::string_view text) const;
  // The GBNF grammar of a reply that calls `tools_json` as `tool_choice` lets it, in the syntax
  // the model's chat template writes calls in (lib/chat/tool_call_grammar.h; "" for "none").
  absl::StatusOr<std::string> ToolCallGrammar(std::string_view tools_json, std::string_view tool_choice,
                                              bool parallel = true) const;

  // Writes the conversation that finished request `r` of this session holds (its tokens,
  // messages, and the K/V of the full blocks the prefix cache has for them) to `path`
  // (saved_conversation.h).
  absl::Status SaveConversation(const Request& r, const std::string& path);
  // Reads a conversation saved by a session of the same model, backend and KV type, puts its K/V
  // into the prefix cache, and returns what a request continuing it takes as its parent.
  // DataLoss for a damaged file; FailedPrecondition for one from another model or setup;
  // ResourceExhausted when the KV cache cannot hold it.
  absl::StatusOr<RequestOptions::Parent> LoadConversation(const std::string& path);
  // Identifies the model's weights: its tensors' names, types, shapes and a sample of their bytes.

  // The model's fingerprint (fingerprint.h): computed on first use (one read of every weight
  // byte, on options.threads threads) and kept. A request's receipt: Request::receipts().
  const ModelFingerprintValue& Fingerprint() { return receipts_->Fingerprint(); }
  // Replays a receipt in this session (beside whatever else runs: a deterministic request's
  // bits do not depend on it) and compares. DataLoss for bytes that are not an intact receipt.
  absl::StatusOr<ReceiptCheck> VerifyReceipt(std::string_view bytes);

  int64_t stat(Stat which) const;
  std::string StatsJson() const;
  // Where the steps' time went so far (EngineStats::StepTimes).
  EngineStats::StepTimes step_times() const { return stats_.step_times(); }
  // KV blocks in use; 0 once every request has finished (engine thread quiescent).
  int64_t kv_blocks_in_use() const { return stats_.blocks_in_use(); }
  // Times an invariant of docs/deterministic-requests.md failed (logged as errors); tests
  // require 0.
  int64_t invariant_violations() const { return stats_.invariant_violations(); }

 private:
  Session();
  void EngineLoop();
  // Runs `task` on the engine thread between steps (it owns the cache and the backend) and
  // returns its status; FailedPrecondition once the session is stopping.
  absl::Status RunOnEngine(std::function<absl::Status()> task);
  // This session's model, versions, backend and KV geometry, as a saved conversation names them.
  SavedConversation Setup() const;

  SessionOptions options_;
  std::shared_ptr<const GgufFile> file_;
  std::unique_ptr<Tokenizer> tokenizer_;
  absl::StatusOr<ChatTemplate> chat_template_ = absl::UnknownError("not detected");
  std::unique_ptr<ModelWeights> model_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<KvCache> cache_;
  RecurrentSlots recurrent_slots_;  // a model with recurrent layers' (the engine's copy)
  int32_t context_length_ = 0;
  int64_t max_sequence_ = 0;  // min(context, KV capacity); the context for windowed models that fit (Create)
  Schedule schedule_ = Schedule::kFast;
  ModelIdentity model_identity_;
  std::shared_ptr<ReceiptContext> receipts_;
  std::unique_ptr<GrammarCache> grammars_;

  EngineStats stats_;
  std::unique_ptr<Engine> engine_;  // driven by thread_ only

  Mutex mu_;
  std::deque<std::unique_ptr<Sequence>> incoming_ ABSL_GUARDED_BY(mu_);
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t next_arrival_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace llm42

#endif  // LLM42_ENGINE_SESSION_H_
