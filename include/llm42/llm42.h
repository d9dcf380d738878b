/*
 * llm42 — embeddable LLM inference with selective determinism.
 *
 * Conventions (they hold for every function below; docs/c-api.md explains them at length):
 * - Every fallible function returns llm42_status; LLM42_OK is 0. A failed call records a message
 *   that llm42_last_error() returns; a successful call leaves it alone (as errno). The message is
 *   per thread and stays valid until the calling thread's next failed call.
 * - NULL: a NULL handle or a NULL pointer the function needs is INVALID_ARGUMENT; *_destroy(NULL)
 *   is a no-op. The four functions that return a value rather than a status
 *   (llm42_session_vocab_size, llm42_session_eos_token, llm42_request_is_finished,
 *   llm42_request_finish_reason) return -1 for a NULL handle and record the failure; they cannot
 *   fail otherwise.
 * - Results come through trailing pointer parameters, written only on success (a pointer to a
 *   handle is set to NULL on failure; llm42_session_generate also hands over the text of a
 *   request that failed part-way); a parameter documented as optional may be NULL. Enum
 *   results are written through a pointer to their enum type.
 * - Strings are UTF-8. A `const char*` without a length is NUL-terminated. Booleans are
 *   int32_t 0/1. No structs by value, no unions, no varargs.
 * - Every handle has exactly one *_destroy function. Memory the library allocates for the caller
 *   (llm42_session_generate's text) is freed with llm42_free.
 * - Enums are int32_t-sized (each has a *_FORCE_INT32_ member that is never a valid value);
 *   an unknown value passed in is INVALID_ARGUMENT.
 * - Option setters check the value they set by the rules session creation and submit apply
 *   (one set, in the engine): a number outside the range its setter documents is OUT_OF_RANGE;
 *   an unknown name or enum value, text that is not UTF-8, or a NULL handle or pointer is
 *   INVALID_ARGUMENT. A refused value leaves the handle as it was.
 * - Caller buffers are (buf, capacity, size_t* out_len): when capacity is too small the
 *   function returns LLM42_OUT_OF_RANGE and sets *out_len to the size needed. Two exceptions:
 *   the streaming reads (llm42_request_read_tokens/_text) return what fits and keep the rest for
 *   the next read, and llm42_session_verify_receipt's detail line is cut to fit.
 * - A session is fully thread-safe. A request handle may be used from any thread; concurrent
 *   calls on one request are serialized internally. Option handles are not thread-safe: build
 *   them on one thread, then pass them. No handle may be destroyed while another thread is inside
 *   a call on it (the language bindings guard against that themselves).
 * - Testing hooks (fault injection for the determinism tests) are in llm42_testing.h, not here.
 *
 * Streaming, with the end checked (a failed or cancelled request's stream ends as a finished
 * one's does; its status says how it ended):
 *
 *   char buf[256];
 *   size_t n = 0;
 *   while (llm42_request_read_text(request, buf, sizeof buf, &n, -1) == LLM42_OK && n > 0)
 *     fwrite(buf, 1, n, stdout);
 *   llm42_status how = llm42_request_status(request);
 *   if (how != LLM42_OK) fprintf(stderr, "%s: %s\n", llm42_status_name(how), llm42_last_error());
 */
#ifndef LLM42_LLM42_H_
#define LLM42_LLM42_H_

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#if defined(LLM42_BUILDING_DLL)
#define LLM42_API __declspec(dllexport)
#else
#define LLM42_API /* functions need no dllimport: the import library's thunks resolve them */
#endif
#elif defined(__GNUC__)
#define LLM42_API __attribute__((visibility("default")))
#else
#define LLM42_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- Version ------------------------------------------------------------------------------ */

/* ABI compatibility: within one major version (SONAME libllm42.so.MAJOR, symbol version node
 * LLM42_MAJOR) a library runs every program built against an older or equal minor version:
 * functions, enum values and statuses are only added, never removed or changed in meaning, and
 * no struct crosses the ABI. A program must not assume an enum value it does not know is
 * absent (statuses above all: map unknown ones to a generic error). A break bumps MAJOR, the
 * SONAME and the node. Before 1.0 the minor version is the compatibility line instead: 0.x
 * promises nothing across minors (0.2 changed llm42_session_verify_receipt's outcome to
 * llm42_receipt_outcome* and seeds to uint64_t). The bindings check this rule at load
 * (llm42_version_number). */

#define LLM42_VERSION_MAJOR 0
#define LLM42_VERSION_MINOR 2
#define LLM42_VERSION_PATCH 0
#define LLM42_VERSION_NUMBER \
  (LLM42_VERSION_MAJOR * 1000000 + LLM42_VERSION_MINOR * 1000 + LLM42_VERSION_PATCH)
#define LLM42_VERSION_STRING "0.2.0"

/* The library's version; compare with LLM42_VERSION_NUMBER to detect a header/library mismatch. */
LLM42_API int32_t llm42_version_number(void);
/* Static string, never freed. */
LLM42_API const char* llm42_version_string(void);

/* ---- Status ------------------------------------------------------------------------------- */

typedef enum llm42_status {
  LLM42_OK = 0,
  LLM42_INVALID_ARGUMENT = 1,
  LLM42_NOT_FOUND = 2,
  LLM42_IO_ERROR = 3,
  LLM42_FORMAT_ERROR = 4,       /* malformed model, config or receipt */
  LLM42_UNSUPPORTED = 5,        /* valid but not supported here */
  LLM42_RESOURCE_EXHAUSTED = 6, /* queue full, out of memory, request can never fit */
  LLM42_CANCELLED = 7,
  LLM42_TIMEOUT = 8,
  LLM42_FAILED_PRECONDITION = 9, /* wrong state, e.g. session shutting down */
  LLM42_OUT_OF_RANGE = 10,       /* buffer too small, value out of range */
  LLM42_INTERNAL = 11,
  LLM42_PENDING = 12, /* llm42_request_status only: the request has not finished yet */
  LLM42_STATUS_FORCE_INT32_ = 0x7FFFFFFF /* not a status: keeps the enum int32_t-sized */
} llm42_status;

/* "LLM42_OK", "LLM42_INVALID_ARGUMENT", ...; "LLM42_UNKNOWN_STATUS" for other values. Static. */
LLM42_API const char* llm42_status_name(llm42_status status);

/* Message of the calling thread's last failed call ("" if none). Successful calls leave it
 * alone. Valid until this thread's next failed llm42 call. */
LLM42_API const char* llm42_last_error(void);

/* ---- Logging ------------------------------------------------------------------------------ */

#define LLM42_LOG_DEBUG 0
#define LLM42_LOG_INFO 1
#define LLM42_LOG_WARNING 2
#define LLM42_LOG_ERROR 3

typedef void (*llm42_log_callback)(void* user_data, int32_t level, const char* message);
/* Routes log messages to fn (NULL restores the default: stderr). fn may be called from any
 * thread, one call at a time. Thread-safe. */
LLM42_API void llm42_set_log_callback(llm42_log_callback fn, void* user_data);
/* Messages below level are dropped. Default LLM42_LOG_WARNING. Thread-safe. */
LLM42_API void llm42_set_log_level(int32_t level);

/* ---- Determinism policy ------------------------------------------------------------------- */

typedef struct llm42_determinism llm42_determinism;
typedef enum llm42_mode {
  LLM42_MODE_SELECTIVE = 0,       /* decode fast; verify deterministic requests (default) */
  LLM42_MODE_BATCH_INVARIANT = 1, /* every pass on the fixed schedule */
  LLM42_MODE_OFF = 2,             /* deterministic requests are refused */
  LLM42_MODE_FORCE_INT32_ = 0x7FFFFFFF
} llm42_mode;

/* How LLM42_MODE_SELECTIVE decodes a deterministic request with nothing awaiting verification.
 * The output is the same on every path; only the cost differs. Under AUTO a step of
 * deterministic requests alone decodes them under the fixed schedule, and beside plain requests
 * the step may run the plain requests' decode rows under the fixed schedule too, where that is
 * measured cheaper (their output carries no guarantee either way). */
typedef enum llm42_decode_path {
  LLM42_DECODE_PATH_AUTO = 0,   /* per step, the cheaper path by measured step costs (default) */
  LLM42_DECODE_PATH_VERIFY = 1, /* decode fast, verify every window (decode-verify-rollback) */
  LLM42_DECODE_PATH_FIXED = 2,  /* decode under the fixed schedule; nothing to verify */
  LLM42_DECODE_PATH_FORCE_INT32_ = 0x7FFFFFFF
} llm42_decode_path;

/* INVALID_ARGUMENT for an unknown mode. */
LLM42_API llm42_status llm42_determinism_create(llm42_mode mode, llm42_determinism** out);
LLM42_API void llm42_determinism_destroy(llm42_determinism* policy);
/* Candidates decoded before a verify pass; 1..4096, default 64. */
LLM42_API llm42_status llm42_determinism_set_window(llm42_determinism* policy, int32_t tokens);
/* Requests verified together; 1..1024, default 8. */
LLM42_API llm42_status llm42_determinism_set_verify_group(llm42_determinism* policy,
                                                          int32_t requests);
/* Seed of deterministic requests that set none; default 42. */
LLM42_API llm42_status llm42_determinism_set_default_seed(llm42_determinism* policy,
                                                          uint64_t seed);
/* INVALID_ARGUMENT for an unknown path. */
LLM42_API llm42_status llm42_determinism_set_decode_path(llm42_determinism* policy,
                                                         llm42_decode_path path);

/* ---- Statistics --------------------------------------------------------------------------- */

typedef enum llm42_stat {
  LLM42_STAT_REQUESTS_FINISHED = 0,
  LLM42_STAT_TOKENS_GENERATED = 1, /* committed */
  LLM42_STAT_TOKENS_VERIFIED = 2,
  LLM42_STAT_VERIFY_PASSES = 3,
  LLM42_STAT_ROLLBACKS = 4,
  LLM42_STAT_TOKENS_ROLLED_BACK = 5,
  LLM42_STAT_PREFILL_TOKENS = 6,
  LLM42_STAT_DECODE_STEPS = 7,
  LLM42_STAT_TIME_TO_FIRST_TOKEN_US = 8, /* request only */
  LLM42_STAT_PREEMPTIONS = 9,
  /* a deterministic request's tokens decoded under fixed and committed without verification
   * (see llm42_determinism_set_decode_path), the token a verify pass decodes after a window
   * that agreed included (session only for those) */
  LLM42_STAT_TOKENS_DECODED_FIXED = 10,
  /* prompt tokens whose K/V came from the prefix cache instead of a prefill (see
   * llm42_session_options_set_prefix_caching) */
  LLM42_STAT_CACHED_PROMPT_TOKENS = 11,
  /* session only: cached KV blocks evicted to make room */
  LLM42_STAT_KV_EVICTIONS = 12,
  /* session only: KV blocks released behind sliding windows while their sequences ran (models
   * whose every layer attends to a window of recent positions: Phi-3 files that set one) */
  LLM42_STAT_KV_WINDOW_RELEASES = 13,
  LLM42_STAT_DRAFT_TOKENS = 14,          /* candidates drafted (set_draft) rather than decoded */
  LLM42_STAT_DRAFT_TOKENS_ACCEPTED = 15, /* of them, those the fixed replay agreed with */
  LLM42_STAT_FORCE_INT32_ = 0x7FFFFFFF
} llm42_stat;

/* ---- Session ------------------------------------------------------------------------------ */

typedef struct llm42_session_options llm42_session_options;
typedef struct llm42_session llm42_session;

LLM42_API llm42_status llm42_session_options_create(llm42_session_options** out);
LLM42_API void llm42_session_options_destroy(llm42_session_options* options);
/* A chat template (Jinja source, copied) that replaces the model's for the session: what
 * apply_chat_template renders with, the syntax parse_chat_output reads and set_tools writes calls
 * in (as llama.cpp's --chat-template-file and vLLM's --chat-template). NULL or "": the model's.
 * A template that does not parse fails llm42_session_create with INVALID_ARGUMENT (its line and
 * column). */
LLM42_API llm42_status llm42_session_options_set_chat_template(llm42_session_options* options, const char* jinja);
/* Path of a GGUF model file (copied). Required. */
LLM42_API llm42_status llm42_session_options_set_model_path(llm42_session_options* options,
                                                            const char* path);
/* "auto" (default), "cpu" or "cuda". UNSUPPORTED at session creation when the backend is not
 * built into this library. */
LLM42_API llm42_status llm42_session_options_set_backend(llm42_session_options* options,
                                                         const char* name);
/* Worker threads for the forward pass; 0 (default) = all cores. */
LLM42_API llm42_status llm42_session_options_set_threads(llm42_session_options* options,
                                                         int32_t n);
/* Upper bound of tokens in one forward pass (prefill chunk size); default 512. */
LLM42_API llm42_status llm42_session_options_set_max_batch_tokens(llm42_session_options* options,
                                                                  int32_t n);
/* Requests decoded concurrently; default 16. */
LLM42_API llm42_status llm42_session_options_set_max_running_requests(
    llm42_session_options* options, int32_t n);
/* Tokens of KV cache across all running requests; 0 (default) = sized from the context length
 * and the running-request limit. */
LLM42_API llm42_status llm42_session_options_set_kv_cache_tokens(llm42_session_options* options,
                                                                 int64_t n);
/* Element type of the KV cache: "auto" (default: the backend's, f32 on the CPU and bf16 on CUDA),
 * "f32", "f16" or "bf16". A 16-bit cache holds twice the tokens in the same memory and halves
 * what attention reads; keys and values are rounded to it when stored (deterministic requests
 * stay bitwise reproducible for a given setting, not across settings). INVALID_ARGUMENT for
 * another name; UNSUPPORTED at session creation where the backend cannot store it. */
LLM42_API llm42_status llm42_session_options_set_kv_dtype(llm42_session_options* options,
                                                          const char* dtype);
/* Prefix caching (default on): full KV blocks stay cached after their request, and a prompt that
 * starts with the same tokens (a chat's history, a shared system prompt) maps them instead of
 * prefilling them again. Deterministic requests reuse only K/V computed under the fixed
 * schedule, so their output is bitwise the same with the cache as without it. Cached blocks
 * occupy otherwise free KV blocks and are evicted, least recently used, when room is needed:
 * the cache's limit is the KV cache size (llm42_session_options_set_kv_cache_tokens). */
LLM42_API llm42_status llm42_session_options_set_prefix_caching(llm42_session_options* options,
                                                                int32_t enable);
/* Nonzero: make every page of the KV cache resident when the session is created (default 0:
 * pages are mapped as serving first stores into them). The operating system's zeroing of fresh
 * pages then never lands in a generation step (on the CPU 2-6 % of a 16-sequence run, and a
 * latency spike wherever a request first reaches new blocks), at the cost of startup time and of
 * the whole cache's memory from the start: llama.cpp's behaviour, which clears its KV buffer when
 * it makes a context. Output does not change. */
LLM42_API llm42_status llm42_session_options_set_kv_prefault(llm42_session_options* options,
                                                             int32_t enable);
/* Per-request context length; 0 (default) = the model's. Larger than the model's is
 * OUT_OF_RANGE at session creation. */
LLM42_API llm42_status llm42_session_options_set_context_length(llm42_session_options* options,
                                                                int32_t n);
/* Nonzero: open only the model's vocabulary (a vocabulary-only GGUF is enough) for
 * tokenize/detokenize; no weights are loaded and submitting a request is FAILED_PRECONDITION.
 * Without it, a file that has no weights is FORMAT_ERROR naming this option. */
LLM42_API llm42_status llm42_session_options_set_vocab_only(llm42_session_options* options,
                                                            int32_t on);
/* Copies the policy. Default: LLM42_MODE_SELECTIVE with default knobs. */
LLM42_API llm42_status llm42_session_options_set_determinism(llm42_session_options* options,
                                                             const llm42_determinism* policy);
/* Reads a text-format llm42.SessionConfig protobuf (see proto/session_config.proto) and applies
 * every field it sets. NOT_FOUND / IO_ERROR when unreadable, FORMAT_ERROR when malformed. */
LLM42_API llm42_status llm42_session_options_load_config(llm42_session_options* options,
                                                         const char* textproto_path);

/* Loads the model and starts the engine thread. NOT_FOUND / IO_ERROR for the file,
 * FORMAT_ERROR for a malformed model, UNSUPPORTED for an architecture, dtype or backend this
 * build does not run. */
LLM42_API llm42_status llm42_session_create(const llm42_session_options* options,
                                            llm42_session** out);
/* Loading without blocking: starts creating a session on a thread of llm42's own and returns at
 * once (the options are copied). Poll llm42_session_loader_progress from a frame loop or event
 * loop, or wait; take the session once the load has ended. No llm42 thread calls the host, so
 * this suits runtimes that forbid foreign threads (Unity's IL2CPP). */
typedef struct llm42_session_loader llm42_session_loader;
LLM42_API llm42_status llm42_session_create_async(const llm42_session_options* options,
                                                  llm42_session_loader** out);
/* How far the load has got, 0..1 (mostly the weights' upload, layer by layer); 1 once it has
 * ended, well or not. -1 for NULL. */
LLM42_API float llm42_session_loader_progress(const llm42_session_loader* loader);
/* Waits up to timeout_ms (0 = don't wait, -1 = forever): OK once the load has ended, else
 * TIMEOUT. */
LLM42_API llm42_status llm42_session_loader_wait(llm42_session_loader* loader, int32_t timeout_ms);
/* Asks the load to stop: it ends CANCELLED at its next stage (within one layer's upload). Any
 * thread, idempotent; no effect once it has ended. */
LLM42_API llm42_status llm42_session_loader_cancel(llm42_session_loader* loader);
/* Once the load has ended: OK with the session (the caller's, as from llm42_session_create), or
 * the status the creation failed with (CANCELLED after a cancel) and *out = NULL.
 * FAILED_PRECONDITION while it runs or once the session was taken. */
LLM42_API llm42_status llm42_session_loader_take(llm42_session_loader* loader, llm42_session** out);
/* Cancels a load still running, waits for it to stop, and frees the loader with any session not
 * taken. */
LLM42_API void llm42_session_loader_destroy(llm42_session_loader* loader);

/* Cancels outstanding requests and joins the engine thread. Request handles stay valid
 * (finished, CANCELLED) until destroyed. Must not be called from a token callback. */
LLM42_API void llm42_session_destroy(llm42_session* session);

/* Tokenizes UTF-8 text (INVALID_ARGUMENT if it is not valid UTF-8). add_special=1 adds BOS
 * when the model asks for it. Special tokens written in the text (e.g. "<s>") are recognised. */
LLM42_API llm42_status llm42_session_tokenize(llm42_session* session, const char* text,
                                              size_t text_len, int32_t add_special,
                                              int32_t* tokens, size_t capacity,
                                              size_t* n_tokens);
/* Decodes tokens to UTF-8 text (control tokens render as nothing; bytes that do not form valid
 * UTF-8 become U+FFFD). INVALID_ARGUMENT for an id outside the vocabulary. */
LLM42_API llm42_status llm42_session_detokenize(llm42_session* session, const int32_t* tokens,
                                                size_t n_tokens, char* buf, size_t capacity,
                                                size_t* n_bytes);
/* Tokens in the model's vocabulary; -1 for a NULL session. */
LLM42_API int32_t llm42_session_vocab_size(const llm42_session* session);
/* The model's end-of-sequence token; -1 when it has none, or for a NULL session. */
LLM42_API int32_t llm42_session_eos_token(const llm42_session* session);
/* The model's fingerprint: SHA-256 (64 hex digits, no terminating NUL) over every metadata entry
 * and every tensor's name, type, shape and bytes. Computed on the first call (one read of the
 * weights) and kept. OUT_OF_RANGE with *n_bytes = 64 when the buffer is smaller. */
LLM42_API llm42_status llm42_session_fingerprint(llm42_session* session, char* buf,
                                                 size_t capacity, size_t* n_bytes);
/* Renders a conversation with the model's own chat template, as Hugging Face transformers'
 * apply_chat_template would (a Jinja renderer in the library; no Python). messages_json: a JSON
 * array of OpenAI chat messages (role system, user, assistant or tool; content a string, an array
 * of {"type": "text", "text": ...} parts, or null; assistant "tool_calls"; tool "tool_call_id"),
 * given to the template as they are. options_json (NULL: none): a JSON object of "tools" (OpenAI
 * tool objects; the template sees None without them), "add_generation_prompt" (default true),
 * "template" (Jinja source used instead of the model's) and "kwargs" (more template variables,
 * such as "enable_thinking"; they may override bos_token and eos_token, which default to the
 * vocabulary's). The text goes to out as the header's other buffers (no terminating NUL).
 * INVALID_ARGUMENT for malformed JSON (its byte offset named), messages or options, a template
 * that does not parse (line and column named) or what it raises (raise_exception's message);
 * FAILED_PRECONDITION when the model has no template and options gives none (a model without one
 * still renders plain role/content string messages in its built-in format); RESOURCE_EXHAUSTED
 * when a template runs past the renderer's bounds (steps, nesting, output, time). Thread-safe. */
LLM42_API llm42_status llm42_session_apply_chat_template(llm42_session* session, const char* messages_json,
                                                        const char* options_json, char* out, size_t capacity,
                                                        size_t* out_len);
/* Splits an assistant reply the model generated (text, n_bytes of UTF-8, after the generation
 * prompt) by the syntax its chat template writes tool calls and reasoning in (Hermes / Qwen /
 * Granite <tool_call> JSON, Qwen3.5 and Qwen3-Coder XML, GLM, Mistral, Llama 3.x JSON, Gemma 4,
 * DeepSeek R1 and V3.1, gpt-oss harmony; recognised from the template; plain text with <think>
 * reasoning otherwise) into JSON: {"content": "...", "reasoning_content": "..." or null,
 * "tool_calls": [{"name": "...", "arguments": {...}, "id": "..." where the syntax has one}]},
 * written to out as the header's other buffers. INVALID_ARGUMENT naming the call for a tool call
 * that does not parse (a reply cut inside one). Thread-safe. */
LLM42_API llm42_status llm42_session_parse_chat_output(llm42_session* session, const char* text, size_t n_bytes,
                                                      char* out, size_t capacity, size_t* out_len);
/* Session-wide counter; INVALID_ARGUMENT for LLM42_STAT_TIME_TO_FIRST_TOKEN_US. */
LLM42_API llm42_status llm42_session_stat(llm42_session* session, llm42_stat which,
                                          int64_t* value);
/* Every session counter as one JSON object, with where the steps' time went (totals in
 * microseconds: step_forward_us, the forward passes until the device finished them;
 * step_logits_us, copying their logits to the host; step_host_us, the rest of each step). */
LLM42_API llm42_status llm42_session_stats_json(llm42_session* session, char* buf,
                                                size_t capacity, size_t* n_bytes);

/* ---- Requests ----------------------------------------------------------------------------- */

typedef struct llm42_request_options llm42_request_options;
typedef struct llm42_request llm42_request;
/* Saves the conversation that `finished` (a finished request of this session) holds — its tokens,
 * its chat messages, and the K/V of the full 16-token blocks the prefix cache still has for it —
 * to the file `path`, with the model's identity, the backend, the KV type and the fixed-schedule
 * version. Continue it later, in this session or another process, with
 * llm42_request_options_load_parent. FAILED_PRECONDITION when the request has not finished,
 * INVALID_ARGUMENT when it belongs to another session, IO_ERROR when the file cannot be written. */
LLM42_API llm42_status llm42_session_save_conversation(llm42_session* session, llm42_request* finished,
                                                       const char* path);

/* Called on an engine thread with newly committed tokens and the text they complete (text may
 * be empty while a UTF-8 character or a possible stop string is pending). finished=1 on the
 * last call. Borrowed pointers, valid during the call. Must not block; may call
 * llm42_request_cancel; must not destroy the request or the session. */
typedef void (*llm42_token_callback)(void* user_data, llm42_request* request,
                                     const int32_t* tokens, size_t n_tokens, const char* text,
                                     size_t text_len, int32_t finished);

LLM42_API llm42_status llm42_request_options_create(llm42_request_options** out);
LLM42_API void llm42_request_options_destroy(llm42_request_options* options);
/* Prompt text (copied); INVALID_ARGUMENT unless valid UTF-8. BOS is added when the model asks
 * for it. Replaces any prompt tokens. */
LLM42_API llm42_status llm42_request_options_set_prompt(llm42_request_options* options,
                                                        const char* text, size_t len);
/* Prompt token ids (copied), used as given. Replaces any prompt text. Ids are checked against
 * the vocabulary at submit. */
LLM42_API llm42_status llm42_request_options_set_prompt_tokens(llm42_request_options* options,
                                                               const int32_t* tokens, size_t n);
/* Appends a chat message (role "system", "user" or "assistant"; copied). At submit the
 * conversation is rendered in the model's chat format, chosen from its chat template (GGUF
 * tokenizer.chat_template or tokenizer_config.json): Llama 3 / 3.1 / 3.2, ChatML (Qwen), Llama 2
 * [INST] <<SYS>>, Mistral [INST]; the assistant's header is appended so generation answers as
 * the assistant. Submit returns UNSUPPORTED for a model whose format llm42 does not render,
 * INVALID_ARGUMENT for other roles or a request that also has a prompt. */
LLM42_API llm42_status llm42_request_options_add_message(llm42_request_options* options,
                                                         const char* role, const char* content);
/* Continues `parent`, a finished request of the same session (a conversation's next turn): this
 * request's tokens are the parent's whole sequence — its prompt, then its output — followed by
 * this request's prompt text (tokenized without BOS) or prompt tokens; with chat messages, the
 * parent (which must have been a chat request) contributes its messages and its reply, and the
 * whole conversation is rendered again. With prefix caching (on by default) the history's K/V
 * are mapped from the cache, not prefilled again, and a deterministic continuation gives the same
 * bits as one submitted with the whole history as its prompt. The parent's content is copied
 * now: it may be destroyed afterwards. FAILED_PRECONDITION when the parent has not finished;
 * NULL clears. Submit returns INVALID_ARGUMENT for a parent of another session. */
LLM42_API llm42_status llm42_request_options_set_parent(llm42_request_options* options,
                                                        llm42_request* parent);
/* Continues the conversation saved in `path` (llm42_session_save_conversation) as
 * llm42_request_options_set_parent continues a request: its K/V go into `session`'s prefix cache
 * now, and a deterministic continuation gives the bits it would have given in the session that
 * saved it. NOT_FOUND for a missing file; FORMAT_ERROR for a damaged one (truncated, altered);
 * FAILED_PRECONDITION for one saved with another model (its tensors, or any metadata value that
 * can change what it computes: the message names the key), backend, KV type or fixed-schedule
 * version, or in format 1 (an earlier llm42's, which did not identify the model's metadata);
 * RESOURCE_EXHAUSTED when the KV cache cannot hold it. Submit the options to the same
 * session. */
LLM42_API llm42_status llm42_request_options_load_parent(llm42_request_options* options,
                                                         llm42_session* session, const char* path);
/* Tokens to generate, >= 1; default 256. Generation also stops when the context is full. */
LLM42_API llm42_status llm42_request_options_set_max_tokens(llm42_request_options* options,
                                                            int32_t n);
/* 0..100; 0 = greedy (argmax, ties to the lowest id); default 0. */
LLM42_API llm42_status llm42_request_options_set_temperature(llm42_request_options* options,
                                                             float t);
/* >= 0; 0 = off (default). */
LLM42_API llm42_status llm42_request_options_set_top_k(llm42_request_options* options, int32_t k);
/* In (0, 1]; 1 = off (default). */
LLM42_API llm42_status llm42_request_options_set_top_p(llm42_request_options* options, float p);
/* In [0, 1); 0 = off (default). */
LLM42_API llm42_status llm42_request_options_set_min_p(llm42_request_options* options, float p);
/* Logit bias, penalties and output grammars change the logits before temperature, top-k, top-p
 * and min-p, in this order: logit bias; penalties; the grammar's mask. All are pure functions of
 * the logits and the tokens before the position, so a deterministic request's fast-path draw and
 * its fixed-schedule replay apply them alike, and its output stays bitwise reproducible. Logprobs
 * (and top logprobs) are those of the changed logits at temperature 1; a token the grammar or a
 * -INFINITY bias excludes has logprob -INFINITY. */
/* Adds `bias` to token `token`'s logit (calling it again for a token replaces its bias; 0 removes
 * nothing but is harmless); -INFINITY bans the token. OUT_OF_RANGE for NaN, +INFINITY or a finite
 * bias of size above 1e30; a token outside the model's vocabulary is OUT_OF_RANGE at submit.
 * Biases that ban every token the request could draw first are FAILED_PRECONDITION at submit;
 * where they (with the grammar) leave nothing to draw later, the request ends with
 * LLM42_FINISH_ERROR (FAILED_PRECONDITION, saying what emptied it) after the tokens before. */
LLM42_API llm42_status llm42_request_options_set_logit_bias(llm42_request_options* options, int32_t token,
                                                           float bias);
/* llama.cpp's repetition penalty over the last `last_n` tokens of the sequence, the prompt's
 * included (0: the whole sequence; default 64, llama.cpp's): a token found there has its logit
 * divided by `penalty` when positive and multiplied by it otherwise. `penalty` in (0, 100]; 1 = off
 * (default). `last_n` is also the window the frequency and presence penalties count in.
 * OUT_OF_RANGE for NaN, values outside those ranges, or a negative last_n. */
LLM42_API llm42_status llm42_request_options_set_repetition_penalty(llm42_request_options* options,
                                                                   float penalty, int32_t last_n);
/* Subtracts penalty * (times the token occurs in the window) from its logit, after the repetition
 * penalty (OpenAI's and llama.cpp's frequency penalty). In [-100, 100]; 0 = off (default). */
LLM42_API llm42_status llm42_request_options_set_frequency_penalty(llm42_request_options* options,
                                                                  float penalty);
/* Subtracts penalty from the logit of every token that occurs in the window, after the frequency
 * penalty. In [-100, 100]; 0 = off (default). */
LLM42_API llm42_status llm42_request_options_set_presence_penalty(llm42_request_options* options,
                                                                 float penalty);
/* Constrains the output to a grammar in llama.cpp's GBNF syntax (rule `root`; literals, character
 * classes and ranges, alternation, grouping, ? * +, {m,n}, comments); copied. At each position
 * only tokens whose text continues a sentence of the grammar may be drawn; the model's
 * end-of-generation tokens only where the output is a whole sentence (and never with
 * ignore_eos); once nothing can follow, the request finishes with LLM42_FINISH_STOP. A request
 * that ends by max_tokens, the context, a stop string or cancellation may leave the sentence
 * incomplete (finish reason LENGTH, or STOP for a stop string). INVALID_ARGUMENT for a grammar
 * that does not parse (llm42_last_error gives the line and column), uses an undefined rule, is
 * left-recursive or derives no string; or when a JSON schema is set (remove it first). NULL or ""
 * removes the grammar. At submit, INVALID_ARGUMENT when no token of the model's vocabulary can
 * begin a sentence; a request whose grammar later allows no token of the vocabulary finishes with
 * LLM42_FINISH_ERROR (FAILED_PRECONDITION naming how many output tokens came before; a
 * deterministic request's are the tokens every mode commits). Surrogate code points (U+D800 to
 * U+DFFF, which UTF-8 cannot encode) in a literal or as a class's end are INVALID_ARGUMENT; a
 * class or range that spans them matches none of them. */
LLM42_API llm42_status llm42_request_options_set_grammar(llm42_request_options* options, const char* gbnf);
/* Constrains the output to JSON valid under a JSON Schema (copied), as set_grammar does with the
 * grammar the schema converts to. Supported: type (all seven, or a list), properties, required,
 * additionalProperties, items, prefixItems, minItems, maxItems, enum, const, anyOf, oneOf, $ref to
 * #/$defs or #/definitions, minLength, maxLength, minimum/maximum (and exclusive ones) for
 * integers, pattern (an ECMA-262 subset: literals, ., classes, \d \w \s and their negations,
 * groups, |, greedy ? * + {m,n}; no backreferences, lookaround or lazy quantifiers), format date,
 * time, date-time and uuid; "{}" means any JSON value. Properties come in the schema's order;
 * an object schema with properties gets no others unless additionalProperties allows them.
 * INVALID_ARGUMENT for malformed JSON, an unsupported keyword (named, never ignored) or value
 * (llm42_last_error gives its JSON pointer), or when a GBNF grammar is set. NULL or "" removes
 * the schema. */
LLM42_API llm42_status llm42_request_options_set_json_schema(llm42_request_options* options, const char* schema);
/* Lets the request call tools: constrains its output to the grammar of a reply that calls the
 * tools of tools_json (an array of OpenAI tool objects, {"type": "function", "function": {"name",
 * "description", "parameters": a JSON Schema as set_json_schema takes}}) in the syntax the
 * session's model's chat template writes calls in, each call's arguments valid under its tool's
 * schema. tool_choice (NULL: "auto"): "auto" (free text until the syntax's opening of a call,
 * then calls; as llama.cpp's lazy tool-call grammars), "required" (one call or more from the
 * start), a tool's name or {"type": "function", "function": {"name": ...}} (calls of that tool),
 * "none" (no constraint: removes a tool grammar set before). parallel_calls: nonzero lets a reply
 * hold several calls (OpenAI's parallel_tool_calls, its default), 0 one call, with which the reply
 * ends. Syntaxes generated: Hermes / Qwen 2.5
 * and 3 / Granite <tool_call> JSON, Qwen3.5 / Qwen3-Coder <function=...> XML (plain string
 * values raw, without '<'), Mistral [TOOL_CALLS] JSON array, Llama 3.x JSON, gpt-oss's harmony
 * (one call a reply, the recipient in the role's header);
 * llm42_session_parse_chat_output reads the calls back. The grammar is the options' GBNF grammar
 * (a deterministic request's receipt carries it), replacing a GBNF grammar set before.
 * INVALID_ARGUMENT for tools or a choice that do not parse, a schema the grammar engine refuses
 * (naming the tool), a choice that names no tool, or options that have a JSON schema; UNSUPPORTED for a model whose template
 * writes no tool calls, or writes them in a syntax not generated yet (named). The tools are
 * rendered into the prompt by llm42_session_apply_chat_template, not here. */
LLM42_API llm42_status llm42_request_options_set_tools(llm42_request_options* options, llm42_session* session,
                                                      const char* tools_json, const char* tool_choice,
                                                      int32_t parallel_calls);
/* Sampling seed. Without one a request draws a random seed (deterministic requests use the
 * policy's default seed); llm42_request_effective_seed reports it. */
LLM42_API llm42_status llm42_request_options_set_seed(llm42_request_options* options,
                                                      uint64_t seed);
/* Ask for bitwise-reproducible output: in mode SELECTIVE the request decodes on the fast path
 * and only tokens verified against the fixed schedule are committed and streamed; in mode
 * BATCH_INVARIANT every request already is; in mode OFF submit returns LLM42_UNSUPPORTED.
 * Without a seed, the policy's default seed is used. */
LLM42_API llm42_status llm42_request_options_set_deterministic(llm42_request_options* options,
                                                               int32_t on);
/* Where a deterministic request's candidates come from besides its fast-path decode (issue 59's
 * draft sources): "ngram" drafts a window of them from the request's own prompt and output
 * (prompt lookup: what followed the latest earlier occurrence of its last 4, 3, 2 or 1 tokens), each
 * verified under the fixed schedule like any candidate, so the output is bitwise the same as
 * without; where the drafts agree, a verify pass commits several tokens at once (counted by
 * LLM42_STAT_DRAFT_TOKENS and _ACCEPTED). "none" (default): decoded candidates only. Plain requests
 * ignore it. INVALID_ARGUMENT for another name; UNSUPPORTED for "model" and "mtp" (not yet). */
LLM42_API llm42_status llm42_request_options_set_draft(llm42_request_options* options, const char* source);
/* Adds a stop string (copied, non-empty valid UTF-8; at most 16). Generation ends when the
 * output contains it; the output text ends before it. */
LLM42_API llm42_status llm42_request_options_add_stop(llm42_request_options* options,
                                                      const char* text);
LLM42_API llm42_status llm42_request_options_set_ignore_eos(llm42_request_options* options,
                                                            int32_t on);
/* For chat requests: 0 renders the model's chat template with thinking off (Qwen3's
 * enable_thinking=false: the reply starts after an empty <think></think> block); 1, the default,
 * as the template renders by default. Formats without reasoning ignore it. */
LLM42_API llm42_status llm42_request_options_set_thinking(llm42_request_options* options, int32_t on);
/* Record the natural-log probability of each committed token. */
LLM42_API llm42_status llm42_request_options_set_logprobs(llm42_request_options* options,
                                                          int32_t on);
/* Also record the n most likely tokens and their logprobs at every output position (0 = none,
 * the default; OUT_OF_RANGE outside 0..20). A deterministic request's come from the fixed
 * schedule, like its logprobs, so they are the same bits whatever runs beside it. */
LLM42_API llm42_status llm42_request_options_set_top_logprobs(llm42_request_options* options,
                                                              int32_t n);
/* Also score the prompt (llm42_request_prompt_logprobs): the logprob of each prompt token after
 * the ones before it, under the fixed schedule for a deterministic request, so that rescoring a
 * generated text (its prompt and output as the new prompt) gives bitwise the logprobs the
 * generation reported. Such a request takes no K/V from the prefix cache. */
LLM42_API llm42_status llm42_request_options_set_prompt_logprobs(llm42_request_options* options,
                                                                 int32_t on);
/* fn may be NULL to remove it. */
LLM42_API llm42_status llm42_request_options_set_callback(llm42_request_options* options,
                                                          llm42_token_callback fn,
                                                          void* user_data);

/* Queues a request. INVALID_ARGUMENT for no prompt or a token id outside the vocabulary,
 * OUT_OF_RANGE for a prompt that leaves no room in the context, UNSUPPORTED for a feature this
 * session cannot serve, FAILED_PRECONDITION when the session is shutting down or
 * tokenizer-only. The returned handle is owned by the caller (llm42_request_destroy) and may
 * outlive the session. */
LLM42_API llm42_status llm42_request_submit(llm42_session* session,
                                            const llm42_request_options* options,
                                            llm42_request** out);
/* Tokens committed since the previous read_tokens, at most capacity (the rest stay for the next
 * read). Waits up to timeout_ms (0 = don't wait, -1 = forever) for at least one. Returns OK with
 * *n_tokens = 0 at once when the request finished and everything was read; TIMEOUT when the
 * wait ended with nothing new. */
LLM42_API llm42_status llm42_request_read_tokens(llm42_request* request, int32_t* tokens,
                                                 size_t capacity, size_t* n_tokens,
                                                 int32_t timeout_ms);
/* Same for text: never splits a UTF-8 character and never returns text a stop string might
 * still swallow. OUT_OF_RANGE (with *n_bytes = bytes pending) when capacity cannot hold the
 * next character. */
LLM42_API llm42_status llm42_request_read_text(llm42_request* request, char* buf,
                                               size_t capacity, size_t* n_bytes,
                                               int32_t timeout_ms);
/* OK when finished, TIMEOUT otherwise. */
LLM42_API llm42_status llm42_request_wait(llm42_request* request, int32_t timeout_ms);
/* Any thread, idempotent; the request finishes with LLM42_CANCELLED unless it already ended. */
LLM42_API llm42_status llm42_request_cancel(llm42_request* request);
/* 1 once the request has finished, else 0; -1 for NULL. */
LLM42_API int32_t llm42_request_is_finished(const llm42_request* request);
/* How the request ended: LLM42_PENDING while it runs, then OK, CANCELLED or the error that ended
 * it; for CANCELLED and errors llm42_last_error() then holds the request's message. Call it after
 * the last read of a stream: the reads end a failed request's stream as they end a successful
 * one's. INVALID_ARGUMENT for NULL. */
LLM42_API llm42_status llm42_request_status(const llm42_request* request);

typedef enum llm42_finish_reason {
  LLM42_FINISH_NONE = 0, /* still running */
  LLM42_FINISH_STOP = 1, /* EOS or a stop string */
  LLM42_FINISH_LENGTH = 2,
  LLM42_FINISH_CANCELLED = 3,
  LLM42_FINISH_ERROR = 4,
  LLM42_FINISH_FORCE_INT32_ = 0x7FFFFFFF
} llm42_finish_reason;
/* -1 for NULL. */
LLM42_API llm42_finish_reason llm42_request_finish_reason(const llm42_request* request);

/* Every token committed so far (the stop string's tokens included). */
LLM42_API llm42_status llm42_request_output_tokens(llm42_request* request, int32_t* tokens,
                                                   size_t capacity, size_t* n_tokens);
/* The text released so far (what read_text has returned or would return). */
LLM42_API llm42_status llm42_request_output_text(llm42_request* request, char* buf,
                                                 size_t capacity, size_t* n_bytes);
/* Logprob of every committed token (a deterministic request's come from the verifier, so they
 * equal a fixed-schedule prefill of the output); FAILED_PRECONDITION unless logprobs were
 * requested. */
LLM42_API llm42_status llm42_request_logprobs(llm42_request* request, float* values,
                                              size_t capacity, size_t* n);
/* The top-N of every committed token, N per token in order, most likely first (logit descending,
 * lower id first on ties): tokens[i] and logprobs[i] for i < *n = committed tokens * N; either
 * array may be NULL. The entry for the token that was chosen has exactly its
 * llm42_request_logprobs value. FAILED_PRECONDITION unless top logprobs were requested;
 * OUT_OF_RANGE with *n = the count when capacity is smaller. */
LLM42_API llm42_status llm42_request_top_logprobs(llm42_request* request, int32_t* tokens,
                                                  float* logprobs, size_t capacity, size_t* n);
/* The prompt's scores: values[i] is the logprob of prompt token i + 1 after tokens 0..i (a
 * parent's and a rendered chat's tokens included), prompt length - 1 values once the prompt has
 * been computed (fewer while it is). FAILED_PRECONDITION unless prompt logprobs were requested. */
LLM42_API llm42_status llm42_request_prompt_logprobs(llm42_request* request, float* values,
                                                     size_t capacity, size_t* n);
/* Per-request counter (TOKENS_GENERATED, PREFILL_TOKENS, DECODE_STEPS,
 * TIME_TO_FIRST_TOKEN_US, ...). */
LLM42_API llm42_status llm42_request_stat(llm42_request* request, llm42_stat which,
                                          int64_t* value);
/* The seed the sampler uses (set, the policy's default or drawn): any of the 2^64 values. */
LLM42_API llm42_status llm42_request_effective_seed(const llm42_request* request, uint64_t* seed);
/* Serialized llm42.Receipt protobuf (proto/receipt.proto; docs/receipts.md) of a finished
 * deterministic request, or of any request of a LLM42_MODE_BATCH_INVARIANT session: model and
 * schedule fingerprints, prompt tokens, sampling with the effective seed, output tokens, their
 * logprobs when requested, the finish reason and a SHA-256 digest over all of it.
 * FAILED_PRECONDITION for a request that is running, not deterministic, cancelled or failed;
 * OUT_OF_RANGE with *n_bytes = the size when the buffer is smaller. */
LLM42_API llm42_status llm42_request_receipt(llm42_request* request, void* buf, size_t capacity,
                                             size_t* n_bytes);
/* Cancels if still running, then frees the handle (and stops its reports to every watcher).
 * Must not be called from its own callback. */
LLM42_API void llm42_request_destroy(llm42_request* request);

/* ---- Waiting on many requests from one thread ----------------------------------------------
 * A watcher lets one thread serve any number of streams (an event loop, the bindings' async
 * dispatchers): add each request under a tag of your choosing; llm42_watcher_wait returns the
 * tags of the requests with news (newly committed tokens or text, or the end), each once
 * however many commits it had, oldest news first; then read each one with timeout 0 until it
 * has nothing more. A commit after that read is reported again, so nothing is missed. A
 * watcher never calls you: no llm42 thread enters your code. Any thread may use a watcher;
 * destroy it only when no other call is using it. */
typedef struct llm42_watcher llm42_watcher;
LLM42_API llm42_status llm42_watcher_create(llm42_watcher** out);
/* Requests still added stop reporting to it; they are not cancelled. */
LLM42_API void llm42_watcher_destroy(llm42_watcher* watcher);
/* Reports the request's news under `tag` from now on (adding it again replaces the tag), and at
 * once when it already has unread output or has ended. A request may be added to several
 * watchers. */
LLM42_API llm42_status llm42_watcher_add(llm42_watcher* watcher, llm42_request* request, uint64_t tag);
/* Stops the request's reports. A report already queued, or being made as this returns (a commit
 * on the engine's thread), can still come: ignore tags you no longer watch. OK when it was not
 * added. */
LLM42_API llm42_status llm42_watcher_remove(llm42_watcher* watcher, llm42_request* request);
/* Waits up to timeout_ms (0 = don't wait, -1 = forever) for news, then writes up to capacity
 * tags (the rest stay for the next call) and *n_tags. OK with *n_tags possibly 0 after
 * llm42_watcher_wake; TIMEOUT when the wait ended with no news. */
LLM42_API llm42_status llm42_watcher_wait(llm42_watcher* watcher, uint64_t* tags, size_t capacity,
                                          size_t* n_tags, int32_t timeout_ms);
/* Ends the wait in progress, or the next one, at once (to add requests or shut down). */
LLM42_API llm42_status llm42_watcher_wake(llm42_watcher* watcher);

/* What llm42_session_verify_receipt found. */
typedef enum llm42_receipt_outcome {
  LLM42_RECEIPT_REPRODUCED = 0,     /* the same tokens, logprob bits and end */
  LLM42_RECEIPT_OTHER_MODEL = 1,    /* made with another model file (the fingerprints differ) */
  LLM42_RECEIPT_OTHER_SCHEDULE = 2, /* another fixed-schedule version, backend, device or KV type */
  LLM42_RECEIPT_OTHER_OUTPUT = 3,   /* the same setup gave other output: see first_difference */
  LLM42_RECEIPT_OUTCOME_FORCE_INT32_ = 0x7FFFFFFF
} llm42_receipt_outcome;

/* Checks a receipt (binary or text form) against this session's model and schedule and, when
 * they match, replays its request here and compares the output bit for bit. LLM42_OK with
 * *outcome set; *first_difference (optional) is the first differing output position for
 * LLM42_RECEIPT_OTHER_OUTPUT, else -1; `detail` (optional: NULL with capacity 0) receives one line
 * saying what differs, "" for REPRODUCED, cut at a character boundary to fit capacity - 1 bytes
 * and NUL-terminated, with *detail_len (optional) the whole line's length. FORMAT_ERROR for bytes
 * that are not an intact receipt (a digest that does not match is one); OUT_OF_RANGE when the
 * receipt's sequence (prompt and output) does not fit this session's context length or KV cache:
 * the replay runs under the limit the receipt records (the smaller of the original session's
 * context length and KV capacity), and needs at least as many positions here. The replay runs
 * beside whatever else the session serves. */
LLM42_API llm42_status llm42_session_verify_receipt(llm42_session* session, const void* receipt,
                                                    size_t n_bytes, llm42_receipt_outcome* outcome,
                                                    int64_t* first_difference, char* detail,
                                                    size_t detail_capacity, size_t* detail_len);

/* ---- One call ----------------------------------------------------------------------------- */

/* Submits `options` (as llm42_request_submit), waits for the request to finish and returns its
 * whole output text in *text (NUL-terminated, *text_len bytes without the NUL; free it with
 * llm42_free). Returns the request's status: OK, or what submit refused, or the error or
 * CANCELLED that ended the request; on a failure after submit, *text still receives the text
 * generated before it (the caller frees it), so nothing committed is lost. The options' token
 * callback, if any, is called as for a submitted request. */
LLM42_API llm42_status llm42_session_generate(llm42_session* session, const llm42_request_options* options,
                                              char** text, size_t* text_len);
/* Frees memory llm42 allocated for the caller (llm42_session_generate's text). NULL is a no-op. */
LLM42_API void llm42_free(void* memory);

#ifdef __cplusplus
}
#endif

#endif /* LLM42_LLM42_H_ */
