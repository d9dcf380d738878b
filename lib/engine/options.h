#ifndef LLM42_ENGINE_OPTIONS_H_
#define LLM42_ENGINE_OPTIONS_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "lib/grammar/grammar.h"
#include "lib/sampling/logit_controls.h"
#include "lib/sampling/sampler.h"

namespace llm42 {

enum class DeterminismMode : int32_t { kSelective = 0, kBatchInvariant = 1, kOff = 2 };

// How mode selective decodes a deterministic request that has nothing awaiting verification.
// The committed output is the same whichever path runs (both commit only fixed-schedule
// tokens); only the cost differs.
enum class DecodePath : int32_t {
  kAuto = 0,    // per step, the cheaper of the two by the engine's measured step costs
  kVerify = 1,  // decode under fast, verify later (decode-verify-rollback)
  kFixed = 2,   // decode under fixed and commit at once: nothing to verify or roll back
};

struct DeterminismPolicy {
  DeterminismMode mode = DeterminismMode::kSelective;
  int32_t window = 64;
  int32_t verify_group = 8;
  uint64_t default_seed = 42;
  double mismatch_injection = 0.0;  // testing hook
  double fast_path_noise = 0.0;     // testing hook
  // DvrController's refinements of the paper's fixed window (on by default; the switches exist
  // so that benchmarks can measure what each one pays). Neither changes committed output.
  bool adaptive_window = true;
  bool early_verify = true;
  DecodePath decode_path = DecodePath::kAuto;

  // See SessionOptions::Validate.
  absl::Status Validate() const;
};

struct SessionOptions {
  std::string model_path;
  // Jinja source replacing the model's chat template for the session ("": the model's).
  std::string chat_template;
  std::string backend = "auto";
  int32_t threads = 0;  // 0 = all cores
  int32_t max_batch_tokens = 512;
  int32_t max_running_requests = 16;
  int64_t kv_cache_tokens = 0;
  // Element type of the KV cache: "auto" (the backend's: f32 on the CPU, bf16 on CUDA), "f32",
  // "f16" or "bf16" (half the memory and attention reads; keys and values rounded when stored).
  std::string kv_dtype = "auto";
  // Keep full KV blocks after their request and reuse them for prompts that start with the same
  // tokens (kv_cache.h); deterministic requests reuse only blocks computed under fixed, so their
  // output is bitwise the same as without the cache. Cached blocks live in the KV pool and are
  // evicted, least recently used, when it needs room.
  bool prefix_caching = true;
  // Make every page of the KV cache resident when the session is created, as llama.cpp clears its
  // whole KV buffer when it makes a context, rather than as serving first stores into each page:
  // the kernel's zeroing of fresh pages then never lands in a step (2-6 % of a 16-sequence run
  // on the CPU), at the cost of startup time and of the whole cache's memory from the start.
  bool kv_prefault = false;
  int32_t context_length = 0;  // 0 = min(model's, kDefaultContextLength)
  DeterminismPolicy determinism;
  // Open only the vocabulary (a vocabulary-only GGUF works): tokenize and detokenize, no
  // weights loaded, no engine thread; submitting a request fails.
  bool vocab_only = false;

  static constexpr int32_t kDefaultContextLength = 4096;

  // The one place the options' rules live (the C ABI's setters apply them to the value they
  // set, Session::Create to the whole): OUT_OF_RANGE naming the first number outside its range,
  // INVALID_ARGUMENT for an unknown name or enum value.
  absl::Status Validate() const;
  // Reads a text-format llm42.SessionConfig and applies the fields it sets (FORMAT_ERROR when
  // malformed or out of range, leaving *this unchanged).
  absl::Status LoadConfig(const std::string& textproto_path);
};

using TokenCallbackFn = void (*)(void* user_data, void* request, const int32_t* tokens,
                                 size_t n_tokens, const char* text, size_t text_len,
                                 int32_t finished);

struct RequestOptions {
  // A finished request of the same session that this one continues
  // (llm42_request_options_set_parent): its whole sequence, prompt then output, comes before this
  // request's prompt; a chat continues with the parent's messages and its reply before the new
  // messages. Copied from the parent when set.
  struct Parent {
    const void* session = nullptr;
    std::vector<int32_t> tokens;
    std::vector<std::pair<std::string, std::string>> messages;  // empty unless a chat request
  };
  std::optional<Parent> parent;
  std::string prompt_text;
  std::vector<int32_t> prompt_tokens;
  bool has_prompt_text = false;
  bool has_prompt_tokens = false;
  std::vector<std::pair<std::string, std::string>> messages;  // role, content
  int32_t max_tokens = 256;
  // The most positions (prompt + output) the sequence may reach, below the session's own limit
  // (the smaller of its context length and KV cache): 0 = the session's. A receipt records the
  // limit its request ran under and its replay sets it here, so that an output the limit cut
  // short is cut short again.
  int64_t max_sequence = 0;
  // The limit that applies in a session whose own is `session_limit`.
  int64_t SequenceLimit(int64_t session_limit) const {
    return max_sequence > 0 ? std::min(max_sequence, session_limit) : session_limit;
  }
  SamplingParams sampling;
  // Logit bias and penalties, applied before `sampling` (logit_controls.h).
  LogitControls controls;
  // The grammar every output must follow (llm42_request_options_set_grammar / _set_json_schema),
  // its source kept for receipts. The output's tokens are masked to those the grammar allows
  // after the output so far (after `controls`); end-of-generation tokens only where it can end;
  // the request stops once nothing can follow. Logprobs are those of the masked distribution.
  struct OutputGrammar {
    enum class Kind : int32_t { kGbnf = 1, kJsonSchema = 2 };
    Kind kind = Kind::kGbnf;
    std::string source;
    std::shared_ptr<const Grammar> grammar;
  };
  std::optional<OutputGrammar> output_grammar;
  // Parses `source` as `kind` (INVALID_ARGUMENT with the line and column, or the JSON pointer, of
  // the first error).
  static absl::StatusOr<OutputGrammar> MakeOutputGrammar(OutputGrammar::Kind kind, std::string_view source);
  bool has_seed = false;
  bool deterministic = false;
  // Where a deterministic request's candidates come from besides its fast-path decode: kNgram
  // drafts them from its own prompt and output (lib/engine/ngram_draft.h), verified under fixed
  // like any candidate, so its output is bitwise the same; it only takes fewer steps where the
  // drafts agree. Plain requests ignore it.
  enum class Draft : int32_t { kNone = 0, kNgram = 1 };
  Draft draft = Draft::kNone;
  std::vector<std::string> stops;
  bool ignore_eos = false;
  // For chat requests: false renders the chat template with thinking off (Qwen3's
  // enable_thinking=false: the reply starts after an empty think block); other formats ignore it.
  bool thinking = true;
  bool logprobs = false;
  // The most likely tokens and their logprobs at every output position (0 = none, at most
  // kMaxTopLogprobs); a deterministic request's come from the fixed schedule, like its logprobs.
  int32_t top_logprobs = 0;
  // Also score the prompt: the logprob of each prompt token after the ones before it (prompt
  // length - 1 values), under fixed for a deterministic request, so that rescoring a
  // generated text gives bitwise the logprobs its generation reported. Such a request takes no
  // K/V from the prefix cache (its prompt rows must be computed).
  bool prompt_logprobs = false;
  TokenCallbackFn callback = nullptr;
  void* callback_user_data = nullptr;

  static constexpr size_t kMaxStops = 16;
  static constexpr int32_t kMaxTopLogprobs = 20;
  static constexpr float kMaxTemperature = 100.0f;

  // The rules of each field alone, as SessionOptions::Validate (the C ABI's setters and
  // Session::Submit apply them): OUT_OF_RANGE for a number outside its range or too many stop
  // strings, INVALID_ARGUMENT for text that is not UTF-8 or an empty stop string. What depends
  // on the session (token ids, the parent, prompt and messages together) Submit checks.
  absl::Status Validate() const;
};

}  // namespace llm42

#endif  // LLM42_ENGINE_OPTIONS_H_
