// The C ABI: validates arguments, calls the C++ core, converts absl::Status to llm42_status.
// No exception crosses this file's functions.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <new>
#include <string>

#include "llm42/llm42.h"
#include "llm42/llm42_testing.h"
#include "lib/backend/backend.h"
#include "lib/engine/session.h"
#include "lib/engine/session_loader.h"
#include "lib/engine/testing_hooks.h"
#include "lib/engine/watcher.h"
#include "lib/tokenizer/tokenizer.h"
#include "lib/util/logging.h"
#include "lib/util/thread_scratch.h"
#include "lib/util/utf8.h"

struct llm42_determinism {
  llm42::DeterminismPolicy policy;
};
struct llm42_session_options {
  llm42::SessionOptions options;
};
struct llm42_session {
  std::unique_ptr<llm42::Session> impl;
};
struct llm42_request_options {
  llm42::RequestOptions options;
  llm42_token_callback callback = nullptr;  // the engine calls TokenTrampoline instead
};
struct llm42_request {
  std::shared_ptr<llm42::Request> impl;
  llm42_token_callback callback = nullptr;
};

struct llm42_session_loader {
  std::unique_ptr<llm42::SessionLoader> impl;
};
struct llm42_watcher {
  std::shared_ptr<llm42::Watcher> impl = std::make_shared<llm42::Watcher>();
};

namespace {

// The engine's counters are numbered as the ABI's (lib/engine/stat.h).
#define LLM42_SAME_STAT(c, cpp) static_assert(static_cast<int32_t>(c) == static_cast<int32_t>(llm42::Stat::cpp))
LLM42_SAME_STAT(LLM42_STAT_REQUESTS_FINISHED, kRequestsFinished);
LLM42_SAME_STAT(LLM42_STAT_TOKENS_GENERATED, kTokensGenerated);
LLM42_SAME_STAT(LLM42_STAT_TOKENS_VERIFIED, kTokensVerified);
LLM42_SAME_STAT(LLM42_STAT_VERIFY_PASSES, kVerifyPasses);
LLM42_SAME_STAT(LLM42_STAT_ROLLBACKS, kRollbacks);
LLM42_SAME_STAT(LLM42_STAT_TOKENS_ROLLED_BACK, kTokensRolledBack);
LLM42_SAME_STAT(LLM42_STAT_PREFILL_TOKENS, kPrefillTokens);
LLM42_SAME_STAT(LLM42_STAT_DECODE_STEPS, kDecodeSteps);
LLM42_SAME_STAT(LLM42_STAT_TIME_TO_FIRST_TOKEN_US, kTimeToFirstTokenUs);
LLM42_SAME_STAT(LLM42_STAT_PREEMPTIONS, kPreemptions);
LLM42_SAME_STAT(LLM42_STAT_TOKENS_DECODED_FIXED, kTokensDecodedFixed);
LLM42_SAME_STAT(LLM42_STAT_CACHED_PROMPT_TOKENS, kCachedPromptTokens);
LLM42_SAME_STAT(LLM42_STAT_KV_EVICTIONS, kKvEvictions);
LLM42_SAME_STAT(LLM42_STAT_KV_WINDOW_RELEASES, kKvWindowReleases);
LLM42_SAME_STAT(LLM42_STAT_DRAFT_TOKENS, kDraftTokens);
LLM42_SAME_STAT(LLM42_STAT_DRAFT_TOKENS_ACCEPTED, kDraftTokensAccepted);
static_assert(LLM42_STAT_DRAFT_TOKENS_ACCEPTED + 1 == llm42::kStatCount, "a counter without its ABI number");
#undef LLM42_SAME_STAT

// The other enums the ABI mirrors are cast across this file; each value must mean the same.
#define LLM42_SAME(c, cpp) static_assert(static_cast<int32_t>(c) == static_cast<int32_t>(cpp))
LLM42_SAME(LLM42_MODE_SELECTIVE, llm42::DeterminismMode::kSelective);
LLM42_SAME(LLM42_MODE_BATCH_INVARIANT, llm42::DeterminismMode::kBatchInvariant);
LLM42_SAME(LLM42_MODE_OFF, llm42::DeterminismMode::kOff);
LLM42_SAME(LLM42_DECODE_PATH_AUTO, llm42::DecodePath::kAuto);
LLM42_SAME(LLM42_DECODE_PATH_VERIFY, llm42::DecodePath::kVerify);
LLM42_SAME(LLM42_DECODE_PATH_FIXED, llm42::DecodePath::kFixed);
LLM42_SAME(LLM42_FINISH_NONE, llm42::FinishReason::kNone);
LLM42_SAME(LLM42_FINISH_STOP, llm42::FinishReason::kStop);
LLM42_SAME(LLM42_FINISH_LENGTH, llm42::FinishReason::kLength);
LLM42_SAME(LLM42_FINISH_CANCELLED, llm42::FinishReason::kCancelled);
LLM42_SAME(LLM42_FINISH_ERROR, llm42::FinishReason::kError);
LLM42_SAME(LLM42_RECEIPT_REPRODUCED, llm42::ReceiptCheck::Outcome::kReproduced);
LLM42_SAME(LLM42_RECEIPT_OTHER_MODEL, llm42::ReceiptCheck::Outcome::kOtherModel);
LLM42_SAME(LLM42_RECEIPT_OTHER_SCHEDULE, llm42::ReceiptCheck::Outcome::kOtherSchedule);
LLM42_SAME(LLM42_RECEIPT_OTHER_OUTPUT, llm42::ReceiptCheck::Outcome::kOtherOutput);
#undef LLM42_SAME

// The calling thread's last error message (ThreadScratch: a thread_local std::string's destructor
// is unsafe under MinGW's emulated TLS, and host threads come and go).
std::string& LastError() { return llm42::ThreadScratch<std::string, struct LastErrorMessage>(); }

llm42_status ToC(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kOk: return LLM42_OK;
    case absl::StatusCode::kInvalidArgument: return LLM42_INVALID_ARGUMENT;
    case absl::StatusCode::kNotFound: return LLM42_NOT_FOUND;
    case absl::StatusCode::kUnavailable: return LLM42_IO_ERROR;
    case absl::StatusCode::kDataLoss: return LLM42_FORMAT_ERROR;
    case absl::StatusCode::kUnimplemented: return LLM42_UNSUPPORTED;
    case absl::StatusCode::kResourceExhausted: return LLM42_RESOURCE_EXHAUSTED;
    case absl::StatusCode::kCancelled: return LLM42_CANCELLED;
    case absl::StatusCode::kDeadlineExceeded: return LLM42_TIMEOUT;
    case absl::StatusCode::kFailedPrecondition: return LLM42_FAILED_PRECONDITION;
    case absl::StatusCode::kOutOfRange: return LLM42_OUT_OF_RANGE;
    default: return LLM42_INTERNAL;
  }
}

llm42_status Fail(llm42_status code, std::string message) {
  LastError() = std::move(message);
  return code;
}

llm42_status Check(const absl::Status& s) {
  if (s.ok()) return LLM42_OK;
  return Fail(ToC(s.code()), std::string(s.message()));
}

// Copies `value` into a caller buffer per the header's buffer convention.
template <typename T>
llm42_status CopyOut(const T* data, size_t n, T* buf, size_t capacity, size_t* out_len) {
  if (out_len == nullptr) return Fail(LLM42_INVALID_ARGUMENT, "output length pointer is NULL");
  if (n > capacity) {
    *out_len = n;
    return Fail(LLM42_OUT_OF_RANGE, "buffer of " + std::to_string(capacity) + " holds less than the " +
                                        std::to_string(n) + " needed");
  }
  if (n > 0 && buf == nullptr) return Fail(LLM42_INVALID_ARGUMENT, "output buffer is NULL");
  if (n > 0) std::memcpy(buf, data, n * sizeof(T));
  *out_len = n;
  return LLM42_OK;
}

// What the functions that return a value rather than a status give for a NULL handle (llm42.h's
// conventions): -1, with the failure recorded.
int32_t NullValue(const char* message) {
  LastError() = message;
  return -1;
}

#define LLM42_REQUIRE(cond, msg) \
  do {                           \
    if (!(cond)) return Fail(LLM42_INVALID_ARGUMENT, msg); \
  } while (0)

// Runs body; a C++ exception (allocation failure above all) becomes a status. The last error is
// left alone unless the call fails (llm42.h: it belongs to the last failed call).
template <typename F>
llm42_status Guard(F&& body) {
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return Fail(LLM42_RESOURCE_EXHAUSTED, "out of memory");
  } catch (const std::exception& e) {
    return Fail(LLM42_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return Fail(LLM42_INTERNAL, "internal error");
  }
}

// The option handles' fields, and what a NULL handle is called.
llm42::DeterminismPolicy& Fields(llm42_determinism* h) { return h->policy; }
llm42::SessionOptions& Fields(llm42_session_options* h) { return h->options; }
llm42::RequestOptions& Fields(llm42_request_options* h) { return h->options; }
const char* NullHandle(llm42_determinism*) { return "policy is NULL"; }
const char* NullHandle(llm42_session_options*) { return "options is NULL"; }
const char* NullHandle(llm42_request_options*) { return "options is NULL"; }

// A setter: applies `set` to a copy of the handle's fields and keeps it only when the engine's
// rules accept it (Validate in lib/engine/options.h, the one place they live; this file maps
// their status). A refused value leaves the handle as it was.
template <typename Handle, typename Set>
llm42_status SetField(Handle* h, Set&& set) {
  return Guard([&] {
    LLM42_REQUIRE(h != nullptr, NullHandle(h));
    auto fields = Fields(h);
    set(fields);
    if (absl::Status valid = fields.Validate(); !valid.ok()) return Check(valid);
    Fields(h) = std::move(fields);
    return LLM42_OK;
  });
}

// The engine's token callback (llm42::TokenCallbackFn) for a C one, which takes the request
// handle typed: the engine passes the handle the request was submitted with, and the handle
// holds the C function (llm42_request_submit copies it there). Calling the C function through
// the engine's pointer type instead would be undefined behaviour.
void TokenTrampoline(void* user_data, void* request, const int32_t* tokens, size_t n_tokens, const char* text,
                     size_t text_len, int32_t finished) {
  auto* handle = static_cast<llm42_request*>(request);
  handle->callback(user_data, handle, tokens, n_tokens, text, text_len, finished);
}

// Submits `o` to `s` with `handle` as the request's C handle (what its token callback receives).
llm42_status SubmitTo(llm42_session* s, const llm42_request_options* o, llm42_request& handle) {
  handle.callback = o->callback;
  auto request = s->impl->Submit(o->options, &handle);
  if (!request.ok()) return Check(request.status());
  handle.impl = std::move(request).value();
  return LLM42_OK;
}

// A request's recorded values (logprobs, prompt logprobs), FAILED_PRECONDITION unless the option
// that records them was set.
llm42_status CopyRequested(llm42_request* r, bool llm42::RequestOptions::*option,
                           std::vector<float> (llm42::Request::*values)() const, const char* what, float* out,
                           size_t capacity, size_t* n) {
  return Guard([&] {
    LLM42_REQUIRE(r != nullptr, "request is NULL");
    if (!(r->impl->options().*option)) return Fail(LLM42_FAILED_PRECONDITION, std::string(what) + " were not requested");
    const std::vector<float> v = ((*r->impl).*values)();
    return CopyOut(v.data(), v.size(), out, capacity, n);
  });
}

}  // namespace

extern "C" {

int32_t llm42_version_number(void) { return LLM42_VERSION_NUMBER; }
const char* llm42_version_string(void) { return LLM42_VERSION_STRING; }

const char* llm42_status_name(llm42_status status) {
  switch (status) {
    case LLM42_OK: return "LLM42_OK";
    case LLM42_INVALID_ARGUMENT: return "LLM42_INVALID_ARGUMENT";
    case LLM42_NOT_FOUND: return "LLM42_NOT_FOUND";
    case LLM42_IO_ERROR: return "LLM42_IO_ERROR";
    case LLM42_FORMAT_ERROR: return "LLM42_FORMAT_ERROR";
    case LLM42_UNSUPPORTED: return "LLM42_UNSUPPORTED";
    case LLM42_RESOURCE_EXHAUSTED: return "LLM42_RESOURCE_EXHAUSTED";
    case LLM42_CANCELLED: return "LLM42_CANCELLED";
    case LLM42_TIMEOUT: return "LLM42_TIMEOUT";
    case LLM42_FAILED_PRECONDITION: return "LLM42_FAILED_PRECONDITION";
    case LLM42_OUT_OF_RANGE: return "LLM42_OUT_OF_RANGE";
    case LLM42_INTERNAL: return "LLM42_INTERNAL";
    case LLM42_PENDING: return "LLM42_PENDING";
    default: break;
  }
  return "LLM42_UNKNOWN_STATUS";
}

const char* llm42_last_error(void) { return LastError().c_str(); }

void llm42_set_log_callback(llm42_log_callback fn, void* user_data) {
  llm42::SetLogSink(fn, user_data);
}
void llm42_set_log_level(int32_t level) { llm42::SetLogLevel(level); }

// ---- Determinism policy ----

llm42_status llm42_determinism_create(llm42_mode mode, llm42_determinism** out) {
  return Guard([&] {
    LLM42_REQUIRE(out != nullptr, "out is NULL");
    *out = nullptr;
    auto p = std::make_unique<llm42_determinism>();
    p->policy.mode = static_cast<llm42::DeterminismMode>(mode);
    if (absl::Status valid = p->policy.Validate(); !valid.ok()) return Check(valid);
    *out = p.release();
    return LLM42_OK;
  });
}
void llm42_determinism_destroy(llm42_determinism* policy) { delete policy; }

llm42_status llm42_determinism_set_window(llm42_determinism* p, int32_t tokens) {
  return SetField(p, [&](llm42::DeterminismPolicy& f) {
    f.window = tokens;
  });
}
llm42_status llm42_determinism_set_verify_group(llm42_determinism* p, int32_t requests) {
  return SetField(p, [&](llm42::DeterminismPolicy& f) {
    f.verify_group = requests;
  });
}
llm42_status llm42_determinism_set_default_seed(llm42_determinism* p, uint64_t seed) {
  return SetField(p, [&](llm42::DeterminismPolicy& f) {
    f.default_seed = seed;
  });
}
llm42_status llm42_determinism_set_decode_path(llm42_determinism* p, llm42_decode_path path) {
  return SetField(p, [&](llm42::DeterminismPolicy& f) {
    f.decode_path = static_cast<llm42::DecodePath>(path);
  });
}
llm42_status llm42_determinism_set_mismatch_injection(llm42_determinism* p, double fraction) {
  return SetField(p, [&](llm42::DeterminismPolicy& f) {
    f.mismatch_injection = fraction;
  });
}
llm42_status llm42_determinism_set_fast_path_noise(llm42_determinism* p, double stddev) {
  return SetField(p, [&](llm42::DeterminismPolicy& f) {
    f.fast_path_noise = stddev;
  });
}

// ---- Session options ----

llm42_status llm42_session_options_create(llm42_session_options** out) {
  return Guard([&] {
    LLM42_REQUIRE(out != nullptr, "out is NULL");
    *out = new llm42_session_options();
    return LLM42_OK;
  });
}
void llm42_session_options_destroy(llm42_session_options* o) { delete o; }

llm42_status llm42_session_options_set_model_path(llm42_session_options* o, const char* path) {
  return Guard([&] {
    LLM42_REQUIRE(o != nullptr, "options is NULL");
    LLM42_REQUIRE(path != nullptr && path[0] != '\0', "model path is NULL or empty");
    o->options.model_path = path;
    return LLM42_OK;
  });
}
llm42_status llm42_session_options_set_chat_template(llm42_session_options* o, const char* jinja) {
  return Guard([&] {
    LLM42_REQUIRE(o != nullptr, "options is NULL");
    o->options.chat_template = jinja != nullptr ? jinja : "";
    return LLM42_OK;
  });
}
llm42_status llm42_session_options_set_backend(llm42_session_options* o, const char* name) {
  if (name == nullptr) return Fail(LLM42_INVALID_ARGUMENT, "backend name is NULL");
  return SetField(o, [&](llm42::SessionOptions& f) { f.backend = name; });
}
llm42_status llm42_session_options_set_threads(llm42_session_options* o, int32_t n) {
  return SetField(o, [&](llm42::SessionOptions& f) {
    f.threads = n;
  });
}
llm42_status llm42_session_options_set_max_batch_tokens(llm42_session_options* o, int32_t n) {
  return SetField(o, [&](llm42::SessionOptions& f) {
    f.max_batch_tokens = n;
  });
}
llm42_status llm42_session_options_set_max_running_requests(llm42_session_options* o, int32_t n) {
  return SetField(o, [&](llm42::SessionOptions& f) {
    f.max_running_requests = n;
  });
}
llm42_status llm42_session_options_set_kv_cache_tokens(llm42_session_options* o, int64_t n) {
  return SetField(o, [&](llm42::SessionOptions& f) {
    f.kv_cache_tokens = n;
  });
}
llm42_status llm42_session_options_set_prefix_caching(llm42_session_options* o, int32_t enable) {
  return SetField(o, [&](llm42::SessionOptions& f) {
    f.prefix_caching = enable != 0;
  });
}
llm42_status llm42_session_options_set_kv_prefault(llm42_session_options* o, int32_t enable) {
  return SetField(o, [&](llm42::SessionOptions& f) {
    f.kv_prefault = enable != 0;
  });
}
llm42_status llm42_session_options_set_kv_dtype(llm42_session_options* o, const char* dtype) {
  if (dtype == nullptr) return Fail(LLM42_INVALID_ARGUMENT, "kv dtype is NULL");
  return SetField(o, [&](llm42::SessionOptions& f) { f.kv_dtype = dtype; });
}
llm42_status llm42_session_options_set_context_length(llm42_session_options* o, int32_t n) {
  return SetField(o, [&](llm42::SessionOptions& f) {
    f.context_length = n;
  });
}
llm42_status llm42_session_options_set_vocab_only(llm42_session_options* o, int32_t on) {
  return SetField(o, [&](llm42::SessionOptions& f) {
    f.vocab_only = on != 0;
  });
}
llm42_status llm42_session_options_set_determinism(llm42_session_options* o,
                                                   const llm42_determinism* p) {
  return Guard([&] {
    LLM42_REQUIRE(o != nullptr, "options is NULL");
    LLM42_REQUIRE(p != nullptr, "policy is NULL");
    o->options.determinism = p->policy;
    return LLM42_OK;
  });
}
llm42_status llm42_session_options_load_config(llm42_session_options* o, const char* path) {
  return Guard([&] {
    LLM42_REQUIRE(o != nullptr, "options is NULL");
    LLM42_REQUIRE(path != nullptr, "path is NULL");
    return Check(o->options.LoadConfig(path));
  });
}

// ---- Session ----

llm42_status llm42_session_create(const llm42_session_options* o, llm42_session** out) {
  return Guard([&] {
    LLM42_REQUIRE(out != nullptr, "out is NULL");
    *out = nullptr;
    LLM42_REQUIRE(o != nullptr, "options is NULL");
    auto session = llm42::Session::Create(o->options);
    if (!session.ok()) return Check(session.status());
    *out = new llm42_session{std::move(session).value()};
    return LLM42_OK;
  });
}

void llm42_session_destroy(llm42_session* s) { delete s; }

llm42_status llm42_session_create_async(const llm42_session_options* o, llm42_session_loader** out) {
  return Guard([&] {
    LLM42_REQUIRE(out != nullptr, "out is NULL");
    *out = nullptr;
    LLM42_REQUIRE(o != nullptr, "options is NULL");
    *out = new llm42_session_loader{std::make_unique<llm42::SessionLoader>(o->options)};
    return LLM42_OK;
  });
}

float llm42_session_loader_progress(const llm42_session_loader* l) {
  if (l == nullptr) return static_cast<float>(NullValue("loader is NULL"));
  return static_cast<float>(l->impl->fraction());
}

llm42_status llm42_session_loader_wait(llm42_session_loader* l, int32_t timeout_ms) {
  return Guard([&] {
    LLM42_REQUIRE(l != nullptr, "loader is NULL");
    if (l->impl->Wait(timeout_ms)) return LLM42_OK;
    return Fail(LLM42_TIMEOUT, "the session is still loading");
  });
}

llm42_status llm42_session_loader_cancel(llm42_session_loader* l) {
  return Guard([&] {
    LLM42_REQUIRE(l != nullptr, "loader is NULL");
    l->impl->Cancel();
    return LLM42_OK;
  });
}

llm42_status llm42_session_loader_take(llm42_session_loader* l, llm42_session** out) {
  return Guard([&] {
    LLM42_REQUIRE(out != nullptr, "out is NULL");
    *out = nullptr;
    LLM42_REQUIRE(l != nullptr, "loader is NULL");
    auto session = l->impl->Take();
    if (!session.ok()) return Check(session.status());
    *out = new llm42_session{std::move(session).value()};
    return LLM42_OK;
  });
}

void llm42_session_loader_destroy(llm42_session_loader* l) { delete l; }

llm42_status llm42_testing_fail_requests_after(int32_t tokens) {
  return Guard([&] {
    LLM42_REQUIRE(tokens >= 0, "tokens must be >= 0");
    llm42::TestingHooks::FailRequestsAfterTokens().store(tokens);
    return LLM42_OK;
  });
}

llm42_status llm42_testing_set_load_stage_delay(int32_t milliseconds) {
  return Guard([&] {
    LLM42_REQUIRE(milliseconds >= 0 && milliseconds <= 10000, "the delay must be 0..10000 ms");
    llm42::TestingHooks::LoadStageDelayMs().store(milliseconds);
    return LLM42_OK;
  });
}

llm42_status llm42_session_tokenize(llm42_session* s, const char* text, size_t text_len,
                                    int32_t add_special, int32_t* tokens, size_t capacity,
                                    size_t* n_tokens) {
  return Guard([&] {
    LLM42_REQUIRE(s != nullptr, "session is NULL");
    LLM42_REQUIRE(text != nullptr || text_len == 0, "text is NULL");
    const std::string_view t(text == nullptr ? "" : text, text_len);
    LLM42_REQUIRE(llm42::IsValidUtf8(t), "text is not valid UTF-8");
    const std::vector<int32_t> ids = s->impl->tokenizer().Encode(t, add_special != 0, true);
    return CopyOut(ids.data(), ids.size(), tokens, capacity, n_tokens);
  });
}

llm42_status llm42_session_detokenize(llm42_session* s, const int32_t* tokens, size_t n_tokens,
                                      char* buf, size_t capacity, size_t* n_bytes) {
  return Guard([&] {
    LLM42_REQUIRE(s != nullptr, "session is NULL");
    LLM42_REQUIRE(tokens != nullptr || n_tokens == 0, "tokens is NULL");
    const llm42::Tokenizer& tok = s->impl->tokenizer();
    const std::span<const int32_t> ids(tokens, n_tokens);
    if (absl::Status valid = tok.vocab().CheckIds(ids); !valid.ok()) return Check(valid);
    const std::string text = tok.Decode(ids);
    return CopyOut(text.data(), text.size(), buf, capacity, n_bytes);
  });
}

int32_t llm42_session_vocab_size(const llm42_session* s) {
  if (s == nullptr) return NullValue("session is NULL");
  return s->impl->tokenizer().vocab().size();
}
int32_t llm42_session_eos_token(const llm42_session* s) {
  if (s == nullptr) return NullValue("session is NULL");
  return s->impl->tokenizer().vocab().eos();
}

llm42_status llm42_session_fingerprint(llm42_session* s, char* buf, size_t capacity,
                                       size_t* n_bytes) {
  return Guard([&] {
    LLM42_REQUIRE(s != nullptr, "session is NULL");
    const std::string& hex = s->impl->Fingerprint().sha256;
    return CopyOut(hex.data(), hex.size(), buf, capacity, n_bytes);
  });
}

llm42_status llm42_session_save_conversation(llm42_session* s, llm42_request* r, const char* path) {
  return Guard([&] {
    LLM42_REQUIRE(s != nullptr, "session is NULL");
    LLM42_REQUIRE(r != nullptr, "request is NULL");
    LLM42_REQUIRE(path != nullptr, "path is NULL");
    return Check(s->impl->SaveConversation(*r->impl, path));
  });
}
llm42_status llm42_session_stat(llm42_session* s, llm42_stat which, int64_t* value) {
  return Guard([&] {
    LLM42_REQUIRE(s != nullptr, "session is NULL");
    LLM42_REQUIRE(value != nullptr, "value is NULL");
    if (!llm42::IsSessionStat(static_cast<llm42::Stat>(which))) {
      return Fail(LLM42_INVALID_ARGUMENT, which == LLM42_STAT_TIME_TO_FIRST_TOKEN_US
                                              ? "time to first token is a per-request statistic"
                                              : "unknown statistic");
    }
    *value = s->impl->stat(static_cast<llm42::Stat>(which));
    return LLM42_OK;
  });
}

llm42_status llm42_session_apply_chat_template(llm42_session* s, const char* messages_json, const char* options_json,
                                               char* out, size_t capacity, size_t* out_len) {
  return Guard([&] {
    LLM42_REQUIRE(s != nullptr, "session is NULL");
    LLM42_REQUIRE(messages_json != nullptr, "messages_json is NULL");
    absl::StatusOr<std::string> text =
        s->impl->ApplyChatTemplate(messages_json, options_json != nullptr ? options_json : "");
    if (!text.ok()) return Check(text.status());
    return CopyOut(text->data(), text->size(), out, capacity, out_len);
  });
}

llm42_status llm42_session_parse_chat_output(llm42_session* s, const char* text, size_t n_bytes, char* out,
                                             size_t capacity, size_t* out_len) {
  return Guard([&] {
    LLM42_REQUIRE(s != nullptr, "session is NULL");
    LLM42_REQUIRE(text != nullptr || n_bytes == 0, "text is NULL");
    absl::StatusOr<std::string> json = s->impl->ParseChatOutput(std::string_view(text != nullptr ? text : "", n_bytes));
    if (!json.ok()) return Check(json.status());
    return CopyOut(json->data(), json->size(), out, capacity, out_len);
  });
}

llm42_status llm42_session_stats_json(llm42_session* s, char* buf, size_t capacity,
                                      size_t* n_bytes) {
  return Guard([&] {
    LLM42_REQUIRE(s != nullptr, "session is NULL");
    const std::string json = s->impl->StatsJson();
    return CopyOut(json.data(), json.size(), buf, capacity, n_bytes);
  });
}

// ---- Request options ----

llm42_status llm42_request_options_create(llm42_request_options** out) {
  return Guard([&] {
    LLM42_REQUIRE(out != nullptr, "out is NULL");
    *out = new llm42_request_options();
    return LLM42_OK;
  });
}
void llm42_request_options_destroy(llm42_request_options* o) { delete o; }

llm42_status llm42_request_options_set_prompt(llm42_request_options* o, const char* text,
                                              size_t len) {
  if (text == nullptr && len > 0) return Fail(LLM42_INVALID_ARGUMENT, "text is NULL");
  return SetField(o, [&](llm42::RequestOptions& f) {
    f.prompt_text.assign(text == nullptr ? "" : text, len);
    f.has_prompt_text = true;
    f.has_prompt_tokens = false;
    f.prompt_tokens.clear();
  });
}
llm42_status llm42_request_options_set_prompt_tokens(llm42_request_options* o,
                                                     const int32_t* tokens, size_t n) {
  if (tokens == nullptr && n > 0) return Fail(LLM42_INVALID_ARGUMENT, "tokens is NULL");
  return SetField(o, [&](llm42::RequestOptions& f) {
    f.prompt_tokens.assign(tokens, tokens + n);
    f.has_prompt_tokens = true;
    f.has_prompt_text = false;
    f.prompt_text.clear();
  });
}
llm42_status llm42_request_options_add_message(llm42_request_options* o, const char* role,
                                               const char* content) {
  if (role == nullptr || content == nullptr) return Fail(LLM42_INVALID_ARGUMENT, "role or content is NULL");
  return SetField(o, [&](llm42::RequestOptions& f) { f.messages.emplace_back(role, content); });
}
llm42_status llm42_request_options_set_parent(llm42_request_options* o, llm42_request* parent) {
  return Guard([&] {
    LLM42_REQUIRE(o != nullptr, "options is NULL");
    if (parent == nullptr) {
      o->options.parent.reset();
      return LLM42_OK;
    }
    auto p = parent->impl->AsParent();
    if (!p.ok()) return Fail(LLM42_FAILED_PRECONDITION, std::string(p.status().message()));
    o->options.parent = std::move(p).value();
    return LLM42_OK;
  });
}
llm42_status llm42_request_options_load_parent(llm42_request_options* o, llm42_session* s, const char* path) {
  return Guard([&] {
    LLM42_REQUIRE(o != nullptr, "options is NULL");
    LLM42_REQUIRE(s != nullptr, "session is NULL");
    LLM42_REQUIRE(path != nullptr, "path is NULL");
    auto p = s->impl->LoadConversation(path);
    if (!p.ok()) return Check(p.status());
    o->options.parent = std::move(p).value();
    return LLM42_OK;
  });
}
llm42_status llm42_request_options_set_max_tokens(llm42_request_options* o, int32_t n) {
  return SetField(o, [&](llm42::RequestOptions& f) {
    f.max_tokens = n;
  });
}
llm42_status llm42_request_options_set_temperature(llm42_request_options* o, float t) {
  return SetField(o, [&](llm42::RequestOptions& f) {
    f.sampling.temperature = t;
  });
}
llm42_status llm42_request_options_set_top_k(llm42_request_options* o, int32_t k) {
  return SetField(o, [&](llm42::RequestOptions& f) {
    f.sampling.top_k = k;
  });
}
llm42_status llm42_request_options_set_top_p(llm42_request_options* o, float p) {
  return SetField(o, [&](llm42::RequestOptions& f) {
    f.sampling.top_p = p;
  });
}
llm42_status llm42_request_options_set_min_p(llm42_request_options* o, float p) {
  return SetField(o, [&](llm42::RequestOptions& f) {
    f.sampling.min_p = p;
  });
}
llm42_status llm42_request_options_set_logit_bias(llm42_request_options* o, int32_t token, float bias) {
  if (token < 0) return Fail(LLM42_OUT_OF_RANGE, absl::StrCat("logit bias for token ", token, ": token ids are >= 0"));
  return SetField(o, [&](llm42::RequestOptions& f) { f.controls.SetBias(token, bias); });
}
llm42_status llm42_request_options_set_repetition_penalty(llm42_request_options* o, float penalty, int32_t last_n) {
  return SetField(o, [&](llm42::RequestOptions& f) {
    f.controls.repetition_penalty = penalty;
    f.controls.penalty_last_n = last_n;
  });
}
llm42_status llm42_request_options_set_frequency_penalty(llm42_request_options* o, float penalty) {
  return SetField(o, [&](llm42::RequestOptions& f) { f.controls.frequency_penalty = penalty; });
}
llm42_status llm42_request_options_set_presence_penalty(llm42_request_options* o, float penalty) {
  return SetField(o, [&](llm42::RequestOptions& f) { f.controls.presence_penalty = penalty; });
}

namespace {

// set_grammar and set_json_schema: parse, then set (or remove) the options' output grammar.
llm42_status SetOutputGrammar(llm42_request_options* o, llm42::RequestOptions::OutputGrammar::Kind kind,
                              const char* text) {
  using Kind = llm42::RequestOptions::OutputGrammar::Kind;
  return Guard([&] {
    LLM42_REQUIRE(o != nullptr, NullHandle(o));
    std::optional<llm42::RequestOptions::OutputGrammar>& current = Fields(o).output_grammar;
    if (text == nullptr || *text == '\0') {
      if (current && current->kind == kind) current.reset();
      return LLM42_OK;
    }
    if (current && current->kind != kind) {
      return Fail(LLM42_INVALID_ARGUMENT, kind == Kind::kGbnf ? "the options have a JSON schema; remove it before setting a grammar"
                                                             : "the options have a grammar; remove it before setting a JSON schema");
    }
    absl::StatusOr<llm42::RequestOptions::OutputGrammar> g = llm42::RequestOptions::MakeOutputGrammar(kind, text);
    if (!g.ok()) return Check(g.status());
    current = *std::move(g);
    return LLM42_OK;
  });
}

}  // namespace

llm42_status llm42_request_options_set_grammar(llm42_request_options* o, const char* gbnf) {
  return SetOutputGrammar(o, llm42::RequestOptions::OutputGrammar::Kind::kGbnf, gbnf);
}
llm42_status llm42_request_options_set_json_schema(llm42_request_options* o, const char* schema) {
  return SetOutputGrammar(o, llm42::RequestOptions::OutputGrammar::Kind::kJsonSchema, schema);
}
llm42_status llm42_request_options_set_tools(llm42_request_options* o, llm42_session* s, const char* tools_json,
                                            const char* tool_choice, int32_t parallel_calls) {
  using Kind = llm42::RequestOptions::OutputGrammar::Kind;
  return Guard([&] {
    LLM42_REQUIRE(o != nullptr, NullHandle(o));
    LLM42_REQUIRE(s != nullptr, "session is NULL");
    LLM42_REQUIRE(tools_json != nullptr, "tools_json is NULL");
    absl::StatusOr<std::string> gbnf =
        s->impl->ToolCallGrammar(tools_json, tool_choice != nullptr ? tool_choice : "auto", parallel_calls != 0);
    if (!gbnf.ok()) return Check(gbnf.status());
    std::optional<llm42::RequestOptions::OutputGrammar>& current = Fields(o).output_grammar;
    if (current && current->kind != Kind::kGbnf) {
      return Fail(LLM42_INVALID_ARGUMENT, "the options have a JSON schema; remove it before setting tools");
    }
    if (gbnf->empty()) {  // "none"
      current.reset();
      return LLM42_OK;
    }
    absl::StatusOr<llm42::RequestOptions::OutputGrammar> g = llm42::RequestOptions::MakeOutputGrammar(Kind::kGbnf, *gbnf);
    if (!g.ok()) return Check(g.status());
    current = *std::move(g);
    return LLM42_OK;
  });
}
llm42_status llm42_request_options_set_draft(llm42_request_options* o, const char* source) {
  return Guard([&] {
    LLM42_REQUIRE(o != nullptr, NullHandle(o));
    const std::string_view name = source != nullptr ? source : "none";
    if (name == "model" || name == "mtp") {
      return Fail(LLM42_UNSUPPORTED, "drafting with a draft model or MTP layers is not supported yet (\"ngram\" is)");
    }
    if (name != "none" && name != "ngram") return Fail(LLM42_INVALID_ARGUMENT, "a draft source is none or ngram");
    Fields(o).draft = name == "ngram" ? llm42::RequestOptions::Draft::kNgram : llm42::RequestOptions::Draft::kNone;
    return LLM42_OK;
  });
}
llm42_status llm42_request_options_set_seed(llm42_request_options* o, uint64_t seed) {
  return SetField(o, [&](llm42::RequestOptions& f) {
    f.sampling.seed = seed;
    f.has_seed = true;
  });
}
llm42_status llm42_request_options_set_deterministic(llm42_request_options* o, int32_t on) {
  return SetField(o, [&](llm42::RequestOptions& f) {
    f.deterministic = on != 0;
  });
}
llm42_status llm42_request_options_add_stop(llm42_request_options* o, const char* text) {
  if (text == nullptr) return Fail(LLM42_INVALID_ARGUMENT, "stop string is NULL");
  return SetField(o, [&](llm42::RequestOptions& f) { f.stops.emplace_back(text); });
}
llm42_status llm42_request_options_set_ignore_eos(llm42_request_options* o, int32_t on) {
  return SetField(o, [&](llm42::RequestOptions& f) {
    f.ignore_eos = on != 0;
  });
}
llm42_status llm42_request_options_set_thinking(llm42_request_options* o, int32_t on) {
  return SetField(o, [&](llm42::RequestOptions& f) { f.thinking = on != 0; });
}
llm42_status llm42_request_options_set_logprobs(llm42_request_options* o, int32_t on) {
  return SetField(o, [&](llm42::RequestOptions& f) {
    f.logprobs = on != 0;
  });
}
llm42_status llm42_request_options_set_top_logprobs(llm42_request_options* o, int32_t n) {
  return SetField(o, [&](llm42::RequestOptions& f) {
    f.top_logprobs = n;
  });
}
llm42_status llm42_request_options_set_prompt_logprobs(llm42_request_options* o, int32_t on) {
  return SetField(o, [&](llm42::RequestOptions& f) {
    f.prompt_logprobs = on != 0;
  });
}
llm42_status llm42_request_options_set_callback(llm42_request_options* o, llm42_token_callback fn,
                                                void* user_data) {
  LLM42_REQUIRE(o != nullptr, "options is NULL");
  o->callback = fn;
  o->options.callback = fn != nullptr ? TokenTrampoline : nullptr;
  o->options.callback_user_data = user_data;
  return LLM42_OK;
}

// ---- Requests ----

llm42_status llm42_request_submit(llm42_session* s, const llm42_request_options* o,
                                  llm42_request** out) {
  return Guard([&] {
    LLM42_REQUIRE(out != nullptr, "out is NULL");
    *out = nullptr;
    LLM42_REQUIRE(s != nullptr, "session is NULL");
    LLM42_REQUIRE(o != nullptr, "options is NULL");
    auto handle = std::make_unique<llm42_request>();
    if (const llm42_status st = SubmitTo(s, o, *handle); st != LLM42_OK) return st;
    *out = handle.release();
    return LLM42_OK;
  });
}

llm42_status llm42_request_read_tokens(llm42_request* r, int32_t* tokens, size_t capacity,
                                       size_t* n_tokens, int32_t timeout_ms) {
  return Guard([&] {
    LLM42_REQUIRE(r != nullptr, "request is NULL");
    LLM42_REQUIRE(n_tokens != nullptr, "n_tokens is NULL");
    LLM42_REQUIRE(tokens != nullptr || capacity == 0, "tokens is NULL");
    return Check(r->impl->ReadTokens(tokens, capacity, n_tokens, timeout_ms));
  });
}

llm42_status llm42_request_read_text(llm42_request* r, char* buf, size_t capacity,
                                     size_t* n_bytes, int32_t timeout_ms) {
  return Guard([&] {
    LLM42_REQUIRE(r != nullptr, "request is NULL");
    LLM42_REQUIRE(n_bytes != nullptr, "n_bytes is NULL");
    LLM42_REQUIRE(buf != nullptr || capacity == 0, "buf is NULL");
    return Check(r->impl->ReadText(buf, capacity, n_bytes, timeout_ms));
  });
}

llm42_status llm42_request_wait(llm42_request* r, int32_t timeout_ms) {
  return Guard([&] {
    LLM42_REQUIRE(r != nullptr, "request is NULL");
    if (r->impl->Wait(timeout_ms)) return LLM42_OK;
    return Fail(LLM42_TIMEOUT, "the request did not finish before the timeout");
  });
}

llm42_status llm42_request_cancel(llm42_request* r) {
  return Guard([&] {
    LLM42_REQUIRE(r != nullptr, "request is NULL");
    r->impl->Cancel();
    return LLM42_OK;
  });
}

int32_t llm42_request_is_finished(const llm42_request* r) {
  if (r == nullptr) return NullValue("request is NULL");
  return r->impl->finished() ? 1 : 0;
}

llm42_status llm42_request_status(const llm42_request* r) {
  return Guard([&] {
    LLM42_REQUIRE(r != nullptr, "request is NULL");
    // finished() first: a request's status is final once it reads finished.
    if (!r->impl->finished()) return LLM42_PENDING;
    return Check(r->impl->status());
  });
}

llm42_finish_reason llm42_request_finish_reason(const llm42_request* r) {
  if (r == nullptr) return static_cast<llm42_finish_reason>(NullValue("request is NULL"));
  return static_cast<llm42_finish_reason>(r->impl->finish_reason());
}

llm42_status llm42_request_output_tokens(llm42_request* r, int32_t* tokens, size_t capacity,
                                         size_t* n_tokens) {
  return Guard([&] {
    LLM42_REQUIRE(r != nullptr, "request is NULL");
    const std::vector<int32_t> out = r->impl->output_tokens();
    return CopyOut(out.data(), out.size(), tokens, capacity, n_tokens);
  });
}

llm42_status llm42_request_output_text(llm42_request* r, char* buf, size_t capacity,
                                       size_t* n_bytes) {
  return Guard([&] {
    LLM42_REQUIRE(r != nullptr, "request is NULL");
    const std::string out = r->impl->output_text();
    return CopyOut(out.data(), out.size(), buf, capacity, n_bytes);
  });
}

llm42_status llm42_request_logprobs(llm42_request* r, float* values, size_t capacity, size_t* n) {
  return CopyRequested(r, &llm42::RequestOptions::logprobs, &llm42::Request::logprobs, "logprobs", values, capacity, n);
}

llm42_status llm42_request_prompt_logprobs(llm42_request* r, float* values, size_t capacity, size_t* n) {
  return CopyRequested(r, &llm42::RequestOptions::prompt_logprobs, &llm42::Request::prompt_logprobs,
                       "prompt logprobs", values, capacity, n);
}

llm42_status llm42_request_top_logprobs(llm42_request* r, int32_t* tokens, float* logprobs, size_t capacity,
                                        size_t* n) {
  return Guard([&] {
    LLM42_REQUIRE(r != nullptr, "request is NULL");
    LLM42_REQUIRE(n != nullptr, "output length pointer is NULL");
    if (r->impl->options().top_logprobs == 0) {
      return Fail(LLM42_FAILED_PRECONDITION, "top logprobs were not requested");
    }
    const std::vector<llm42::TopLogprob> top = r->impl->top_logprobs();
    *n = top.size();
    if (top.size() > capacity) {
      return Fail(LLM42_OUT_OF_RANGE, "buffer of " + std::to_string(capacity) + " holds less than the " +
                                          std::to_string(top.size()) + " needed");
    }
    for (size_t i = 0; i < top.size(); ++i) {
      if (tokens != nullptr) tokens[i] = top[i].token;
      if (logprobs != nullptr) logprobs[i] = top[i].logprob;
    }
    return LLM42_OK;
  });
}

llm42_status llm42_request_stat(llm42_request* r, llm42_stat which, int64_t* value) {
  return Guard([&] {
    LLM42_REQUIRE(r != nullptr, "request is NULL");
    LLM42_REQUIRE(value != nullptr, "value is NULL");
    LLM42_REQUIRE(llm42::IsRequestStat(static_cast<llm42::Stat>(which)), "not a per-request statistic");
    *value = r->impl->stat(static_cast<llm42::Stat>(which));
    return LLM42_OK;
  });
}

llm42_status llm42_request_effective_seed(const llm42_request* r, uint64_t* seed) {
  return Guard([&] {
    LLM42_REQUIRE(r != nullptr, "request is NULL");
    LLM42_REQUIRE(seed != nullptr, "seed is NULL");
    *seed = r->impl->seed();
    return LLM42_OK;
  });
}

llm42_status llm42_request_receipt(llm42_request* r, void* buf, size_t capacity, size_t* n_bytes) {
  return Guard([&] {
    LLM42_REQUIRE(r != nullptr, "request is NULL");
    LLM42_REQUIRE(r->impl->receipts() != nullptr, "the request has no session");
    const absl::StatusOr<std::string> receipt = r->impl->receipts()->Make(*r->impl);
    if (!receipt.ok()) return Check(receipt.status());
    return CopyOut(receipt->data(), receipt->size(), static_cast<char*>(buf), capacity, n_bytes);
  });
}

void llm42_request_destroy(llm42_request* r) {
  if (r == nullptr) return;
  r->impl->Cancel();
  r->impl->DetachCallback();
  r->impl->Unwatch(nullptr);
  delete r;
}

llm42_status llm42_watcher_create(llm42_watcher** out) {
  return Guard([&] {
    LLM42_REQUIRE(out != nullptr, "out is NULL");
    *out = new llm42_watcher;
    return LLM42_OK;
  });
}

void llm42_watcher_destroy(llm42_watcher* w) { delete w; }

llm42_status llm42_watcher_add(llm42_watcher* w, llm42_request* r, uint64_t tag) {
  return Guard([&] {
    LLM42_REQUIRE(w != nullptr, "watcher is NULL");
    LLM42_REQUIRE(r != nullptr, "request is NULL");
    r->impl->Watch(w->impl, tag);
    return LLM42_OK;
  });
}

llm42_status llm42_watcher_remove(llm42_watcher* w, llm42_request* r) {
  return Guard([&] {
    LLM42_REQUIRE(w != nullptr, "watcher is NULL");
    LLM42_REQUIRE(r != nullptr, "request is NULL");
    r->impl->Unwatch(w->impl.get());
    return LLM42_OK;
  });
}

llm42_status llm42_watcher_wait(llm42_watcher* w, uint64_t* tags, size_t capacity, size_t* n_tags,
                                int32_t timeout_ms) {
  return Guard([&] {
    LLM42_REQUIRE(w != nullptr, "watcher is NULL");
    LLM42_REQUIRE(tags != nullptr || capacity == 0, "tags is NULL");
    LLM42_REQUIRE(n_tags != nullptr, "n_tags is NULL");
    if (w->impl->Wait(tags, capacity, n_tags, timeout_ms)) return LLM42_OK;
    return Fail(LLM42_TIMEOUT, "no watched request had news before the timeout");
  });
}

llm42_status llm42_watcher_wake(llm42_watcher* w) {
  return Guard([&] {
    LLM42_REQUIRE(w != nullptr, "watcher is NULL");
    w->impl->Wake();
    return LLM42_OK;
  });
}

llm42_status llm42_session_verify_receipt(llm42_session* s, const void* receipt, size_t n_bytes,
                                          llm42_receipt_outcome* outcome, int64_t* first_difference, char* detail,
                                          size_t detail_capacity, size_t* detail_len) {
  return Guard([&] {
    LLM42_REQUIRE(s != nullptr, "session is NULL");
    LLM42_REQUIRE(receipt != nullptr || n_bytes == 0, "receipt is NULL");
    LLM42_REQUIRE(outcome != nullptr, "outcome is NULL");
    LLM42_REQUIRE(detail != nullptr || detail_capacity == 0, "detail is NULL");
    const absl::StatusOr<llm42::ReceiptCheck> check =
        s->impl->VerifyReceipt(std::string_view(static_cast<const char*>(receipt), n_bytes));
    if (!check.ok()) return Check(check.status());
    *outcome = static_cast<llm42_receipt_outcome>(check->outcome);
    if (first_difference != nullptr) *first_difference = check->first_difference;
    if (detail_capacity > 0) {
      const size_t n = llm42::Utf8PrefixLength(check->detail, detail_capacity - 1);
      std::memcpy(detail, check->detail.data(), n);
      detail[n] = '\0';
    }
    if (detail_len != nullptr) *detail_len = check->detail.size();
    return LLM42_OK;
  });
}

llm42_status llm42_session_generate(llm42_session* s, const llm42_request_options* o, char** text,
                                    size_t* text_len) {
  return Guard([&] {
    LLM42_REQUIRE(text != nullptr, "text is NULL");
    *text = nullptr;
    LLM42_REQUIRE(text_len != nullptr, "text_len is NULL");
    LLM42_REQUIRE(s != nullptr, "session is NULL");
    LLM42_REQUIRE(o != nullptr, "options is NULL");
    llm42_request handle;
    if (const llm42_status st = SubmitTo(s, o, handle); st != LLM42_OK) return st;
    handle.impl->Wait(-1);
    const std::string out = handle.impl->output_text();
    handle.impl->DetachCallback();
    auto* copy = static_cast<char*>(std::malloc(out.size() + 1));
    if (copy == nullptr) return Fail(LLM42_RESOURCE_EXHAUSTED, "out of memory");
    std::memcpy(copy, out.data(), out.size());
    copy[out.size()] = '\0';
    *text = copy;
    *text_len = out.size();
    return Check(handle.impl->status());
  });
}

void llm42_free(void* memory) { std::free(memory); }

}  // extern "C"
