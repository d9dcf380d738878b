/* llm42.i — the language-neutral SWIG interface to the C ABI (include/llm42/llm42.h).
 *
 * Every handle becomes a class through %extend on a box that holds the C handle (handle_box.h), so
 * that close() (Java AutoCloseable, C# Dispose, Python context managers) frees the handle — at
 * once, or when the calls other threads are making with it return — and any later call raises
 * FAILED_PRECONDITION instead of touching freed memory. Failures raise the
 * language's Llm42Exception carrying the status and llm42_last_error()'s message: methods throw
 * llm42_swig::Error, and the one %exception below hands it to LLM42_SWIG_RAISE, which each
 * language's .i defines. Methods are snake_case here; the Java and C# files rename them.
 *
 * Strings cross as UTF-8 (std::string here; each language's typemaps convert), token ids as
 * std::vector<int32_t> (int[] in Java and C#, list[int] in Python). */

%{
#include <deque>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "handle_box.h"
#include "llm42/llm42.h"

namespace llm42_swig {

// The host-language log sink: llm42_set_log_callback's messages (from any thread) queue here
// and the host takes them when it likes (a game each frame, a server from its logging
// thread), so no call crosses from an llm42 thread into a managed runtime (which Unity's
// IL2CPP, the JVM and Python each make delicate). Bounded: past kMax the oldest are dropped.
class LogQueue {
 public:
  static constexpr size_t kMax = 4096;
  static LogQueue& Get() {
    static LogQueue* q = new LogQueue;  // never destroyed: llm42 may log during exit
    return *q;
  }
  static void OnLog(void* user, int32_t level, const char* message) {
    auto* q = static_cast<LogQueue*>(user);
    std::lock_guard<std::mutex> lock(q->mu_);
    if (q->messages_.size() == kMax) q->messages_.pop_front();
    q->messages_.emplace_back(level, message);
  }
  int32_t FrontLevel() {
    std::lock_guard<std::mutex> lock(mu_);
    return messages_.empty() ? -1 : messages_.front().first;
  }
  std::string Take() {
    std::lock_guard<std::mutex> lock(mu_);
    if (messages_.empty()) return std::string();
    std::string text = std::move(messages_.front().second);
    messages_.pop_front();
    return text;
  }

 private:
  std::mutex mu_;
  std::deque<std::pair<int32_t, std::string>> messages_;
};

inline void Check(llm42_status s) {
  if (s != LLM42_OK) throw Error{s, llm42_last_error()};
}

// Calls fill(buf, capacity, &n) with a growing buffer until the result fits.
template <typename T, typename Fill>
std::vector<T> ReadAll(Fill fill) {
  std::vector<T> buf(256);
  for (;;) {
    size_t n = 0;
    const llm42_status s = fill(buf.data(), buf.size(), &n);
    if (s == LLM42_OK && n <= buf.size()) {
      buf.resize(n);
      return buf;
    }
    if (s != LLM42_OK && s != LLM42_OUT_OF_RANGE) Check(s);
    buf.resize(std::max(buf.size() * 2, n));
  }
}

inline std::string ToString(const std::vector<char>& v) { return std::string(v.begin(), v.end()); }

// At the end of a request's stream: throws the status it ended with unless that is OK, so that
// iterating, reading or awaiting a failed or cancelled request raises instead of ending quietly
// (each language maps CANCELLED to its cancellation exception).
inline void CheckEnded(llm42_request* r) { Check(llm42_request_status(r)); }

// Whether a binding built against header version `built` can use library version `library`
// (LLM42_VERSION_NUMBER encoding): the same major version and no older a library; before 1.0 the
// same minor version too (0.x makes no ABI promise). "" when it can, else the reason. Each
// language checks it when the module loads.
inline std::string VersionProblem(int32_t built, int32_t library) {
  const int32_t major = built / 1000000, minor = built / 1000 % 1000;
  const int32_t lib_major = library / 1000000, lib_minor = library / 1000 % 1000;
  if (lib_major == major && library >= built && (major > 0 || lib_minor == minor)) return std::string();
  auto text = [](int32_t v) {
    return std::to_string(v / 1000000) + "." + std::to_string(v / 1000 % 1000) + "." + std::to_string(v % 1000);
  };
  return "these llm42 bindings were built for libllm42 " + text(built) + " but the library loaded is " +
         text(library) + "; install the matching libllm42 or rebuild the bindings";
}

// A chunk of streamed text, or the end of the stream (done: the request finished and everything
// was read): str / String / string, or None / null (each language's .i maps it).
struct Text {
  bool done = false;
  std::string text;
};

// Streamed token ids, or the end of the stream: list[int] / int[], or None / null.
struct Tokens {
  bool done = false;
  std::vector<int32_t> ids;
};

// Binary data (a receipt): bytes in Python, byte[] in Java and C# (each language's .i maps it).
struct Bytes {
  std::string data;
};

}  // namespace llm42_swig

// What Session.verify_receipt found (llm42_session_verify_receipt).
struct llm42_swig_receipt_check {
  int32_t outcome = LLM42_RECEIPT_REPRODUCED;
  int64_t first_difference = -1;
  std::string detail;
};

// llm42_finish_reason as a scoped enum: its CANCELLED would clash with llm42_status's in the
// languages' shared symbol table.
enum class llm42_swig_finish_reason { NONE = 0, STOP = 1, LENGTH = 2, CANCELLED = 3, ERROR = 4 };
static_assert(static_cast<int>(llm42_swig_finish_reason::CANCELLED) == LLM42_FINISH_CANCELLED &&
              static_cast<int>(llm42_swig_finish_reason::ERROR) == LLM42_FINISH_ERROR &&
              static_cast<int>(llm42_swig_finish_reason::LENGTH) == LLM42_FINISH_LENGTH &&
              static_cast<int>(llm42_swig_finish_reason::STOP) == LLM42_FINISH_STOP &&
              static_cast<int>(llm42_swig_finish_reason::NONE) == LLM42_FINISH_NONE,
              "FinishReason must mirror llm42_finish_reason");

// The boxes SWIG wraps (handle_box.h: closing one while another thread uses it is safe).
struct llm42_swig_determinism : llm42_swig::Box<llm42_determinism> { using Box::Box; };
struct llm42_swig_session_options : llm42_swig::Box<llm42_session_options> { using Box::Box; };
struct llm42_swig_session : llm42_swig::Box<llm42_session> { using Box::Box; };
struct llm42_swig_request_options : llm42_swig::Box<llm42_request_options> { using Box::Box; };
struct llm42_swig_request : llm42_swig::Box<llm42_request> { using Box::Box; };
struct llm42_swig_watcher : llm42_swig::Box<llm42_watcher> { using Box::Box; };
struct llm42_swig_session_loader : llm42_swig::Box<llm42_session_loader> { using Box::Box; };
%}

%include <stdint.i>

/* Each language's .i defines, before including this file, LLM42_SWIG_RAISE(status, message)
 * in its wrapper code (raise the language's Llm42Exception) and, at SWIG level,
 * LLM42_SWIG_ON_ERROR (how a wrapper bails out once it is raised). */
%exception {
  try {
    $action
  } catch (const llm42_swig::Error& e) {
    LLM42_SWIG_RAISE(e.status, e.message.c_str());
    LLM42_SWIG_ON_ERROR
  }
}

/* The enums, from the header itself; its functions stay unwrapped (the classes below use them). */
#define LLM42_API
%rename("$ignore", regextarget=1, %$isfunction) "^llm42_";
%ignore LLM42_STATUS_FORCE_INT32_;
%ignore LLM42_MODE_FORCE_INT32_;
%ignore LLM42_STAT_FORCE_INT32_;
%ignore LLM42_DECODE_PATH_FORCE_INT32_;
%ignore LLM42_RECEIPT_OUTCOME_FORCE_INT32_;
%ignore llm42_finish_reason;
%ignore llm42_log_callback;
%ignore llm42_token_callback;
%rename(Status) llm42_status;
%rename(Mode) llm42_mode;
%rename(Stat) llm42_stat;
%rename(DecodePath) llm42_decode_path;
%rename(ReceiptOutcome) llm42_receipt_outcome;
%include "llm42/llm42.h"
%rename(FinishReason) llm42_swig_finish_reason;
enum class llm42_swig_finish_reason { NONE = 0, STOP = 1, LENGTH = 2, CANCELLED = 3, ERROR = 4 };

%rename(Determinism) llm42_swig_determinism;
%rename(SessionOptions) llm42_swig_session_options;
%rename(Session) llm42_swig_session;
%rename(RequestOptions) llm42_swig_request_options;
%rename(Request) llm42_swig_request;
%rename(ReceiptCheck) llm42_swig_receipt_check;
%rename(Watcher) llm42_swig_watcher;
%rename(SessionLoader) llm42_swig_session_loader;
%nodefaultctor llm42_swig_receipt_check;  // checks come from Session.verify_receipt
%nodefaultctor llm42_swig_request;  // requests come from Session.submit
struct llm42_swig_determinism {};
struct llm42_swig_session_options {};
struct llm42_swig_session {};
struct llm42_swig_request_options {};
struct llm42_swig_request {};
struct llm42_swig_receipt_check {};
struct llm42_swig_watcher {};
struct llm42_swig_session_loader {};

%newobject llm42_swig_session::submit;
%newobject llm42_swig_session::verify_receipt;
%newobject llm42_swig_session_loader::take;

/* SessionLoader: creates a session without blocking (llm42_session_create_async). Poll
 * progress() (0..1) from a frame or event loop, then take() the session once wait_for(0) is true;
 * cancel() stops the load (take() then raises the cancellation). Closing it cancels a load still
 * running. Nothing calls back into the host runtime. */
%extend llm42_swig_session_loader {
  llm42_swig_session_loader(llm42_swig_session_options* options) {
    llm42_session_loader* h = nullptr;
    llm42_swig::Check(llm42_session_create_async(llm42_swig::Handle(options, "SessionOptions"), &h));
    return new llm42_swig_session_loader(h);
  }
  ~llm42_swig_session_loader() { $self->Delete(); }
  void close() { $self->Close(); }
  float progress() { return llm42_session_loader_progress(llm42_swig::Handle($self, "SessionLoader")); }
  /* True once the load has ended (well or not); waits up to timeout_ms (-1 = forever). */
  bool wait_for(int32_t timeout_ms) {
    const llm42_status s = llm42_session_loader_wait(llm42_swig::Handle($self, "SessionLoader"), timeout_ms);
    if (s == LLM42_TIMEOUT) return false;
    llm42_swig::Check(s);
    return true;
  }
  void cancel() { llm42_swig::Check(llm42_session_loader_cancel(llm42_swig::Handle($self, "SessionLoader"))); }
  /* The loaded session; raises what the creation failed with (the cancellation after cancel()). */
  llm42_swig_session* take() {
    llm42_session* h = nullptr;
    llm42_swig::Check(llm42_session_loader_take(llm42_swig::Handle($self, "SessionLoader"), &h));
    return new llm42_swig_session(h);
  }
}

/* Watcher: one thread waiting on many requests (llm42_watcher_*). Each language's async forms use
 * one per session, from a dispatcher thread of that language, so no llm42 thread ever calls into
 * the host runtime. Tags are the caller's ints. */
%extend llm42_swig_watcher {
  llm42_swig_watcher() {
    llm42_watcher* h = nullptr;
    llm42_swig::Check(llm42_watcher_create(&h));
    return new llm42_swig_watcher(h);
  }
  ~llm42_swig_watcher() { $self->Delete(); }
  /* Wakes a wait in progress, which then returns its tags (or none). */
  void close() { $self->Close(); }
  void add(llm42_swig_request* request, int32_t tag) {
    llm42_swig::Check(llm42_watcher_add(llm42_swig::Handle($self, "Watcher"), llm42_swig::Handle(request, "Request"),
                                        static_cast<uint64_t>(static_cast<uint32_t>(tag))));
  }
  void remove(llm42_swig_request* request) {
    llm42_swig::Check(llm42_watcher_remove(llm42_swig::Handle($self, "Watcher"), llm42_swig::Handle(request, "Request")));
  }
  /* The tags of requests with news (new text or tokens, or the end), each once; empty when
   * timeout_ms (-1 = forever) passed with none, or after wake(). */
  std::vector<int32_t> wait(int32_t timeout_ms) {
    const auto use = llm42_swig::Handle($self, "Watcher");
    uint64_t tags[256];
    size_t n = 0;
    const llm42_status s = llm42_watcher_wait(use, tags, 256, &n, timeout_ms);
    if (s == LLM42_TIMEOUT) return std::vector<int32_t>();
    llm42_swig::Check(s);
    std::vector<int32_t> out(n);
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<int32_t>(static_cast<uint32_t>(tags[i]));
    return out;
  }
  void wake() { llm42_swig::Check(llm42_watcher_wake(llm42_swig::Handle($self, "Watcher"))); }
}

%extend llm42_swig_receipt_check {
  ~llm42_swig_receipt_check() { delete $self; }
  /* Holds no handle: nothing to free before the object itself goes (every class has close()). */
  void close() {}
  llm42_receipt_outcome outcome() { return static_cast<llm42_receipt_outcome>($self->outcome); }
  bool reproduced() { return $self->outcome == LLM42_RECEIPT_REPRODUCED; }
  /* The first differing output position for OTHER_OUTPUT, else -1. */
  int64_t first_difference() { return $self->first_difference; }
  /* What differs, in one line; empty when reproduced. */
  std::string detail() { return $self->detail; }
}

%extend llm42_swig_determinism {
  llm42_swig_determinism(llm42_mode mode) {
    llm42_determinism* h = nullptr;
    llm42_swig::Check(llm42_determinism_create(mode, &h));
    return new llm42_swig_determinism(h);
  }
  ~llm42_swig_determinism() { $self->Delete(); }
  void close() { $self->Close(); }
  void set_window(int32_t tokens) {
    llm42_swig::Check(llm42_determinism_set_window(llm42_swig::Handle($self, "Determinism"), tokens));
  }
  void set_verify_group(int32_t requests) {
    llm42_swig::Check(llm42_determinism_set_verify_group(llm42_swig::Handle($self, "Determinism"), requests));
  }
  void set_default_seed(uint64_t seed) {
    llm42_swig::Check(llm42_determinism_set_default_seed(llm42_swig::Handle($self, "Determinism"), seed));
  }
  /* How selective mode decodes deterministic requests (AUTO, VERIFY, FIXED). */
  void set_decode_path(llm42_decode_path path) {
    llm42_swig::Check(llm42_determinism_set_decode_path(llm42_swig::Handle($self, "Determinism"), path));
  }
}

/* Library-wide: versions, status names and the log level (messages below it are dropped; the
 * default is warnings). capture_log(true) sends the library's log (stderr by default) into a
 * queue the host drains with log_message_level() (the oldest message's LLM42_LOG_* level, -1
 * when none) and take_log_message() (removes and returns it); capture_log(false) returns it to
 * stderr. */
%inline %{
int32_t version_number() { return llm42_version_number(); }
std::string version_string() { return llm42_version_string(); }
std::string status_name(llm42_status status) { return llm42_status_name(status); }
void set_log_level(int32_t level) { llm42_set_log_level(level); }
void capture_log(bool on) {
  if (on) {
    llm42_set_log_callback(llm42_swig::LogQueue::OnLog, &llm42_swig::LogQueue::Get());
  } else {
    llm42_set_log_callback(nullptr, nullptr);
  }
}
int32_t log_message_level() { return llm42_swig::LogQueue::Get().FrontLevel(); }
std::string take_log_message() { return llm42_swig::LogQueue::Get().Take(); }
/* "" when this binding can use the loaded libllm42, else why not (checked at load). */
std::string version_problem() { return llm42_swig::VersionProblem(LLM42_VERSION_NUMBER, llm42_version_number()); }
std::string version_problem_between(int32_t built, int32_t library) { return llm42_swig::VersionProblem(built, library); }
%}

%extend llm42_swig_session_options {
  llm42_swig_session_options() {
    llm42_session_options* h = nullptr;
    llm42_swig::Check(llm42_session_options_create(&h));
    return new llm42_swig_session_options(h);
  }
  ~llm42_swig_session_options() { $self->Delete(); }
  void close() { $self->Close(); }
  /* Jinja source replacing the model's chat template ("": the model's). */
  void set_chat_template(const std::string& jinja) {
    llm42_swig::Check(llm42_session_options_set_chat_template(llm42_swig::Handle($self, "SessionOptions"), jinja.c_str()));
  }
  void set_model_path(const std::string& path) {
    llm42_swig::Check(llm42_session_options_set_model_path(llm42_swig::Handle($self, "SessionOptions"), path.c_str()));
  }
  void set_backend(const std::string& backend) {
    llm42_swig::Check(llm42_session_options_set_backend(llm42_swig::Handle($self, "SessionOptions"), backend.c_str()));
  }
  void set_threads(int32_t n) {
    llm42_swig::Check(llm42_session_options_set_threads(llm42_swig::Handle($self, "SessionOptions"), n));
  }
  void set_context_length(int32_t n) {
    llm42_swig::Check(llm42_session_options_set_context_length(llm42_swig::Handle($self, "SessionOptions"), n));
  }
  void set_max_batch_tokens(int32_t n) {
    llm42_swig::Check(llm42_session_options_set_max_batch_tokens(llm42_swig::Handle($self, "SessionOptions"), n));
  }
  void set_max_running_requests(int32_t n) {
    llm42_swig::Check(llm42_session_options_set_max_running_requests(llm42_swig::Handle($self, "SessionOptions"), n));
  }
  void set_prefix_caching(bool enable) {
    llm42_swig::Check(llm42_session_options_set_prefix_caching(llm42_swig::Handle($self, "SessionOptions"), enable ? 1 : 0));
  }
  void set_kv_prefault(bool enable) {
    llm42_swig::Check(llm42_session_options_set_kv_prefault(llm42_swig::Handle($self, "SessionOptions"), enable ? 1 : 0));
  }
  void set_kv_dtype(const std::string& dtype) {
    llm42_swig::Check(llm42_session_options_set_kv_dtype(llm42_swig::Handle($self, "SessionOptions"), dtype.c_str()));
  }
  void set_kv_cache_tokens(int64_t n) {
    llm42_swig::Check(llm42_session_options_set_kv_cache_tokens(llm42_swig::Handle($self, "SessionOptions"), n));
  }
  void set_vocab_only(bool on) {
    llm42_swig::Check(llm42_session_options_set_vocab_only(llm42_swig::Handle($self, "SessionOptions"), on ? 1 : 0));
  }
  void set_determinism(llm42_swig_determinism* policy) {
    llm42_swig::Check(llm42_session_options_set_determinism(llm42_swig::Handle($self, "SessionOptions"),
                                                            llm42_swig::Handle(policy, "Determinism")));
  }
  void load_config(const std::string& textproto_path) {
    llm42_swig::Check(llm42_session_options_load_config(llm42_swig::Handle($self, "SessionOptions"), textproto_path.c_str()));
  }
}

%extend llm42_swig_request_options {
  llm42_swig_request_options() {
    llm42_request_options* h = nullptr;
    llm42_swig::Check(llm42_request_options_create(&h));
    return new llm42_swig_request_options(h);
  }
  ~llm42_swig_request_options() { $self->Delete(); }
  void close() { $self->Close(); }
  void set_prompt(const std::string& text) {
    llm42_swig::Check(llm42_request_options_set_prompt(llm42_swig::Handle($self, "RequestOptions"), text.data(), text.size()));
  }
  void set_prompt_tokens(const std::vector<int32_t>& tokens) {
    llm42_swig::Check(llm42_request_options_set_prompt_tokens(llm42_swig::Handle($self, "RequestOptions"), tokens.data(), tokens.size()));
  }
  void add_message(const std::string& role, const std::string& content) {
    llm42_swig::Check(llm42_request_options_add_message(llm42_swig::Handle($self, "RequestOptions"), role.c_str(), content.c_str()));
  }
  // Continues a finished request of the same session (llm42_request_options_set_parent).
  void set_parent(llm42_swig_request* parent) {
    llm42_swig::Check(llm42_request_options_set_parent(llm42_swig::Handle($self, "RequestOptions"),
                                                       llm42_swig::Handle(parent, "Request")));
  }
  // Continues a conversation saved to `path` (llm42_request_options_load_parent).
  void load_parent(llm42_swig_session* session, const std::string& path) {
    llm42_swig::Check(llm42_request_options_load_parent(llm42_swig::Handle($self, "RequestOptions"),
                                                        llm42_swig::Handle(session, "Session"), path.c_str()));
  }
  void set_max_tokens(int32_t n) {
    llm42_swig::Check(llm42_request_options_set_max_tokens(llm42_swig::Handle($self, "RequestOptions"), n));
  }
  void set_temperature(float t) {
    llm42_swig::Check(llm42_request_options_set_temperature(llm42_swig::Handle($self, "RequestOptions"), t));
  }
  void set_top_k(int32_t k) {
    llm42_swig::Check(llm42_request_options_set_top_k(llm42_swig::Handle($self, "RequestOptions"), k));
  }
  void set_top_p(float p) {
    llm42_swig::Check(llm42_request_options_set_top_p(llm42_swig::Handle($self, "RequestOptions"), p));
  }
  void set_min_p(float p) {
    llm42_swig::Check(llm42_request_options_set_min_p(llm42_swig::Handle($self, "RequestOptions"), p));
  }
  /* Logit bias, penalties and output grammars (llm42.h: llm42_request_options_set_logit_bias ...):
   * applied before temperature/top-k/top-p/min-p, in that order; a deterministic request stays
   * bitwise reproducible. */
  void set_logit_bias(int32_t token, float bias) {
    llm42_swig::Check(llm42_request_options_set_logit_bias(llm42_swig::Handle($self, "RequestOptions"), token, bias));
  }
  void set_repetition_penalty(float penalty, int32_t last_n) {
    llm42_swig::Check(llm42_request_options_set_repetition_penalty(llm42_swig::Handle($self, "RequestOptions"), penalty, last_n));
  }
  void set_frequency_penalty(float penalty) {
    llm42_swig::Check(llm42_request_options_set_frequency_penalty(llm42_swig::Handle($self, "RequestOptions"), penalty));
  }
  void set_presence_penalty(float penalty) {
    llm42_swig::Check(llm42_request_options_set_presence_penalty(llm42_swig::Handle($self, "RequestOptions"), penalty));
  }
  /* GBNF (llama.cpp's syntax); "" removes it. */
  void set_grammar(const std::string& gbnf) {
    llm42_swig::Check(llm42_request_options_set_grammar(llm42_swig::Handle($self, "RequestOptions"), gbnf.c_str()));
  }
  /* Tools the request may call (OpenAI tool objects as JSON), in the session's model's
     tool-call syntax, as tool_choice lets it: "auto", "required", "none" or a tool's name. */
  void set_tools(llm42_swig_session* session, const std::string& tools_json, const std::string& tool_choice,
                 bool parallel_calls) {
    llm42_swig::Check(llm42_request_options_set_tools(llm42_swig::Handle($self, "RequestOptions"),
                                                      llm42_swig::Handle(session, "Session"), tools_json.c_str(),
                                                      tool_choice.c_str(), parallel_calls ? 1 : 0));
  }
  /* JSON Schema text; "" removes it. */
  void set_json_schema(const std::string& schema) {
    llm42_swig::Check(llm42_request_options_set_json_schema(llm42_swig::Handle($self, "RequestOptions"), schema.c_str()));
  }
  /* A deterministic request's draft source: "ngram" or "none". */
  void set_draft(const std::string& source) {
    llm42_swig::Check(llm42_request_options_set_draft(llm42_swig::Handle($self, "RequestOptions"), source.c_str()));
  }
  /* Any 64-bit seed (Python: an int in 0..2**64-1; Java: a long read as unsigned; C#: ulong). */
  void set_seed(uint64_t seed) {
    llm42_swig::Check(llm42_request_options_set_seed(llm42_swig::Handle($self, "RequestOptions"), seed));
  }
  void set_deterministic(bool on) {
    llm42_swig::Check(llm42_request_options_set_deterministic(llm42_swig::Handle($self, "RequestOptions"), on ? 1 : 0));
  }
  /* Record each committed token's logprob (Request.logprobs). */
  void set_logprobs(bool on) {
    llm42_swig::Check(llm42_request_options_set_logprobs(llm42_swig::Handle($self, "RequestOptions"), on ? 1 : 0));
  }
  /* Score the prompt (Request.prompt_logprobs). */
  void set_prompt_logprobs(bool on) {
    llm42_swig::Check(llm42_request_options_set_prompt_logprobs(llm42_swig::Handle($self, "RequestOptions"), on ? 1 : 0));
  }
  /* Record the n (0..20) most likely tokens per position (Request.top_logprob_tokens/_values). */
  void set_top_logprobs(int32_t n) {
    llm42_swig::Check(llm42_request_options_set_top_logprobs(llm42_swig::Handle($self, "RequestOptions"), n));
  }
  void add_stop(const std::string& text) {
    llm42_swig::Check(llm42_request_options_add_stop(llm42_swig::Handle($self, "RequestOptions"), text.c_str()));
  }
  void set_ignore_eos(bool on) {
    llm42_swig::Check(llm42_request_options_set_ignore_eos(llm42_swig::Handle($self, "RequestOptions"), on ? 1 : 0));
  }
  void set_thinking(bool on) {
    llm42_swig::Check(llm42_request_options_set_thinking(llm42_swig::Handle($self, "RequestOptions"), on ? 1 : 0));
  }
}

%extend llm42_swig_request {
  ~llm42_swig_request() { $self->Delete(); }
  /* Cancels if still running and frees the handle. */
  void close() { $self->Close(); }
  /* Text committed since the last call; "" when nothing new arrived within timeout_ms (0 = don't
   * wait, -1 = forever); None / null once the request has finished and everything was read, so a
   * zero-timeout frame loop can never mistake the end for a quiet frame and lose the last chunk.
   * At the end of a request that failed or was cancelled it raises instead (the cancellation
   * exception for CANCELLED, else Llm42Exception with the status). */
  llm42_swig::Text read_text(int32_t timeout_ms) {
    const auto use = llm42_swig::Handle($self, "Request");
    llm42_request* r = use;
    std::vector<char> buf(4096);
    for (;;) {
      size_t n = 0;
      const llm42_status s = llm42_request_read_text(r, buf.data(), buf.size(), &n, timeout_ms);
      if (s == LLM42_TIMEOUT) return llm42_swig::Text{};
      if (s == LLM42_OUT_OF_RANGE) {
        buf.resize(std::max(buf.size() * 2, n));
        continue;
      }
      llm42_swig::Check(s);
      // OK with nothing: finished and drained (llm42_request_read_text).
      if (n == 0) llm42_swig::CheckEnded(r);
      return llm42_swig::Text{n == 0, std::string(buf.data(), n)};
    }
  }
  /* Token ids committed since the last call; empty when nothing new arrived within timeout_ms;
   * None / null once the request has finished and every token was read (raising as read_text
   * does at the end of a failed or cancelled request). */
  llm42_swig::Tokens read_tokens(int32_t timeout_ms) {
    const auto use = llm42_swig::Handle($self, "Request");
    llm42_request* r = use;
    std::vector<int32_t> buf(256);
    size_t n = 0;
    const llm42_status s = llm42_request_read_tokens(r, buf.data(), buf.size(), &n, timeout_ms);
    if (s == LLM42_TIMEOUT) return llm42_swig::Tokens{};
    llm42_swig::Check(s);
    if (n == 0) llm42_swig::CheckEnded(r);
    buf.resize(n);
    return llm42_swig::Tokens{n == 0, std::move(buf)};
  }
  bool is_finished() { return llm42_request_is_finished(llm42_swig::Handle($self, "Request")) != 0; }
  /* True once finished, false when timeout_ms passed first. */
  bool wait_for(int32_t timeout_ms) {
    const llm42_status s = llm42_request_wait(llm42_swig::Handle($self, "Request"), timeout_ms);
    if (s == LLM42_TIMEOUT) return false;
    llm42_swig::Check(s);
    return true;
  }
  void cancel() { llm42_swig::Check(llm42_request_cancel(llm42_swig::Handle($self, "Request"))); }
  /* PENDING while running, then how the request ended (OK, CANCELLED or the error). */
  llm42_status status() { return llm42_request_status(llm42_swig::Handle($self, "Request")); }
  /* Raises when the request ended in an error or was cancelled; returns otherwise. */
  void check_status() {
    const llm42_status s = llm42_request_status(llm42_swig::Handle($self, "Request"));
    if (s != LLM42_PENDING) llm42_swig::Check(s);
  }
  llm42_swig_finish_reason finish_reason() {
    return static_cast<llm42_swig_finish_reason>(llm42_request_finish_reason(llm42_swig::Handle($self, "Request")));
  }
  std::vector<int32_t> output_tokens() {
    const auto use = llm42_swig::Handle($self, "Request");
    llm42_request* r = use;
    return llm42_swig::ReadAll<int32_t>([r](int32_t* b, size_t c, size_t* n) { return llm42_request_output_tokens(r, b, c, n); });
  }
  std::string output_text() {
    const auto use = llm42_swig::Handle($self, "Request");
    llm42_request* r = use;
    return llm42_swig::ToString(llm42_swig::ReadAll<char>([r](char* b, size_t c, size_t* n) { return llm42_request_output_text(r, b, c, n); }));
  }
  /* The seed the request samples with (unsigned 64-bit, as set_seed takes it). */
  uint64_t effective_seed() {
    uint64_t seed = 0;
    llm42_swig::Check(llm42_request_effective_seed(llm42_swig::Handle($self, "Request"), &seed));
    return seed;
  }
  /* Each committed token's logprob (a deterministic request's from the fixed schedule). */
  std::vector<float> logprobs() {
    const auto use = llm42_swig::Handle($self, "Request");
    llm42_request* r = use;
    return llm42_swig::ReadAll<float>([r](float* b, size_t c, size_t* n) { return llm42_request_logprobs(r, b, c, n); });
  }
  /* The logprob of each prompt token after the ones before it (prompt length - 1 values). */
  std::vector<float> prompt_logprobs() {
    const auto use = llm42_swig::Handle($self, "Request");
    llm42_request* r = use;
    return llm42_swig::ReadAll<float>([r](float* b, size_t c, size_t* n) { return llm42_request_prompt_logprobs(r, b, c, n); });
  }
  /* The top-N per committed token, N entries per token, most likely first: their ids ... */
  std::vector<int32_t> top_logprob_tokens() {
    const auto use = llm42_swig::Handle($self, "Request");
    llm42_request* r = use;
    return llm42_swig::ReadAll<int32_t>([r](int32_t* b, size_t c, size_t* n) { return llm42_request_top_logprobs(r, b, nullptr, c, n); });
  }
  /* ... and their logprobs. */
  std::vector<float> top_logprob_values() {
    const auto use = llm42_swig::Handle($self, "Request");
    llm42_request* r = use;
    return llm42_swig::ReadAll<float>([r](float* b, size_t c, size_t* n) { return llm42_request_top_logprobs(r, nullptr, b, c, n); });
  }
  /* The reproducibility receipt of a finished deterministic request (docs/receipts.md). */
  llm42_swig::Bytes receipt() {
    const auto use = llm42_swig::Handle($self, "Request");
    llm42_request* r = use;
    const std::vector<char> v = llm42_swig::ReadAll<char>([r](char* b, size_t c, size_t* n) { return llm42_request_receipt(r, b, c, n); });
    return llm42_swig::Bytes{std::string(v.begin(), v.end())};
  }
  int64_t stat(llm42_stat which) {
    int64_t v = 0;
    llm42_swig::Check(llm42_request_stat(llm42_swig::Handle($self, "Request"), which, &v));
    return v;
  }
}

%extend llm42_swig_session {
  llm42_swig_session(llm42_swig_session_options* options) {
    const auto use = llm42_swig::Handle(options, "SessionOptions");
    llm42_session* h = nullptr;
    llm42_swig::Check(llm42_session_create(use, &h));
    return new llm42_swig_session(h);
  }
  ~llm42_swig_session() { $self->Delete(); }
  /* Cancels outstanding requests and frees the model; requests stay usable (finished). */
  void close() { $self->Close(); }
  llm42_swig_request* submit(llm42_swig_request_options* options) {
    llm42_request* r = nullptr;
    llm42_swig::Check(llm42_request_submit(llm42_swig::Handle($self, "Session"),
                                           llm42_swig::Handle(options, "RequestOptions"), &r));
    return new llm42_swig_request(r);
  }
  std::vector<int32_t> tokenize(const std::string& text, bool add_special) {
    const auto use = llm42_swig::Handle($self, "Session");
    llm42_session* s = use;
    return llm42_swig::ReadAll<int32_t>([&](int32_t* b, size_t c, size_t* n) {
      return llm42_session_tokenize(s, text.data(), text.size(), add_special ? 1 : 0, b, c, n);
    });
  }
  std::string detokenize(const std::vector<int32_t>& tokens) {
    const auto use = llm42_swig::Handle($self, "Session");
    llm42_session* s = use;
    return llm42_swig::ToString(llm42_swig::ReadAll<char>([&](char* b, size_t c, size_t* n) {
      return llm42_session_detokenize(s, tokens.data(), tokens.size(), b, c, n);
    }));
  }
  // Writes the conversation a finished request holds to `path` (llm42_session_save_conversation).
  void save_conversation(llm42_swig_request* finished, const std::string& path) {
    llm42_swig::Check(llm42_session_save_conversation(llm42_swig::Handle($self, "Session"),
                                                      llm42_swig::Handle(finished, "Request"), path.c_str()));
  }
  /* The model's SHA-256 fingerprint, 64 hex digits (llm42_session_fingerprint). */
  std::string fingerprint() {
    const auto use = llm42_swig::Handle($self, "Session");
    llm42_session* s = use;
    return llm42_swig::ToString(llm42_swig::ReadAll<char>([s](char* b, size_t c, size_t* n) { return llm42_session_fingerprint(s, b, c, n); }));
  }
  /* Checks a receipt against this session's model and schedule and replays it. */
  llm42_swig_receipt_check* verify_receipt(const llm42_swig::Bytes& receipt) {
    llm42_receipt_outcome outcome = LLM42_RECEIPT_REPRODUCED;
    int64_t first = -1;
    char detail[1024];
    size_t n = 0;
    llm42_swig::Check(llm42_session_verify_receipt(llm42_swig::Handle($self, "Session"), receipt.data.data(),
                                                   receipt.data.size(), &outcome, &first, detail, sizeof detail, &n));
    auto* check = new llm42_swig_receipt_check;
    check->outcome = outcome;
    check->first_difference = first;
    check->detail = detail;
    return check;
  }
  /* Submits the options, waits, and returns the whole output text (llm42_session_generate);
   * raises when submit refuses them or the request fails or is cancelled. */
  std::string generate(llm42_swig_request_options* options) {
    const auto use = llm42_swig::Handle($self, "Session");
    const auto opts = llm42_swig::Handle(options, "RequestOptions");
    char* text = nullptr;
    size_t n = 0;
    const llm42_status s = llm42_session_generate(use, opts, &text, &n);
    std::string out(text != nullptr ? text : "", n);
    llm42_free(text);
    llm42_swig::Check(s);
    return out;
  }
  int32_t vocab_size() { return llm42_session_vocab_size(llm42_swig::Handle($self, "Session")); }
  int32_t eos_token() { return llm42_session_eos_token(llm42_swig::Handle($self, "Session")); }
  int64_t stat(llm42_stat which) {
    int64_t v = 0;
    llm42_swig::Check(llm42_session_stat(llm42_swig::Handle($self, "Session"), which, &v));
    return v;
  }
  /* The conversation (OpenAI messages as JSON) rendered by the model's chat template, with
   * options as JSON ("" for none): llm42_session_apply_chat_template. */
  std::string apply_chat_template(const std::string& messages_json, const std::string& options_json) {
    const auto use = llm42_swig::Handle($self, "Session");
    llm42_session* s = use;
    return llm42_swig::ToString(llm42_swig::ReadAll<char>([&](char* b, size_t c, size_t* n) {
      return llm42_session_apply_chat_template(s, messages_json.c_str(),
                                               options_json.empty() ? nullptr : options_json.c_str(), b, c, n);
    }));
  }
  /* A generated reply split into content, reasoning and tool calls, as JSON:
   * llm42_session_parse_chat_output. */
  std::string parse_chat_output(const std::string& text) {
    const auto use = llm42_swig::Handle($self, "Session");
    llm42_session* s = use;
    return llm42_swig::ToString(llm42_swig::ReadAll<char>([&](char* b, size_t c, size_t* n) {
      return llm42_session_parse_chat_output(s, text.data(), text.size(), b, c, n);
    }));
  }
  std::string stats_json() {
    const auto use = llm42_swig::Handle($self, "Session");
    llm42_session* s = use;
    return llm42_swig::ToString(llm42_swig::ReadAll<char>([s](char* b, size_t c, size_t* n) { return llm42_session_stats_json(s, b, c, n); }));
  }
}
