// Header-only C++17 RAII wrapper over the llm42 C API. Failures throw llm42::api::Error, which
// carries the llm42_status and the library's message. Handles are move-only.
//
//   llm42::api::SessionOptions options;
//   options.SetModelPath("stories260K.gguf");
//   llm42::api::Session session(options);
//   llm42::api::RequestOptions request;
//   request.SetPrompt("Once upon a time").SetMaxTokens(32);
//   llm42::api::Request r = session.Submit(request);
//   // ReadText(-1) blocks for new text; nullopt once the request finished and was read (it
//   // throws instead when the request failed or was cancelled).
//   while (std::optional<std::string> piece = r.ReadText(-1)) std::cout << *piece << std::flush;
//   // Or in one call: std::string text = session.Generate(request);
#ifndef LLM42_LLM42_HPP_
#define LLM42_LLM42_HPP_

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "llm42/llm42.h"

namespace llm42::api {

class Request;
class Session;

class Error : public std::runtime_error {
 public:
  Error(llm42_status status, const std::string& message)
      : std::runtime_error(std::string(llm42_status_name(status)) + ": " + message),
        status_(status) {}
  llm42_status status() const noexcept { return status_; }

 private:
  llm42_status status_;
};

namespace detail {

inline void Check(llm42_status s) {
  if (s != LLM42_OK) throw Error(s, llm42_last_error());
}

// Owns a C handle; Destroy is its llm42_*_destroy.
template <typename T, void (*Destroy)(T*)>
class Handle {
 public:
  Handle() = default;
  explicit Handle(T* p) : p_(p) {}
  Handle(Handle&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      Destroy(p_);
      p_ = std::exchange(o.p_, nullptr);
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  ~Handle() { Destroy(p_); }
  T* get() const noexcept { return p_; }

 private:
  T* p_ = nullptr;
};

// Calls a (buf, capacity, out_len) C function until the buffer is large enough (the value can
// grow between calls while a request runs).
template <typename E, typename F>
std::vector<E> ReadBuffer(F&& fn) {
  std::vector<E> out(64);
  for (;;) {
    size_t n = 0;
    const llm42_status s = fn(out.data(), out.size(), &n);
    if (s == LLM42_OK) {
      out.resize(n);
      return out;
    }
    if (s != LLM42_OUT_OF_RANGE) Check(s);
    out.resize(n + n / 2 + 16);
  }
}

}  // namespace detail

class DeterminismPolicy {
 public:
  explicit DeterminismPolicy(llm42_mode mode = LLM42_MODE_SELECTIVE) {
    llm42_determinism* p = nullptr;
    detail::Check(llm42_determinism_create(mode, &p));
    h_ = decltype(h_)(p);
  }
  DeterminismPolicy& SetWindow(int32_t tokens) {
    detail::Check(llm42_determinism_set_window(h_.get(), tokens));
    return *this;
  }
  DeterminismPolicy& SetVerifyGroup(int32_t requests) {
    detail::Check(llm42_determinism_set_verify_group(h_.get(), requests));
    return *this;
  }
  DeterminismPolicy& SetDefaultSeed(uint64_t seed) {
    detail::Check(llm42_determinism_set_default_seed(h_.get(), seed));
    return *this;
  }
  DeterminismPolicy& SetDecodePath(llm42_decode_path path) {
    detail::Check(llm42_determinism_set_decode_path(h_.get(), path));
    return *this;
  }
  const llm42_determinism* get() const { return h_.get(); }
  // For the C functions the wrapper leaves out (the testing hooks of llm42_testing.h).
  llm42_determinism* get() { return h_.get(); }

 private:
  detail::Handle<llm42_determinism, llm42_determinism_destroy> h_;
};

class SessionOptions {
 public:
  SessionOptions() {
    llm42_session_options* p = nullptr;
    detail::Check(llm42_session_options_create(&p));
    h_ = decltype(h_)(p);
  }
  // Jinja source replacing the model's chat template ("": the model's).
  SessionOptions& SetChatTemplate(const std::string& jinja) {
    detail::Check(llm42_session_options_set_chat_template(h_.get(), jinja.c_str()));
    return *this;
  }
  SessionOptions& SetModelPath(const std::string& path) {
    detail::Check(llm42_session_options_set_model_path(h_.get(), path.c_str()));
    return *this;
  }
  SessionOptions& SetBackend(const std::string& name) {
    detail::Check(llm42_session_options_set_backend(h_.get(), name.c_str()));
    return *this;
  }
  // "auto", "f32", "f16" or "bf16" (llm42_session_options_set_kv_dtype).
  SessionOptions& SetKvDtype(const std::string& dtype) {
    detail::Check(llm42_session_options_set_kv_dtype(h_.get(), dtype.c_str()));
    return *this;
  }
  SessionOptions& SetPrefixCaching(bool enable) {
    detail::Check(llm42_session_options_set_prefix_caching(h_.get(), enable ? 1 : 0));
    return *this;
  }
  // llm42_session_options_set_kv_prefault.
  SessionOptions& SetKvPrefault(bool enable) {
    detail::Check(llm42_session_options_set_kv_prefault(h_.get(), enable ? 1 : 0));
    return *this;
  }
  SessionOptions& SetThreads(int32_t n) {
    detail::Check(llm42_session_options_set_threads(h_.get(), n));
    return *this;
  }
  SessionOptions& SetMaxBatchTokens(int32_t n) {
    detail::Check(llm42_session_options_set_max_batch_tokens(h_.get(), n));
    return *this;
  }
  SessionOptions& SetContextLength(int32_t n) {
    detail::Check(llm42_session_options_set_context_length(h_.get(), n));
    return *this;
  }
  SessionOptions& SetVocabOnly(bool on = true) {
    detail::Check(llm42_session_options_set_vocab_only(h_.get(), on ? 1 : 0));
    return *this;
  }
  SessionOptions& SetDeterminism(const DeterminismPolicy& policy) {
    detail::Check(llm42_session_options_set_determinism(h_.get(), policy.get()));
    return *this;
  }
  SessionOptions& LoadConfig(const std::string& textproto_path) {
    detail::Check(llm42_session_options_load_config(h_.get(), textproto_path.c_str()));
    return *this;
  }
  const llm42_session_options* get() const { return h_.get(); }

 private:
  detail::Handle<llm42_session_options, llm42_session_options_destroy> h_;
};

class RequestOptions {
 public:
  RequestOptions() {
    llm42_request_options* p = nullptr;
    detail::Check(llm42_request_options_create(&p));
    h_ = decltype(h_)(p);
  }
  RequestOptions& SetPrompt(std::string_view text) {
    detail::Check(llm42_request_options_set_prompt(h_.get(), text.data(), text.size()));
    return *this;
  }
  RequestOptions& SetPromptTokens(const std::vector<int32_t>& tokens) {
    detail::Check(llm42_request_options_set_prompt_tokens(h_.get(), tokens.data(), tokens.size()));
    return *this;
  }
  RequestOptions& AddMessage(const std::string& role, const std::string& content) {
    detail::Check(llm42_request_options_add_message(h_.get(), role.c_str(), content.c_str()));
    return *this;
  }
  // Continues a finished request of the same session (llm42_request_options_set_parent).
  RequestOptions& SetParent(const Request& parent);
  // Continues a conversation saved to `path` (llm42_request_options_load_parent).
  RequestOptions& LoadParent(Session& session, const std::string& path);
  RequestOptions& SetMaxTokens(int32_t n) {
    detail::Check(llm42_request_options_set_max_tokens(h_.get(), n));
    return *this;
  }
  RequestOptions& SetTemperature(float t) {
    detail::Check(llm42_request_options_set_temperature(h_.get(), t));
    return *this;
  }
  RequestOptions& SetTopK(int32_t k) {
    detail::Check(llm42_request_options_set_top_k(h_.get(), k));
    return *this;
  }
  RequestOptions& SetTopP(float p) {
    detail::Check(llm42_request_options_set_top_p(h_.get(), p));
    return *this;
  }
  RequestOptions& SetMinP(float p) {
    detail::Check(llm42_request_options_set_min_p(h_.get(), p));
    return *this;
  }
  // Logit bias, penalties and output grammars: see llm42.h (llm42_request_options_set_logit_bias ...).
  RequestOptions& SetLogitBias(int32_t token, float bias) {
    detail::Check(llm42_request_options_set_logit_bias(h_.get(), token, bias));
    return *this;
  }
  RequestOptions& SetRepetitionPenalty(float penalty, int32_t last_n = 64) {
    detail::Check(llm42_request_options_set_repetition_penalty(h_.get(), penalty, last_n));
    return *this;
  }
  RequestOptions& SetFrequencyPenalty(float penalty) {
    detail::Check(llm42_request_options_set_frequency_penalty(h_.get(), penalty));
    return *this;
  }
  RequestOptions& SetPresencePenalty(float penalty) {
    detail::Check(llm42_request_options_set_presence_penalty(h_.get(), penalty));
    return *this;
  }
  // GBNF; "" removes it.
  RequestOptions& SetGrammar(const std::string& gbnf) {
    detail::Check(llm42_request_options_set_grammar(h_.get(), gbnf.c_str()));
    return *this;
  }
  // Tools the request may call, in the session's model's tool-call syntax, as tool_choice lets it
  // ("auto", "required", "none", a tool's name): llm42_request_options_set_tools.
  RequestOptions& SetTools(Session& session, const std::string& tools_json, const std::string& tool_choice = "auto",
                           bool parallel_calls = true);
  // JSON Schema text; "" removes it.
  RequestOptions& SetJsonSchema(const std::string& schema) {
    detail::Check(llm42_request_options_set_json_schema(h_.get(), schema.c_str()));
    return *this;
  }
  // "ngram" or "none" (llm42_request_options_set_draft).
  RequestOptions& SetDraft(const std::string& source) {
    detail::Check(llm42_request_options_set_draft(h_.get(), source.c_str()));
    return *this;
  }
  RequestOptions& SetSeed(uint64_t seed) {
    detail::Check(llm42_request_options_set_seed(h_.get(), seed));
    return *this;
  }
  RequestOptions& SetDeterministic(bool on) {
    detail::Check(llm42_request_options_set_deterministic(h_.get(), on ? 1 : 0));
    return *this;
  }
  RequestOptions& AddStop(const std::string& text) {
    detail::Check(llm42_request_options_add_stop(h_.get(), text.c_str()));
    return *this;
  }
  RequestOptions& SetIgnoreEos(bool on) {
    detail::Check(llm42_request_options_set_ignore_eos(h_.get(), on ? 1 : 0));
    return *this;
  }
  RequestOptions& SetThinking(bool on) {
    detail::Check(llm42_request_options_set_thinking(h_.get(), on ? 1 : 0));
    return *this;
  }
  RequestOptions& SetLogprobs(bool on) {
    detail::Check(llm42_request_options_set_logprobs(h_.get(), on ? 1 : 0));
    return *this;
  }
  RequestOptions& SetPromptLogprobs(bool on) {
    detail::Check(llm42_request_options_set_prompt_logprobs(h_.get(), on ? 1 : 0));
    return *this;
  }
  RequestOptions& SetTopLogprobs(int32_t n) {
    detail::Check(llm42_request_options_set_top_logprobs(h_.get(), n));
    return *this;
  }
  RequestOptions& SetCallback(llm42_token_callback fn, void* user_data) {
    detail::Check(llm42_request_options_set_callback(h_.get(), fn, user_data));
    return *this;
  }
  const llm42_request_options* get() const { return h_.get(); }

 private:
  detail::Handle<llm42_request_options, llm42_request_options_destroy> h_;
};

class Request {
 public:
  explicit Request(llm42_request* r) : h_(r) {}

  // Text committed since the last call; "" when the wait (ms, -1 = forever, 0 = none) ended with
  // nothing new; std::nullopt once the request finished and everything was read. At that end it
  // throws Error instead when the request failed or was cancelled (CheckStatus), so a loop
  // `while (auto piece = r.ReadText(0))` loses nothing and never mistakes a failure for the end.
  std::optional<std::string> ReadText(int32_t timeout_ms) {
    std::string out(4096, '\0');
    for (;;) {
      size_t n = 0;
      const llm42_status s = llm42_request_read_text(h_.get(), out.data(), out.size(), &n, timeout_ms);
      if (s == LLM42_TIMEOUT) return std::string();
      if (s == LLM42_OUT_OF_RANGE) {  // the next character is longer than the buffer
        out.resize(out.size() + n);
        continue;
      }
      detail::Check(s);
      if (n == 0) return AtEnd<std::string>();
      out.resize(n);
      return out;
    }
  }
  // Tokens committed since the last call; empty when the wait ended with nothing new; nullopt at
  // the end of a request that finished well (throws at the end of one that did not).
  std::optional<std::vector<int32_t>> ReadTokens(int32_t timeout_ms) {
    std::vector<int32_t> out(256);
    size_t n = 0;
    const llm42_status s = llm42_request_read_tokens(h_.get(), out.data(), out.size(), &n, timeout_ms);
    if (s == LLM42_TIMEOUT) return std::vector<int32_t>();
    detail::Check(s);
    if (n == 0) return AtEnd<std::vector<int32_t>>();
    out.resize(n);
    return out;
  }
  // True when finished within timeout_ms.
  bool Wait(int32_t timeout_ms) {
    const llm42_status s = llm42_request_wait(h_.get(), timeout_ms);
    if (s == LLM42_TIMEOUT) return false;
    detail::Check(s);
    return true;
  }
  void Cancel() { detail::Check(llm42_request_cancel(h_.get())); }
  bool IsFinished() const { return llm42_request_is_finished(h_.get()) == 1; }
  // LLM42_PENDING while running, then how the request ended (llm42_request_status).
  llm42_status Status() const { return llm42_request_status(h_.get()); }
  // Throws Error when the request ended in an error or was cancelled; returns otherwise.
  void CheckStatus() const {
    const llm42_status s = Status();
    if (s != LLM42_OK && s != LLM42_PENDING) throw Error(s, llm42_last_error());
  }
  llm42_finish_reason FinishReason() const { return llm42_request_finish_reason(h_.get()); }
  uint64_t EffectiveSeed() const {
    uint64_t seed = 0;
    detail::Check(llm42_request_effective_seed(h_.get(), &seed));
    return seed;
  }
  std::vector<int32_t> OutputTokens() {
    return detail::ReadBuffer<int32_t>([&](int32_t* b, size_t c, size_t* n) {
      return llm42_request_output_tokens(h_.get(), b, c, n);
    });
  }
  std::string OutputText() {
    const std::vector<char> v = detail::ReadBuffer<char>(
        [&](char* b, size_t c, size_t* n) { return llm42_request_output_text(h_.get(), b, c, n); });
    return std::string(v.begin(), v.end());
  }
  std::vector<float> Logprobs() {
    return detail::ReadBuffer<float>(
        [&](float* b, size_t c, size_t* n) { return llm42_request_logprobs(h_.get(), b, c, n); });
  }
  // The prompt's scores (llm42_request_prompt_logprobs).
  std::vector<float> PromptLogprobs() {
    return detail::ReadBuffer<float>(
        [&](float* b, size_t c, size_t* n) { return llm42_request_prompt_logprobs(h_.get(), b, c, n); });
  }
  // The top-N of every committed token (llm42_request_top_logprobs): N (token, logprob) pairs
  // per token, most likely first.
  std::vector<std::pair<int32_t, float>> TopLogprobs() {
    size_t n = 0;
    llm42_status st = llm42_request_top_logprobs(h_.get(), nullptr, nullptr, 0, &n);
    if (st != LLM42_OK && st != LLM42_OUT_OF_RANGE) detail::Check(st);
    std::vector<int32_t> ids(n);
    std::vector<float> lps(n);
    detail::Check(llm42_request_top_logprobs(h_.get(), ids.data(), lps.data(), n, &n));
    std::vector<std::pair<int32_t, float>> out;
    for (size_t i = 0; i < n; ++i) out.emplace_back(ids[i], lps[i]);
    return out;
  }
  // The serialized receipt of a finished deterministic request (llm42_request_receipt).
  std::string Receipt() {
    const std::vector<char> v = detail::ReadBuffer<char>(
        [&](char* b, size_t c, size_t* n) { return llm42_request_receipt(h_.get(), b, c, n); });
    return std::string(v.begin(), v.end());
  }
  int64_t Stat(llm42_stat which) {
    int64_t v = 0;
    detail::Check(llm42_request_stat(h_.get(), which, &v));
    return v;
  }
  llm42_request* get() const { return h_.get(); }

 private:
  template <typename T>
  std::optional<T> AtEnd() const {
    CheckStatus();
    return std::nullopt;
  }

  detail::Handle<llm42_request, llm42_request_destroy> h_;
};

inline RequestOptions& RequestOptions::SetParent(const Request& parent) {
  detail::Check(llm42_request_options_set_parent(h_.get(), parent.get()));
  return *this;
}

class Session {
 public:
  explicit Session(const SessionOptions& options) {
    llm42_session* s = nullptr;
    detail::Check(llm42_session_create(options.get(), &s));
    h_ = decltype(h_)(s);
  }
  // Takes ownership of a created session (SessionLoader::Take).
  explicit Session(llm42_session* adopted) : h_(adopted) {}
  Request Submit(const RequestOptions& options) {
    llm42_request* r = nullptr;
    detail::Check(llm42_request_submit(h_.get(), options.get(), &r));
    return Request(r);
  }
  std::vector<int32_t> Tokenize(std::string_view text, bool add_special) {
    return detail::ReadBuffer<int32_t>([&](int32_t* b, size_t c, size_t* n) {
      return llm42_session_tokenize(h_.get(), text.data(), text.size(), add_special ? 1 : 0, b, c, n);
    });
  }
  std::string Detokenize(const std::vector<int32_t>& tokens) {
    const std::vector<char> v = detail::ReadBuffer<char>([&](char* b, size_t c, size_t* n) {
      return llm42_session_detokenize(h_.get(), tokens.data(), tokens.size(), b, c, n);
    });
    return std::string(v.begin(), v.end());
  }
  int32_t VocabSize() const { return llm42_session_vocab_size(h_.get()); }
  int32_t EosToken() const { return llm42_session_eos_token(h_.get()); }
  int64_t Stat(llm42_stat which) {
    int64_t v = 0;
    detail::Check(llm42_session_stat(h_.get(), which, &v));
    return v;
  }
  // llm42_session_apply_chat_template: messages and options as JSON text.
  std::string ApplyChatTemplate(const std::string& messages_json, const std::string& options_json = "") {
    const std::vector<char> v = detail::ReadBuffer<char>([&](char* b, size_t c, size_t* n) {
      return llm42_session_apply_chat_template(h_.get(), messages_json.c_str(),
                                               options_json.empty() ? nullptr : options_json.c_str(), b, c, n);
    });
    return std::string(v.begin(), v.end());
  }
  // llm42_session_parse_chat_output: the reply's content, reasoning and tool calls as JSON text.
  std::string ParseChatOutput(const std::string& text) {
    const std::vector<char> v = detail::ReadBuffer<char>([&](char* b, size_t c, size_t* n) {
      return llm42_session_parse_chat_output(h_.get(), text.data(), text.size(), b, c, n);
    });
    return std::string(v.begin(), v.end());
  }
  std::string StatsJson() {
    const std::vector<char> v = detail::ReadBuffer<char>(
        [&](char* b, size_t c, size_t* n) { return llm42_session_stats_json(h_.get(), b, c, n); });
    return std::string(v.begin(), v.end());
  }
  // The model's SHA-256 fingerprint in hex (llm42_session_fingerprint).
  std::string Fingerprint() {
    const std::vector<char> v = detail::ReadBuffer<char>(
        [&](char* b, size_t c, size_t* n) { return llm42_session_fingerprint(h_.get(), b, c, n); });
    return std::string(v.begin(), v.end());
  }
  // What checking a receipt found (llm42_session_verify_receipt).
  struct ReceiptCheck {
    llm42_receipt_outcome outcome = LLM42_RECEIPT_REPRODUCED;
    int64_t first_difference = -1;
    std::string detail;  // what differs; empty when reproduced
    bool reproduced() const { return outcome == LLM42_RECEIPT_REPRODUCED; }
  };
  ReceiptCheck VerifyReceipt(const std::string& receipt) {
    ReceiptCheck c;
    char line[1024];
    size_t n = 0;
    detail::Check(llm42_session_verify_receipt(h_.get(), receipt.data(), receipt.size(), &c.outcome,
                                               &c.first_difference, line, sizeof line, &n));
    c.detail = line;
    return c;
  }
  // Submits `options`, waits and returns the whole output text (llm42_session_generate); throws
  // Error when submit refuses the options or the request fails or is cancelled.
  std::string Generate(const RequestOptions& options) {
    char* text = nullptr;
    size_t n = 0;
    const llm42_status s = llm42_session_generate(h_.get(), options.get(), &text, &n);
    std::string out(text != nullptr ? text : "", n);
    llm42_free(text);
    detail::Check(s);
    return out;
  }
  // Writes the conversation a finished request holds to `path` (llm42_session_save_conversation).
  void SaveConversation(const Request& finished, const std::string& path) {
    detail::Check(llm42_session_save_conversation(h_.get(), finished.get(), path.c_str()));
  }
  llm42_session* get() const { return h_.get(); }

 private:
  detail::Handle<llm42_session, llm42_session_destroy> h_;
};

inline RequestOptions& RequestOptions::SetTools(Session& session, const std::string& tools_json,
                                                const std::string& tool_choice, bool parallel_calls) {
  detail::Check(llm42_request_options_set_tools(h_.get(), session.get(), tools_json.c_str(), tool_choice.c_str(),
                                                parallel_calls ? 1 : 0));
  return *this;
}

inline RequestOptions& RequestOptions::LoadParent(Session& session, const std::string& path) {
  detail::Check(llm42_request_options_load_parent(h_.get(), session.get(), path.c_str()));
  return *this;
}

// Loads a session without blocking (llm42_session_create_async): poll Progress() from a frame or
// event loop, Take() once Wait(0) is true; Cancel() stops the load. Destroying it cancels a load
// still running.
class SessionLoader {
 public:
  explicit SessionLoader(const SessionOptions& options) {
    llm42_session_loader* l = nullptr;
    detail::Check(llm42_session_create_async(options.get(), &l));
    h_ = decltype(h_)(l);
  }
  float Progress() const { return llm42_session_loader_progress(h_.get()); }
  // True once the load has ended, well or not; waits up to timeout_ms (-1 = forever).
  bool Wait(int32_t timeout_ms) {
    const llm42_status s = llm42_session_loader_wait(h_.get(), timeout_ms);
    if (s == LLM42_TIMEOUT) return false;
    detail::Check(s);
    return true;
  }
  void Cancel() { detail::Check(llm42_session_loader_cancel(h_.get())); }
  // The session; throws what the creation failed with (CANCELLED after Cancel()).
  Session Take() {
    llm42_session* s = nullptr;
    detail::Check(llm42_session_loader_take(h_.get(), &s));
    return Session(s);
  }

 private:
  detail::Handle<llm42_session_loader, llm42_session_loader_destroy> h_;
};

// One thread waiting on many requests (llm42_watcher): Add each under a tag, Wait for the tags
// with news, then read each request with timeout 0 until it has nothing more.
class Watcher {
 public:
  Watcher() {
    llm42_watcher* w = nullptr;
    detail::Check(llm42_watcher_create(&w));
    h_ = decltype(h_)(w);
  }
  void Add(const Request& request, uint64_t tag) { detail::Check(llm42_watcher_add(h_.get(), request.get(), tag)); }
  void Remove(const Request& request) { detail::Check(llm42_watcher_remove(h_.get(), request.get())); }
  // The tags with news, each once; empty when timeout_ms (-1 = forever) passed with none, or
  // after Wake().
  std::vector<uint64_t> Wait(int32_t timeout_ms) {
    std::vector<uint64_t> tags(256);
    size_t n = 0;
    const llm42_status s = llm42_watcher_wait(h_.get(), tags.data(), tags.size(), &n, timeout_ms);
    if (s == LLM42_TIMEOUT) return {};
    detail::Check(s);
    tags.resize(n);
    return tags;
  }
  void Wake() { detail::Check(llm42_watcher_wake(h_.get())); }

 private:
  detail::Handle<llm42_watcher, llm42_watcher_destroy> h_;
};

}  // namespace llm42::api

#endif  // LLM42_LLM42_HPP_
