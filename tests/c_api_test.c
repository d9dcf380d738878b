/* The C ABI from C: llm42.h must stay valid C99, and every entry point behaves as documented.
 * Prints "N passed, N failed"; exits 0 only when nothing failed (77 = skipped: no model). */
#include <pthread.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "llm42/llm42.h"
#include "llm42/llm42_testing.h"

static int g_passed = 0, g_failed = 0;

#define EXPECT(cond)                                                  \
  do {                                                                \
    if (cond) {                                                       \
      ++g_passed;                                                     \
    } else {                                                          \
      ++g_failed;                                                     \
      fprintf(stderr, "%s:%d: EXPECT(%s) failed (last error: %s)\n", __FILE__, __LINE__, #cond, \
              llm42_last_error());                                    \
    }                                                                 \
  } while (0)

#define EXPECT_STATUS(call, want)                                                         \
  do {                                                                                    \
    llm42_status got_ = (call);                                                           \
    if (got_ == (want)) {                                                                 \
      ++g_passed;                                                                         \
    } else {                                                                              \
      ++g_failed;                                                                         \
      fprintf(stderr, "%s:%d: %s returned %s, expected %s (%s)\n", __FILE__, __LINE__, #call, \
              llm42_status_name(got_), llm42_status_name(want), llm42_last_error());     \
    }                                                                                     \
  } while (0)

static const char* g_model = NULL;

static llm42_session* OpenSessionKv(int32_t context, const char* kv_dtype) {
  llm42_session_options* so = NULL;
  llm42_session* s = NULL;
  EXPECT_STATUS(llm42_session_options_create(&so), LLM42_OK);
  EXPECT_STATUS(llm42_session_options_set_model_path(so, g_model), LLM42_OK);
  EXPECT_STATUS(llm42_session_options_set_threads(so, 2), LLM42_OK);
  EXPECT_STATUS(llm42_session_options_set_kv_dtype(so, kv_dtype), LLM42_OK);
  if (context > 0) EXPECT_STATUS(llm42_session_options_set_context_length(so, context), LLM42_OK);
  EXPECT_STATUS(llm42_session_create(so, &s), LLM42_OK);
  llm42_session_options_destroy(so);
  return s;
}

static llm42_session* OpenSession(int32_t context) { return OpenSessionKv(context, "auto"); }

static llm42_request* Submit(llm42_session* s, const char* prompt, int32_t max_tokens,
                             llm42_token_callback cb, void* user) {
  llm42_request_options* ro = NULL;
  llm42_request* r = NULL;
  EXPECT_STATUS(llm42_request_options_create(&ro), LLM42_OK);
  EXPECT_STATUS(llm42_request_options_set_prompt(ro, prompt, strlen(prompt)), LLM42_OK);
  EXPECT_STATUS(llm42_request_options_set_max_tokens(ro, max_tokens), LLM42_OK);
  EXPECT_STATUS(llm42_request_options_set_ignore_eos(ro, 1), LLM42_OK);
  EXPECT_STATUS(llm42_request_options_set_thinking(ro, 0), LLM42_OK);
  EXPECT_STATUS(llm42_request_options_set_thinking(ro, 1), LLM42_OK);
  if (cb != NULL) EXPECT_STATUS(llm42_request_options_set_callback(ro, cb, user), LLM42_OK);
  EXPECT_STATUS(llm42_request_submit(s, ro, &r), LLM42_OK);
  llm42_request_options_destroy(ro);
  return r;
}

/* llama.cpp's greedy continuation of "Once upon a time" (shared/reference). */
static const char kExpected[] =
    ", there was a little girl named Lily. She loved to play outside in the park. One day, she saw";

static void TestVersionAndStatusNames(void) {
  EXPECT(llm42_version_number() == LLM42_VERSION_NUMBER);
  EXPECT(strcmp(llm42_version_string(), LLM42_VERSION_STRING) == 0);
  EXPECT(strcmp(llm42_status_name(LLM42_OK), "LLM42_OK") == 0);
  EXPECT(strcmp(llm42_status_name(LLM42_OUT_OF_RANGE), "LLM42_OUT_OF_RANGE") == 0);
  EXPECT(strcmp(llm42_status_name((llm42_status)99), "LLM42_UNKNOWN_STATUS") == 0);
  EXPECT(LLM42_FORMAT_ERROR == 4 && LLM42_INTERNAL == 11 && LLM42_STAT_PREEMPTIONS == 9);
  EXPECT(LLM42_PENDING == 12 && strcmp(llm42_status_name(LLM42_PENDING), "LLM42_PENDING") == 0);
}

static void TestGenerateAndReadText(llm42_session* s) {
  llm42_request* r = Submit(s, "Once upon a time", 32, NULL, NULL);
  char text[1024];
  size_t len = 0;
  for (;;) {
    char buf[7];
    size_t n = 0;
    EXPECT_STATUS(llm42_request_read_text(r, buf, sizeof buf, &n, -1), LLM42_OK);
    if (n == 0) break;
    memcpy(text + len, buf, n);
    len += n;
  }
  text[len] = '\0';
  EXPECT(strcmp(text, kExpected) == 0);
  EXPECT(llm42_request_is_finished(r) == 1);
  EXPECT(llm42_request_status(r) == LLM42_OK);
  EXPECT(llm42_request_finish_reason(r) == LLM42_FINISH_LENGTH);

  int32_t tokens[64];
  size_t n_tokens = 0;
  EXPECT_STATUS(llm42_request_output_tokens(r, tokens, 4, &n_tokens), LLM42_OUT_OF_RANGE);
  EXPECT(n_tokens == 32);
  EXPECT_STATUS(llm42_request_output_tokens(r, tokens, 64, &n_tokens), LLM42_OK);
  EXPECT(n_tokens == 32 && tokens[0] == 432 && tokens[31] == 394);
  char out[256];
  size_t n_bytes = 0;
  EXPECT_STATUS(llm42_request_output_text(r, out, sizeof out, &n_bytes), LLM42_OK);
  EXPECT(n_bytes == strlen(kExpected) && memcmp(out, kExpected, n_bytes) == 0);
  int64_t value = -1;
  EXPECT_STATUS(llm42_request_stat(r, LLM42_STAT_TOKENS_GENERATED, &value), LLM42_OK);
  EXPECT(value == 32);
  EXPECT_STATUS(llm42_request_stat(r, LLM42_STAT_PREFILL_TOKENS, &value), LLM42_OK);
  EXPECT(value == 5);
  EXPECT_STATUS(llm42_request_logprobs(r, NULL, 0, &n_bytes), LLM42_FAILED_PRECONDITION);
  /* Finished and drained: reads return OK with nothing, at once, every time. */
  EXPECT_STATUS(llm42_request_read_text(r, out, sizeof out, &n_bytes, -1), LLM42_OK);
  EXPECT(n_bytes == 0);
  EXPECT_STATUS(llm42_request_read_tokens(r, tokens, 64, &n_tokens, -1), LLM42_OK);
  EXPECT(n_tokens == 32); /* tokens were never read through read_tokens */
  EXPECT_STATUS(llm42_request_read_tokens(r, tokens, 64, &n_tokens, -1), LLM42_OK);
  EXPECT(n_tokens == 0);
  llm42_request_destroy(r);
}

struct CallbackLog {
  char text[1024];
  size_t len;
  size_t tokens;
  int finished_calls;
  llm42_request* seen;
};

static void OnTokens(void* user, llm42_request* request, const int32_t* tokens, size_t n_tokens,
                     const char* text, size_t text_len, int32_t finished) {
  struct CallbackLog* log = (struct CallbackLog*)user;
  (void)tokens;
  log->seen = request;
  log->tokens += n_tokens;
  if (log->len + text_len < sizeof log->text) {
    memcpy(log->text + log->len, text, text_len);
    log->len += text_len;
  }
  if (finished) ++log->finished_calls;
}

static void TestCallback(llm42_session* s) {
  struct CallbackLog log;
  memset(&log, 0, sizeof log);
  llm42_request* r = Submit(s, "Once upon a time", 32, OnTokens, &log);
  EXPECT_STATUS(llm42_request_wait(r, -1), LLM42_OK);
  log.text[log.len] = '\0';
  EXPECT(strcmp(log.text, kExpected) == 0);
  EXPECT(log.tokens == 32);
  EXPECT(log.finished_calls == 1);
  EXPECT(log.seen == r);
  llm42_request_destroy(r);
}

/* A deterministic request of 24 sampled tokens (temperature 0.8, seed 5) with logprobs, waited
 * for: continuing `parent` or the conversation saved in `saved` (either may be NULL) with
 * `prompt` (tokenized without BOS when continuing), or with `tokens` as the prompt. */
static llm42_request* SubmitTurn(llm42_session* s, llm42_request* parent, const char* saved, const char* prompt,
                                 const int32_t* tokens, size_t n_tokens) {
  llm42_request_options* ro = NULL;
  llm42_request* r = NULL;
  EXPECT_STATUS(llm42_request_options_create(&ro), LLM42_OK);
  if (parent != NULL) EXPECT_STATUS(llm42_request_options_set_parent(ro, parent), LLM42_OK);
  if (saved != NULL) EXPECT_STATUS(llm42_request_options_load_parent(ro, s, saved), LLM42_OK);
  if (prompt != NULL) EXPECT_STATUS(llm42_request_options_set_prompt(ro, prompt, strlen(prompt)), LLM42_OK);
  if (tokens != NULL) EXPECT_STATUS(llm42_request_options_set_prompt_tokens(ro, tokens, n_tokens), LLM42_OK);
  EXPECT_STATUS(llm42_request_options_set_max_tokens(ro, 24), LLM42_OK);
  EXPECT_STATUS(llm42_request_options_set_temperature(ro, 0.8f), LLM42_OK);
  EXPECT_STATUS(llm42_request_options_set_seed(ro, 5), LLM42_OK);
  EXPECT_STATUS(llm42_request_options_set_deterministic(ro, 1), LLM42_OK);
  EXPECT_STATUS(llm42_request_options_set_logprobs(ro, 1), LLM42_OK);
  EXPECT_STATUS(llm42_request_submit(s, ro, &r), LLM42_OK);
  llm42_request_options_destroy(ro);
  if (r != NULL) EXPECT(llm42_request_wait(r, -1) == LLM42_OK);
  return r;
}

/* The conversation API: three turns, each continuing the last; the third gives the bits of a
 * request whose prompt is the whole history, in a session without the prefix cache, and its
 * history came from the cache. */
static void TestConversation(void) {
  llm42_session* s = OpenSessionKv(0, "auto");
  llm42_session_options* so = NULL;
  llm42_session* cold = NULL;
  llm42_request *t1, *t2, *t3, *ref, *unfinished;
  llm42_request_options* ro = NULL;
  int32_t history[512], out[64];
  size_t n_history = 0, n = 0;
  float lp3[64], lp_ref[64];
  size_t n3 = 0, n_ref = 0;
  int64_t cached = 0;
  if (s == NULL) return;
  EXPECT_STATUS(llm42_session_options_create(&so), LLM42_OK);
  EXPECT_STATUS(llm42_session_options_set_model_path(so, g_model), LLM42_OK);
  EXPECT_STATUS(llm42_session_options_set_prefix_caching(so, 0), LLM42_OK);
  /* Its KV resident from the start: the same outputs as the lazily paged session's (below). */
  EXPECT_STATUS(llm42_session_options_set_kv_prefault(so, 1), LLM42_OK);
  EXPECT_STATUS(llm42_session_create(so, &cold), LLM42_OK);
  llm42_session_options_destroy(so);

  t1 = SubmitTurn(s, NULL, NULL, "Once upon a time", NULL, 0);
  t2 = SubmitTurn(s, t1, NULL, " Then the sun came out.", NULL, 0);
  t3 = SubmitTurn(s, t2, NULL, " The end.", NULL, 0);
  EXPECT_STATUS(llm42_request_stat(t3, LLM42_STAT_CACHED_PROMPT_TOKENS, &cached), LLM42_OK);
  EXPECT(cached >= 48); /* two turns of history, in 16-token blocks */

  /* The same history as one prompt: t1's prompt and output, the second text, t2's output, the third. */
  EXPECT_STATUS(llm42_session_tokenize(s, "Once upon a time", 16, 1, history, 512, &n_history), LLM42_OK);
  EXPECT_STATUS(llm42_request_output_tokens(t1, history + n_history, 64, &n), LLM42_OK);
  n_history += n;
  EXPECT_STATUS(llm42_session_tokenize(s, " Then the sun came out.", 23, 0, history + n_history, 64, &n), LLM42_OK);
  n_history += n;
  EXPECT_STATUS(llm42_request_output_tokens(t2, history + n_history, 64, &n), LLM42_OK);
  n_history += n;
  EXPECT_STATUS(llm42_session_tokenize(s, " The end.", 9, 0, history + n_history, 64, &n), LLM42_OK);
  n_history += n;
  ref = SubmitTurn(cold, NULL, NULL, NULL, history, n_history);
  EXPECT_STATUS(llm42_request_output_tokens(t3, out, 64, &n), LLM42_OK);
  EXPECT(n == 24);
  EXPECT_STATUS(llm42_request_logprobs(t3, lp3, 64, &n3), LLM42_OK);
  EXPECT_STATUS(llm42_request_logprobs(ref, lp_ref, 64, &n_ref), LLM42_OK);
  EXPECT(n3 == 24 && n_ref == 24 && memcmp(lp3, lp_ref, sizeof(float) * 24) == 0);
  EXPECT_STATUS(llm42_request_output_tokens(ref, history, 64, &n), LLM42_OK);
  EXPECT(n == 24 && memcmp(out, history, sizeof(int32_t) * 24) == 0);

  /* Errors: an unfinished parent; a parent of another session. */
  EXPECT_STATUS(llm42_request_options_create(&ro), LLM42_OK);
  unfinished = Submit(s, "Once upon a time", 200, NULL, NULL);
  EXPECT(llm42_request_options_set_parent(ro, unfinished) == LLM42_FAILED_PRECONDITION ||
         llm42_request_is_finished(unfinished));
  llm42_request_destroy(unfinished);
  EXPECT_STATUS(llm42_request_options_set_parent(ro, ref), LLM42_OK);
  EXPECT_STATUS(llm42_request_options_set_prompt(ro, "x", 1), LLM42_OK);
  EXPECT_STATUS(llm42_request_submit(s, ro, &unfinished), LLM42_INVALID_ARGUMENT);
  EXPECT(strstr(llm42_last_error(), "another session") != NULL);
  llm42_request_options_destroy(ro);

  llm42_request_destroy(t1);
  llm42_request_destroy(t2);
  llm42_request_destroy(t3);
  llm42_request_destroy(ref);
  llm42_session_destroy(cold);
  llm42_session_destroy(s);
}

static int WriteFile(const char* path, const char* data, size_t n) {
  FILE* f = fopen(path, "wb");
  if (f == NULL) return 0;
  fwrite(data, 1, n, f);
  return fclose(f) == 0;
}

/* A saved conversation: continued in a fresh session (a restarted game), it gives the bits of the
 * same continuation in the session that saved it, with its history's K/V from the file; damaged
 * files and another KV type are refused with their statuses. */
static void TestSavedConversation(void) {
  const char* path = "c_api_test_conversation.llm42";
  const char* bad = "c_api_test_conversation_bad.llm42";
  llm42_session* s = OpenSessionKv(0, "auto");
  llm42_session* restarted = OpenSessionKv(0, "auto");
  llm42_session* other_kv = OpenSessionKv(0, "bf16");
  llm42_request *t1, *here, *there;
  llm42_request_options* ro = NULL;
  int32_t a[64], b[64];
  float la[64], lb[64];
  size_t na = 0, nb = 0, n = 0;
  int64_t cached = 0;
  char* bytes;
  long size;
  FILE* f;
  if (s == NULL || restarted == NULL || other_kv == NULL) return;
  t1 = SubmitTurn(s, NULL, NULL, "Once upon a time", NULL, 0);
  EXPECT_STATUS(llm42_session_save_conversation(s, t1, path), LLM42_OK);
  here = SubmitTurn(s, t1, NULL, " The end.", NULL, 0);

  there = SubmitTurn(restarted, NULL, path, " The end.", NULL, 0);
  if (there != NULL) {
    EXPECT_STATUS(llm42_request_output_tokens(here, a, 64, &na), LLM42_OK);
    EXPECT_STATUS(llm42_request_output_tokens(there, b, 64, &nb), LLM42_OK);
    EXPECT(na == 24 && nb == 24 && memcmp(a, b, sizeof(int32_t) * 24) == 0);
    EXPECT_STATUS(llm42_request_logprobs(here, la, 64, &na), LLM42_OK);
    EXPECT_STATUS(llm42_request_logprobs(there, lb, 64, &nb), LLM42_OK);
    EXPECT(na == 24 && nb == 24 && memcmp(la, lb, sizeof(float) * 24) == 0);
    EXPECT_STATUS(llm42_request_stat(there, LLM42_STAT_CACHED_PROMPT_TOKENS, &cached), LLM42_OK);
    EXPECT(cached >= 16); /* the saved blocks, not a prefill */
    llm42_request_destroy(there);
  }

  /* Refusals: another KV type; a truncated file; a flipped byte; no file. */
  EXPECT_STATUS(llm42_request_options_create(&ro), LLM42_OK);
  EXPECT_STATUS(llm42_request_options_load_parent(ro, other_kv, path), LLM42_FAILED_PRECONDITION);
  EXPECT(strstr(llm42_last_error(), "KV type") != NULL);
  f = fopen(path, "rb");
  EXPECT(f != NULL);
  if (f != NULL) {
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    fseek(f, 0, SEEK_SET);
    bytes = (char*)malloc((size_t)size);
    n = fread(bytes, 1, (size_t)size, f);
    fclose(f);
    EXPECT(n == (size_t)size && size > 100);
    EXPECT(WriteFile(bad, bytes, (size_t)size / 2));
    EXPECT_STATUS(llm42_request_options_load_parent(ro, restarted, bad), LLM42_FORMAT_ERROR);
    bytes[size / 3] ^= 0x10;
    EXPECT(WriteFile(bad, bytes, (size_t)size));
    EXPECT_STATUS(llm42_request_options_load_parent(ro, restarted, bad), LLM42_FORMAT_ERROR);
    free(bytes);
  }
  EXPECT_STATUS(llm42_request_options_load_parent(ro, restarted, "no/such/file.llm42"), LLM42_NOT_FOUND);
  llm42_request_options_destroy(ro);
  remove(path);
  remove(bad);
  llm42_request_destroy(t1);
  llm42_request_destroy(here);
  llm42_session_destroy(other_kv);
  llm42_session_destroy(restarted);
  llm42_session_destroy(s);
}

/* A finished request's output tokens and their logprobs' bits, as text. */
static void FormatOutput(llm42_request* r, char* out, size_t capacity) {
  int32_t tokens[64];
  float lp[64];
  size_t n = 0, i;
  uint32_t bits;
  out[0] = '\0';
  EXPECT_STATUS(llm42_request_output_tokens(r, tokens, 64, &n), LLM42_OK);
  for (i = 0; i < n; ++i) snprintf(out + strlen(out), capacity - strlen(out), "%d ", tokens[i]);
  EXPECT_STATUS(llm42_request_logprobs(r, lp, 64, &n), LLM42_OK);
  for (i = 0; i < n; ++i) {
    memcpy(&bits, &lp[i], 4);
    snprintf(out + strlen(out), capacity - strlen(out), "%08x ", bits);
  }
}

/* The child of TestSavedConversationInAFreshProcess: continues the conversation saved in `path`
 * with " The end." and prints FormatOutput's line. */
static int ContinueSaved(const char* path) {
  llm42_session* s = OpenSessionKv(0, "auto");
  llm42_request* r;
  char line[1024];
  if (s == NULL) return 1;
  r = SubmitTurn(s, NULL, path, " The end.", NULL, 0);
  if (r == NULL) return 1;
  FormatOutput(r, line, sizeof line);
  printf("%s\n", line);
  llm42_request_destroy(r);
  llm42_session_destroy(s);
  return g_failed == 0 ? 0 : 1;
}

/* A restart: this program run again continues the saved conversation and prints what the
 * continuation in the saving session gives, tokens and logprob bits. */
static void TestSavedConversationInAFreshProcess(const char* self) {
  const char* path = "c_api_test_restart.llm42";
  llm42_session* s = OpenSessionKv(0, "auto");
  llm42_request *t1, *here;
  char expected[1024] = "", got[1024] = "", command[1024];
  FILE* child;
  if (s == NULL) return;
  t1 = SubmitTurn(s, NULL, NULL, "Once upon a time", NULL, 0);
  EXPECT_STATUS(llm42_session_save_conversation(s, t1, path), LLM42_OK);
  here = SubmitTurn(s, t1, NULL, " The end.", NULL, 0);
  FormatOutput(here, expected, sizeof expected);
#ifdef _WIN32 /* cmd.exe quotes with double quotes */
  snprintf(command, sizeof command, "\"\"%s\" \"%s\" --continue-saved \"%s\"\"", self, g_model, path);
#else
  snprintf(command, sizeof command, "'%s' '%s' --continue-saved '%s'", self, g_model, path);
#endif
  child = popen(command, "r");
  EXPECT(child != NULL);
  if (child != NULL) {
    if (fgets(got, sizeof got, child) == NULL) got[0] = '\0';
    EXPECT(pclose(child) == 0);
    got[strcspn(got, "\n")] = '\0';
    EXPECT(strcmp(got, expected) == 0);
  }
  remove(path);
  llm42_request_destroy(t1);
  llm42_request_destroy(here);
  llm42_session_destroy(s);
}

/* A deterministic request (selective mode, window 4 so several verify passes run): only
 * verified tokens stream, the text is llama.cpp's greedy continuation, the seed is the default. */
static void TestDeterministic(void) {
  llm42_session_options* so = NULL;
  llm42_session* s = NULL;
  llm42_determinism* p = NULL;
  llm42_request_options* ro = NULL;
  llm42_request* r = NULL;
  char text[512];
  size_t len = 0, n = 0;
  int64_t passes = 0, fixed_decoded = -1;
  EXPECT_STATUS(llm42_determinism_create(LLM42_MODE_SELECTIVE, &p), LLM42_OK);
  EXPECT_STATUS(llm42_determinism_set_window(p, 4), LLM42_OK);
  EXPECT_STATUS(llm42_determinism_set_decode_path(p, LLM42_DECODE_PATH_VERIFY), LLM42_OK);
  EXPECT_STATUS(llm42_session_options_create(&so), LLM42_OK);
  EXPECT_STATUS(llm42_session_options_set_model_path(so, g_model), LLM42_OK);
  EXPECT_STATUS(llm42_session_options_set_determinism(so, p), LLM42_OK);
  EXPECT_STATUS(llm42_session_create(so, &s), LLM42_OK);
  EXPECT_STATUS(llm42_request_options_create(&ro), LLM42_OK);
  EXPECT_STATUS(llm42_request_options_set_prompt(ro, "Once upon a time", 16), LLM42_OK);
  EXPECT_STATUS(llm42_request_options_set_max_tokens(ro, 32), LLM42_OK);
  EXPECT_STATUS(llm42_request_options_set_deterministic(ro, 1), LLM42_OK);
  EXPECT_STATUS(llm42_request_submit(s, ro, &r), LLM42_OK);
  if (r != NULL) {
    for (;;) {
      EXPECT_STATUS(llm42_request_read_text(r, text + len, sizeof text - 1 - len, &n, -1), LLM42_OK);
      if (n == 0) break;
      len += n;
    }
    text[len] = '\0';
    EXPECT(strcmp(text, kExpected) == 0);
    {
      uint64_t seed = 0;
      EXPECT_STATUS(llm42_request_effective_seed(r, &seed), LLM42_OK);
      EXPECT(seed == 42);
    }
    EXPECT_STATUS(llm42_request_stat(r, LLM42_STAT_VERIFY_PASSES, &passes), LLM42_OK);
    /* The policy chose LLM42_DECODE_PATH_VERIFY: nothing was decoded under fixed. */
    EXPECT_STATUS(llm42_request_stat(r, LLM42_STAT_TOKENS_DECODED_FIXED, &fixed_decoded), LLM42_OK);
    EXPECT(fixed_decoded == 0);
    EXPECT(passes >= 7); /* 31 candidates in windows of at most 4 */
    llm42_request_destroy(r);
  }
  llm42_request_options_destroy(ro);
  llm42_session_destroy(s);
  llm42_session_options_destroy(so);
  llm42_determinism_destroy(p);
}

static void* CancelLater(void* arg) {
  llm42_request* r = (llm42_request*)arg;
  int32_t token;
  size_t n = 0;
  /* Wait until it produced something, then cancel from this thread. */
  llm42_request_read_tokens(r, &token, 1, &n, -1);
  llm42_request_cancel(r);
  llm42_request_cancel(r); /* idempotent */
  return NULL;
}

static void TestCancelFromAnotherThread(llm42_session* s) {
  llm42_request* r = Submit(s, "Once upon a time", 1900, NULL, NULL);
  pthread_t t;
  EXPECT(pthread_create(&t, NULL, CancelLater, r) == 0);
  pthread_join(t, NULL);
  EXPECT_STATUS(llm42_request_wait(r, 10000), LLM42_OK);
  EXPECT(llm42_request_status(r) == LLM42_CANCELLED);
  EXPECT(llm42_request_finish_reason(r) == LLM42_FINISH_CANCELLED);
  int64_t generated = 0;
  EXPECT_STATUS(llm42_request_stat(r, LLM42_STAT_TOKENS_GENERATED, &generated), LLM42_OK);
  EXPECT(generated >= 1 && generated < 1900);
  llm42_request_destroy(r);
}

/* How a stream ended: PENDING while running; a cancelled request's stream ends like a finished
 * one's (OK, nothing), and llm42_request_status then says CANCELLED with the request's message.
 * Checked to fail with llm42_request_status reporting OK while running (the old contract). */
static void TestEndOfStreamStatus(llm42_session* s) {
  llm42_request* r = Submit(s, "Once upon a time", 1900, NULL, NULL);
  char buf[64];
  size_t n = 0;
  llm42_status before;
  int32_t finished;
  if (r == NULL) return;
  before = llm42_request_status(r);
  finished = llm42_request_is_finished(r);
  /* 1,900 tokens take far longer than two calls: it was running at the first one. */
  EXPECT(finished == 0 && before == LLM42_PENDING);
  EXPECT_STATUS(llm42_request_cancel(r), LLM42_OK);
  for (;;) {
    EXPECT_STATUS(llm42_request_read_text(r, buf, sizeof buf, &n, -1), LLM42_OK);
    if (n == 0) break;
  }
  EXPECT_STATUS(llm42_request_status(r), LLM42_CANCELLED);
  EXPECT(strcmp(llm42_last_error(), "cancelled") == 0);
  EXPECT(llm42_request_finish_reason(r) == LLM42_FINISH_CANCELLED);
  llm42_request_destroy(r);
}

/* A request that fails after it was accepted (llm42_testing_fail_requests_after): its stream
 * gives the tokens committed before the failure, then ends; the status says INTERNAL with the
 * failure's message, the finish reason ERROR. */
static void TestFailureAfterSubmit(llm42_session* s) {
  llm42_request* r;
  char buf[256];
  size_t n = 0, len = 0;
  int64_t generated = 0;
  EXPECT_STATUS(llm42_testing_fail_requests_after(3), LLM42_OK);
  r = Submit(s, "Once upon a time", 32, NULL, NULL);
  if (r != NULL) {
    for (;;) {
      EXPECT_STATUS(llm42_request_read_text(r, buf + len, sizeof buf - len, &n, -1), LLM42_OK);
      if (n == 0) break;
      len += n;
    }
    EXPECT(len > 0 && strncmp(buf, kExpected, len) == 0); /* what came before the failure */
    EXPECT_STATUS(llm42_request_status(r), LLM42_INTERNAL);
    EXPECT(strstr(llm42_last_error(), "injected failure") != NULL);
    EXPECT(llm42_request_finish_reason(r) == LLM42_FINISH_ERROR);
    EXPECT_STATUS(llm42_request_stat(r, LLM42_STAT_TOKENS_GENERATED, &generated), LLM42_OK);
    EXPECT(generated == 3);
    llm42_request_destroy(r);
  }
  EXPECT_STATUS(llm42_testing_fail_requests_after(0), LLM42_OK);
  EXPECT_STATUS(llm42_testing_fail_requests_after(-1), LLM42_INVALID_ARGUMENT);
}

/* One call: llm42_session_generate gives the streamed request's text; a seed above 2^63
 * round-trips; a refused request returns submit's status with no text. */
static void TestGenerateInOneCall(llm42_session* s) {
  llm42_request_options* ro = NULL;
  llm42_request* r = NULL;
  char* text = (char*)0x1;
  size_t len = 0;
  uint64_t seed = 0;
  const uint64_t kHighSeed = 0xF000000000000001ull;
  EXPECT_STATUS(llm42_request_options_create(&ro), LLM42_OK);
  EXPECT_STATUS(llm42_request_options_set_prompt(ro, "Once upon a time", 16), LLM42_OK);
  EXPECT_STATUS(llm42_request_options_set_max_tokens(ro, 32), LLM42_OK);
  EXPECT_STATUS(llm42_request_options_set_ignore_eos(ro, 1), LLM42_OK);
  EXPECT_STATUS(llm42_session_generate(s, ro, &text, &len), LLM42_OK);
  EXPECT(text != NULL && len == strlen(kExpected) && strcmp(text, kExpected) == 0);
  llm42_free(text);
  llm42_free(NULL);
  EXPECT_STATUS(llm42_request_options_set_temperature(ro, 0.9f), LLM42_OK);
  EXPECT_STATUS(llm42_request_options_set_seed(ro, kHighSeed), LLM42_OK);
  EXPECT_STATUS(llm42_request_submit(s, ro, &r), LLM42_OK);
  if (r != NULL) {
    EXPECT_STATUS(llm42_request_effective_seed(r, &seed), LLM42_OK);
    EXPECT(seed == kHighSeed);
    EXPECT_STATUS(llm42_request_wait(r, -1), LLM42_OK);
    llm42_request_destroy(r);
  }
  llm42_request_options_destroy(ro);
  EXPECT_STATUS(llm42_request_options_create(&ro), LLM42_OK); /* no prompt: submit refuses it */
  EXPECT_STATUS(llm42_session_generate(s, ro, &text, &len), LLM42_INVALID_ARGUMENT);
  EXPECT(text == NULL);
  EXPECT_STATUS(llm42_session_generate(s, ro, NULL, &len), LLM42_INVALID_ARGUMENT);
  EXPECT_STATUS(llm42_session_generate(NULL, ro, &text, &len), LLM42_INVALID_ARGUMENT);
  llm42_request_options_destroy(ro);
}

/* One thread serves many streams through a watcher: each request's text, read only when the
 * watcher names it, is llama.cpp's. Checked to fail (every stream stalls, the wait times out)
 * when Request::Commit does not notify its watchers. */
enum { kWatched = 12 };
static void TestWatcherServesManyStreams(llm42_session* s) {
  llm42_watcher* w = NULL;
  llm42_request* r[kWatched];
  char text[kWatched][256];
  size_t len[kWatched];
  int done[kWatched];
  int ended = 0, i;
  uint64_t tags[4];
  size_t n = 0;
  EXPECT_STATUS(llm42_watcher_create(&w), LLM42_OK);
  if (w == NULL) return;
  for (i = 0; i < kWatched; ++i) {
    r[i] = Submit(s, "Once upon a time", 32, NULL, NULL);
    len[i] = 0;
    done[i] = 0;
    EXPECT_STATUS(llm42_watcher_add(w, r[i], 100 + (uint64_t)i), LLM42_OK);
  }
  while (ended < kWatched) {
    size_t k;
    const llm42_status st = llm42_watcher_wait(w, tags, 4, &n, 20000); /* 4: the rest stay queued */
    EXPECT_STATUS(st, LLM42_OK);
    if (st != LLM42_OK) break;
    for (k = 0; k < n; ++k) {
      const int j = (int)(tags[k] - 100);
      EXPECT(j >= 0 && j < kWatched);
      /* A report made as the request was removed can still come: skip what has ended. */
      if (j < 0 || j >= kWatched || done[j]) continue;
      for (;;) {
        size_t got = 0;
        const llm42_status rs = llm42_request_read_text(r[j], text[j] + len[j], sizeof text[j] - 1 - len[j], &got, 0);
        if (rs == LLM42_TIMEOUT) break; /* nothing more yet: the next commit is reported again */
        EXPECT_STATUS(rs, LLM42_OK);
        if (rs != LLM42_OK) break;
        if (got == 0) { /* the end */
          EXPECT_STATUS(llm42_watcher_remove(w, r[j]), LLM42_OK);
          done[j] = 1;
          ++ended;
          break;
        }
        len[j] += got;
      }
    }
  }
  for (i = 0; i < kWatched; ++i) {
    text[i][len[i]] = '\0';
    EXPECT(strcmp(text[i], kExpected) == 0);
    EXPECT_STATUS(llm42_request_status(r[i]), LLM42_OK);
  }
  /* Every request has ended and been removed: once the reports made as they were removed are
   * taken, a zero wait times out; wake ends a wait with no tags. */
  while (llm42_watcher_wait(w, tags, 4, &n, 0) == LLM42_OK) {
  }
  EXPECT_STATUS(llm42_watcher_wait(w, tags, 4, &n, 0), LLM42_TIMEOUT);
  EXPECT_STATUS(llm42_watcher_wake(w), LLM42_OK);
  EXPECT_STATUS(llm42_watcher_wait(w, tags, 4, &n, -1), LLM42_OK);
  EXPECT(n == 0);
  /* A request added after it ended is reported at once; one added twice, under its last tag. */
  EXPECT_STATUS(llm42_watcher_add(w, r[0], 7), LLM42_OK);
  EXPECT_STATUS(llm42_watcher_add(w, r[0], 8), LLM42_OK);
  EXPECT_STATUS(llm42_watcher_wait(w, tags, 4, &n, 0), LLM42_OK);
  EXPECT(n == 2 && tags[0] == 7 && tags[1] == 8); /* each add of an ended request reports it */
  EXPECT_STATUS(llm42_watcher_wait(w, NULL, 0, &n, 0), LLM42_TIMEOUT);
  EXPECT_STATUS(llm42_watcher_wait(NULL, tags, 4, &n, 0), LLM42_INVALID_ARGUMENT);
  EXPECT_STATUS(llm42_watcher_wait(w, NULL, 4, &n, 0), LLM42_INVALID_ARGUMENT);
  EXPECT_STATUS(llm42_watcher_add(w, NULL, 1), LLM42_INVALID_ARGUMENT);
  for (i = 0; i < kWatched; ++i) llm42_request_destroy(r[i]);
  /* A watcher destroyed while a running request still reports to it (ASan: no use after free). */
  r[0] = Submit(s, "Once upon a time", 32, NULL, NULL);
  EXPECT_STATUS(llm42_watcher_add(w, r[0], 1), LLM42_OK);
  llm42_watcher_destroy(w);
  EXPECT_STATUS(llm42_request_wait(r[0], -1), LLM42_OK);
  llm42_request_destroy(r[0]);
  llm42_watcher_destroy(NULL);
}

/* Loading without blocking: progress climbs to 1 in steps the poller sees, the taken session
 * generates llama.cpp's text, and a load cancelled mid-way ends CANCELLED with no session. Stages
 * are slowed (llm42_testing_set_load_stage_delay) so that a poll lands between them. Checked to
 * fail with LoadProgress::Reach ignoring Cancel (the load then completes: take returns OK). */
static void TestSessionCreateAsync(void) {
  llm42_session_options* so = NULL;
  llm42_session_loader* l = NULL;
  llm42_session* s = NULL;
  float last = 0.0f, p;
  int distinct = 0;
  EXPECT_STATUS(llm42_session_options_create(&so), LLM42_OK);
  EXPECT_STATUS(llm42_session_options_set_model_path(so, g_model), LLM42_OK);
  EXPECT_STATUS(llm42_session_options_set_threads(so, 2), LLM42_OK);
  EXPECT_STATUS(llm42_testing_set_load_stage_delay(20), LLM42_OK);
  EXPECT_STATUS(llm42_session_create_async(so, &l), LLM42_OK);
  llm42_session_options_destroy(so); /* the loader copied them */
  EXPECT_STATUS(llm42_session_loader_take(l, &s), LLM42_FAILED_PRECONDITION); /* still loading */
  EXPECT(s == NULL);
  while (llm42_session_loader_wait(l, 5) == LLM42_TIMEOUT) {
    p = llm42_session_loader_progress(l);
    EXPECT(p >= last && p < 1.0f);
    if (p > last) ++distinct;
    last = p;
  }
  EXPECT(distinct >= 3);
  EXPECT(llm42_session_loader_progress(l) == 1.0f);
  EXPECT_STATUS(llm42_session_loader_take(l, &s), LLM42_OK);
  {
    llm42_session* again = (llm42_session*)0x1;
    EXPECT_STATUS(llm42_session_loader_take(l, &again), LLM42_FAILED_PRECONDITION); /* taken */
    EXPECT(again == NULL);
  }
  if (s != NULL) {
    TestGenerateAndReadText(s); /* the loaded session streams llama.cpp's text */
    llm42_session_destroy(s);
  }
  llm42_session_loader_destroy(l);
  /* Cancelled mid-way. */
  EXPECT_STATUS(llm42_session_options_create(&so), LLM42_OK);
  EXPECT_STATUS(llm42_session_options_set_model_path(so, g_model), LLM42_OK);
  EXPECT_STATUS(llm42_session_create_async(so, &l), LLM42_OK);
  llm42_session_options_destroy(so);
  while (llm42_session_loader_progress(l) < 0.2f) llm42_session_loader_wait(l, 1); /* into the layers' upload */
  EXPECT_STATUS(llm42_session_loader_cancel(l), LLM42_OK);
  EXPECT_STATUS(llm42_session_loader_wait(l, -1), LLM42_OK);
  EXPECT_STATUS(llm42_session_loader_take(l, &s), LLM42_CANCELLED);
  EXPECT(s == NULL);
  llm42_session_loader_destroy(l);
  /* Destroyed while loading: cancelled and waited for (ASan: nothing leaks or runs on). */
  EXPECT_STATUS(llm42_session_options_create(&so), LLM42_OK);
  EXPECT_STATUS(llm42_session_options_set_model_path(so, g_model), LLM42_OK);
  EXPECT_STATUS(llm42_session_create_async(so, &l), LLM42_OK);
  llm42_session_options_destroy(so);
  llm42_session_loader_destroy(l);
  EXPECT_STATUS(llm42_testing_set_load_stage_delay(0), LLM42_OK);
  /* A load that fails reports the failure at take. */
  EXPECT_STATUS(llm42_session_options_create(&so), LLM42_OK);
  EXPECT_STATUS(llm42_session_options_set_model_path(so, "/nonexistent/model.gguf"), LLM42_OK);
  EXPECT_STATUS(llm42_session_create_async(so, &l), LLM42_OK);
  llm42_session_options_destroy(so);
  EXPECT_STATUS(llm42_session_loader_wait(l, -1), LLM42_OK);
  EXPECT_STATUS(llm42_session_loader_take(l, &s), LLM42_NOT_FOUND);
  llm42_session_loader_destroy(l);
  EXPECT(llm42_session_loader_progress(NULL) == -1.0f);
  EXPECT_STATUS(llm42_session_loader_wait(NULL, 0), LLM42_INVALID_ARGUMENT);
  EXPECT_STATUS(llm42_session_create_async(NULL, &l), LLM42_INVALID_ARGUMENT);
  EXPECT_STATUS(llm42_testing_set_load_stage_delay(-1), LLM42_INVALID_ARGUMENT);
  llm42_session_loader_destroy(NULL);
}

static void TestTokenizeDetokenize(llm42_session* s) {
  int32_t ids[16];
  size_t n = 0;
  EXPECT_STATUS(llm42_session_tokenize(s, "Once upon a time", 16, 1, ids, 16, &n), LLM42_OK);
  EXPECT(n == 5 && ids[0] == 1 && ids[1] == 403 && ids[4] == 378);
  EXPECT_STATUS(llm42_session_tokenize(s, "Once upon a time", 16, 1, ids, 2, &n), LLM42_OUT_OF_RANGE);
  EXPECT(n == 5);
  char text[64];
  size_t bytes = 0;
  EXPECT_STATUS(llm42_session_detokenize(s, ids + 1, 4, text, sizeof text, &bytes), LLM42_OK);
  EXPECT(bytes == 16 && memcmp(text, "Once upon a time", 16) == 0);
  ids[0] = 9999;
  EXPECT_STATUS(llm42_session_detokenize(s, ids, 1, text, sizeof text, &bytes), LLM42_INVALID_ARGUMENT);
  EXPECT_STATUS(llm42_session_tokenize(s, "\xC3\x28", 2, 0, ids, 16, &n), LLM42_INVALID_ARGUMENT);
  EXPECT(llm42_session_vocab_size(s) == 512);
  EXPECT(llm42_session_eos_token(s) == 2);
  int64_t finished = -1;
  EXPECT_STATUS(llm42_session_stat(s, LLM42_STAT_REQUESTS_FINISHED, &finished), LLM42_OK);
  EXPECT(finished >= 1);
  EXPECT_STATUS(llm42_session_stat(s, LLM42_STAT_TIME_TO_FIRST_TOKEN_US, &finished), LLM42_INVALID_ARGUMENT);
  char json[512];
  EXPECT_STATUS(llm42_session_stats_json(s, json, sizeof json, &bytes), LLM42_OK);
  EXPECT(bytes > 0 && json[0] == '{');
}

/* llm42_session_apply_chat_template through the C ABI: a template given in the options renders the
 * messages and tools as given (the renderer itself is held to python3-jinja2 by jinja_test), the
 * buffer convention holds, and malformed input is refused with its status. stories260K has no
 * chat template of its own. */
static void TestApplyChatTemplate(llm42_session* s) {
  const char* messages = "[{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", \"content\": null,"
                         " \"tool_calls\": [{\"type\": \"function\", \"function\": {\"name\": \"give\", \"arguments\": {\"x\": 1}}}]}]";
  const char* options = "{\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"give\"}}],"
                        " \"add_generation_prompt\": false, \"kwargs\": {\"who\": \"me\"},"
                        " \"template\": \"{% for m in messages %}[{{ m.role }}:{{ m.content }}"
                        "{% for c in m.tool_calls or [] %}<{{ c.function.name }} {{ c.function.arguments | tojson }}>{% endfor %}]"
                        "{% endfor %}{{ tools | length }}{{ add_generation_prompt }}{{ who }}\"}";
  const char* want = "[user:Hi][assistant:None<give {\"x\": 1}>]1Falseme";
  char out[256];
  size_t n = 0;
  EXPECT_STATUS(llm42_session_apply_chat_template(s, messages, options, out, sizeof out, &n), LLM42_OK);
  EXPECT(n == strlen(want) && memcmp(out, want, n) == 0);
  EXPECT_STATUS(llm42_session_apply_chat_template(s, messages, options, out, 4, &n), LLM42_OUT_OF_RANGE);
  EXPECT(n == strlen(want));
  /* No template of its own and none given: refused, not rendered in some other format. */
  EXPECT_STATUS(llm42_session_apply_chat_template(s, messages, NULL, out, sizeof out, &n), LLM42_FAILED_PRECONDITION);
  EXPECT_STATUS(llm42_session_apply_chat_template(s, "[{\"role\": ", NULL, out, sizeof out, &n), LLM42_INVALID_ARGUMENT);
  EXPECT(strstr(llm42_last_error(), "byte") != NULL);
  EXPECT_STATUS(llm42_session_apply_chat_template(s, "[{\"role\": \"robot\", \"content\": \"x\"}]", NULL, out,
                                                  sizeof out, &n),
                LLM42_INVALID_ARGUMENT);
  EXPECT_STATUS(llm42_session_apply_chat_template(s, messages, "{\"template\": \"{% if %}\"}", out, sizeof out, &n),
                LLM42_INVALID_ARGUMENT);
  EXPECT(strstr(llm42_last_error(), "line 1, column") != NULL);
  EXPECT_STATUS(llm42_session_apply_chat_template(s, messages, "{\"template\": \"{{ raise_exception('no') }}\"}", out,
                                                  sizeof out, &n),
                LLM42_INVALID_ARGUMENT);
  EXPECT(strstr(llm42_last_error(), "no") != NULL);
  EXPECT_STATUS(llm42_session_apply_chat_template(NULL, messages, NULL, out, sizeof out, &n), LLM42_INVALID_ARGUMENT);
}

/* llm42_session_parse_chat_output: stories260K has no template, so its replies are plain text with
 * <think> reasoning; the JSON form and the buffer convention as the header states them. */
static void TestParseChatOutput(llm42_session* s) {
  const char* reply = "<think>why</think>\n\nHello \xC3\xA9";
  const char* want = "{\"content\":\"Hello \xC3\xA9\",\"reasoning_content\":\"why\",\"tool_calls\":[]}";
  char out[256];
  size_t n = 0;
  EXPECT_STATUS(llm42_session_parse_chat_output(s, reply, strlen(reply), out, sizeof out, &n), LLM42_OK);
  EXPECT(n == strlen(want) && memcmp(out, want, n) == 0);
  EXPECT_STATUS(llm42_session_parse_chat_output(s, reply, strlen(reply), out, 4, &n), LLM42_OUT_OF_RANGE);
  EXPECT(n == strlen(want));
  EXPECT_STATUS(llm42_session_parse_chat_output(s, NULL, 0, out, sizeof out, &n), LLM42_OK);
  EXPECT_STATUS(llm42_session_parse_chat_output(s, NULL, 3, out, sizeof out, &n), LLM42_INVALID_ARGUMENT);
  EXPECT_STATUS(llm42_session_parse_chat_output(NULL, reply, 1, out, sizeof out, &n), LLM42_INVALID_ARGUMENT);
}

/* llm42_request_options_set_tools: stories260K's template-less model writes no tool calls
 * (UNSUPPORTED); "none" constrains nothing, and cannot join a JSON schema; bad tools and handles are
 * INVALID_ARGUMENT. (Calls generated and parsed: tests/tool_call_grammar_test.cc and
 * ToolCallDeterminismTest in tests/determinism_test.cc.) */
static void TestSetTools(llm42_session* s) {
  const char* tools = "[{\"type\": \"function\", \"function\": {\"name\": \"say\", \"parameters\": {\"type\": \"object\"}}}]";
  llm42_request_options* o = NULL;
  EXPECT_STATUS(llm42_request_options_create(&o), LLM42_OK);
  EXPECT_STATUS(llm42_request_options_set_tools(o, s, tools, "auto", 1), LLM42_UNSUPPORTED);
  EXPECT_STATUS(llm42_request_options_set_tools(o, s, tools, "none", 1), LLM42_OK);
  EXPECT_STATUS(llm42_request_options_set_tools(o, s, "[", "required", 1), LLM42_INVALID_ARGUMENT);
  EXPECT_STATUS(llm42_request_options_set_tools(o, NULL, tools, NULL, 1), LLM42_INVALID_ARGUMENT);
  EXPECT_STATUS(llm42_request_options_set_tools(NULL, s, tools, NULL, 1), LLM42_INVALID_ARGUMENT);
  EXPECT_STATUS(llm42_request_options_set_json_schema(o, "{}"), LLM42_OK);
  EXPECT_STATUS(llm42_request_options_set_tools(o, s, tools, "none", 1), LLM42_INVALID_ARGUMENT);
  llm42_request_options_destroy(o);
  {
    /* A session's own chat template: one that writes Hermes calls gives the model a tool syntax
     * (samples/game_loop.c generates calls with it); one that does not parse fails the session. */
    llm42_session_options* so = NULL;
    llm42_session* t = NULL;
    EXPECT_STATUS(llm42_session_options_create(&so), LLM42_OK);
    EXPECT_STATUS(llm42_session_options_set_model_path(so, g_model), LLM42_OK);
    EXPECT_STATUS(llm42_session_options_set_chat_template(so, "{% if %}"), LLM42_OK);
    EXPECT_STATUS(llm42_session_create(so, &t), LLM42_INVALID_ARGUMENT);
    EXPECT_STATUS(llm42_session_options_set_chat_template(so, "{{ messages }}<tool_call>"), LLM42_OK);
    EXPECT_STATUS(llm42_session_create(so, &t), LLM42_OK);
    EXPECT_STATUS(llm42_request_options_create(&o), LLM42_OK);
    EXPECT_STATUS(llm42_request_options_set_tools(o, t, tools, "required", 0), LLM42_OK);
    llm42_request_options_destroy(o);
    llm42_session_destroy(t);
    llm42_session_options_destroy(so);
  }
}

static void TestErrorPaths(llm42_session* s) {
  llm42_session_options* so = NULL;
  llm42_session* bad = (llm42_session*)0x1;
  llm42_request_options* ro = NULL;
  llm42_request* r = (llm42_request*)0x1;
  size_t n = 0;

  /* NULL handles */
  EXPECT_STATUS(llm42_session_create(NULL, &bad), LLM42_INVALID_ARGUMENT);
  EXPECT(bad == NULL);
  EXPECT(strlen(llm42_last_error()) > 0);
  EXPECT_STATUS(llm42_request_submit(NULL, NULL, &r), LLM42_INVALID_ARGUMENT);
  EXPECT(r == NULL);
  EXPECT_STATUS(llm42_request_read_text(NULL, NULL, 0, &n, 0), LLM42_INVALID_ARGUMENT);
  EXPECT_STATUS(llm42_request_wait(NULL, 0), LLM42_INVALID_ARGUMENT);
  EXPECT_STATUS(llm42_request_cancel(NULL), LLM42_INVALID_ARGUMENT);
  /* The functions that return a value give -1 for NULL and record why. */
  EXPECT(llm42_request_is_finished(NULL) == -1);
  EXPECT(strstr(llm42_last_error(), "request is NULL") != NULL);
  EXPECT(llm42_session_vocab_size(NULL) == -1);
  EXPECT(llm42_session_eos_token(NULL) == -1);
  EXPECT((int32_t)llm42_request_finish_reason(NULL) == -1);
  EXPECT_STATUS(llm42_request_status(NULL), LLM42_INVALID_ARGUMENT);
  {
    uint64_t seed = 7;
    EXPECT_STATUS(llm42_request_effective_seed(NULL, &seed), LLM42_INVALID_ARGUMENT);
    EXPECT(seed == 7); /* out-parameters are written only on success */
  }
  llm42_session_destroy(NULL);
  llm42_request_destroy(NULL);
  llm42_session_options_destroy(NULL);
  llm42_request_options_destroy(NULL);
  llm42_determinism_destroy(NULL);

  /* Bad paths and files */
  EXPECT_STATUS(llm42_session_options_create(&so), LLM42_OK);
  EXPECT_STATUS(llm42_session_create(so, &bad), LLM42_INVALID_ARGUMENT); /* no model path */
  EXPECT_STATUS(llm42_session_options_set_model_path(so, "/nonexistent/llm42/model.gguf"), LLM42_OK);
  EXPECT_STATUS(llm42_session_create(so, &bad), LLM42_NOT_FOUND);
  EXPECT(bad == NULL);
  {
    char path[] = "/tmp/llm42_c_test_XXXXXX";
    int fd = mkstemp(path);
    EXPECT(fd >= 0);
    if (fd >= 0) {
      EXPECT(write(fd, "GGUX not a model", 16) == 16);
      close(fd);
      EXPECT_STATUS(llm42_session_options_set_model_path(so, path), LLM42_OK);
      EXPECT_STATUS(llm42_session_create(so, &bad), LLM42_FORMAT_ERROR);
      unlink(path);
    }
  }
  EXPECT_STATUS(llm42_session_options_set_threads(so, -1), LLM42_OUT_OF_RANGE);
  EXPECT_STATUS(llm42_session_options_set_backend(so, "tpu"), LLM42_INVALID_ARGUMENT);
  EXPECT_STATUS(llm42_session_options_set_kv_dtype(so, "f8"), LLM42_INVALID_ARGUMENT);
  EXPECT_STATUS(llm42_session_options_set_kv_dtype(so, NULL), LLM42_INVALID_ARGUMENT);
  EXPECT_STATUS(llm42_session_options_set_model_path(so, g_model), LLM42_OK);
  {
    /* cuda where it cannot run is UNSUPPORTED, and the message says why (no driver, no device,
     * compute capability, or not built); where a usable device exists the session opens. */
    llm42_status st;
    const char* why;
    EXPECT_STATUS(llm42_session_options_set_backend(so, "cuda"), LLM42_OK);
    st = llm42_session_create(so, &bad);
    EXPECT(st == LLM42_OK || st == LLM42_UNSUPPORTED);
    why = llm42_last_error();
    if (st == LLM42_UNSUPPORTED) {
      EXPECT(strstr(why, "driver") != NULL || strstr(why, "CUDA device") != NULL ||
             strstr(why, "compute capability") != NULL || strstr(why, "not built") != NULL);
    } else if (st == LLM42_OK) {
      llm42_session_destroy(bad);
      bad = NULL;
    }
    EXPECT_STATUS(llm42_session_options_set_backend(so, "auto"), LLM42_OK);
  }
  EXPECT_STATUS(llm42_session_options_set_context_length(so, 1000000), LLM42_OK);
  EXPECT_STATUS(llm42_session_create(so, &bad), LLM42_OUT_OF_RANGE); /* beyond the model's */
  llm42_session_options_destroy(so);

  /* Request options */
  EXPECT_STATUS(llm42_request_options_create(&ro), LLM42_OK);
  EXPECT_STATUS(llm42_request_submit(s, ro, &r), LLM42_INVALID_ARGUMENT); /* no prompt */
  EXPECT_STATUS(llm42_request_options_set_prompt(ro, "bad \xFF utf8", 10), LLM42_INVALID_ARGUMENT);
  EXPECT_STATUS(llm42_request_options_set_max_tokens(ro, 0), LLM42_OUT_OF_RANGE);
  EXPECT_STATUS(llm42_request_options_set_temperature(ro, -1.0f), LLM42_OUT_OF_RANGE);
  EXPECT_STATUS(llm42_request_options_set_top_p(ro, 0.0f), LLM42_OUT_OF_RANGE);
  EXPECT_STATUS(llm42_request_options_set_min_p(ro, 1.0f), LLM42_OUT_OF_RANGE);
  EXPECT_STATUS(llm42_request_options_add_stop(ro, ""), LLM42_INVALID_ARGUMENT);
  {
    int32_t bad_ids[2] = {1, 100000};
    EXPECT_STATUS(llm42_request_options_set_prompt_tokens(ro, bad_ids, 2), LLM42_OK);
    EXPECT_STATUS(llm42_request_submit(s, ro, &r), LLM42_INVALID_ARGUMENT);
  }
  {
    /* A prompt longer than the context (this session's is 64 tokens). */
    char long_prompt[2000];
    memset(long_prompt, 'a', sizeof long_prompt - 1);
    long_prompt[sizeof long_prompt - 1] = '\0';
    EXPECT_STATUS(llm42_request_options_set_prompt(ro, long_prompt, strlen(long_prompt)), LLM42_OK);
    EXPECT_STATUS(llm42_request_submit(s, ro, &r), LLM42_OUT_OF_RANGE);
    EXPECT(r == NULL);
  }
  /* NaN and infinities are out of range, not silently stored. */
  EXPECT_STATUS(llm42_request_options_set_temperature(ro, NAN), LLM42_OUT_OF_RANGE);
  EXPECT_STATUS(llm42_request_options_set_temperature(ro, INFINITY), LLM42_OUT_OF_RANGE);
  EXPECT_STATUS(llm42_request_options_set_top_p(ro, NAN), LLM42_OUT_OF_RANGE);
  EXPECT_STATUS(llm42_request_options_set_min_p(ro, -INFINITY), LLM42_OUT_OF_RANGE);
  EXPECT_STATUS(llm42_request_options_set_top_logprobs(ro, -1), LLM42_OUT_OF_RANGE);
  {
    /* A refused value leaves the options as they were: greedy stays greedy (a stored NaN
     * temperature would sample garbage), so the output is llama.cpp's. */
    char text[256];
    size_t n = 0;
    EXPECT_STATUS(llm42_request_options_set_prompt(ro, "Once upon a time", 16), LLM42_OK);
    EXPECT_STATUS(llm42_request_options_set_temperature(ro, 0.0f), LLM42_OK);
    EXPECT_STATUS(llm42_request_options_set_temperature(ro, NAN), LLM42_OUT_OF_RANGE);
    EXPECT_STATUS(llm42_request_options_set_max_tokens(ro, 8), LLM42_OK);
    EXPECT_STATUS(llm42_request_options_set_max_tokens(ro, -3), LLM42_OUT_OF_RANGE);
    EXPECT_STATUS(llm42_request_options_set_ignore_eos(ro, 1), LLM42_OK);
    EXPECT_STATUS(llm42_request_submit(s, ro, &r), LLM42_OK);
    EXPECT_STATUS(llm42_request_wait(r, -1), LLM42_OK);
    EXPECT_STATUS(llm42_request_output_text(r, text, sizeof text, &n), LLM42_OK);
    EXPECT(n > 0 && strncmp(text, kExpected, n) == 0);
    size_t count = 0;
    llm42_request_output_tokens(r, NULL, 0, &count);
    EXPECT(count == 8);
    llm42_request_destroy(r);
    r = NULL;
  }
  {
    /* A prompt with a NUL byte inside is text like any other (its length says where it ends). */
    EXPECT_STATUS(llm42_request_options_set_prompt(ro, "Once\0upon", 9), LLM42_OK);
    EXPECT_STATUS(llm42_request_options_set_max_tokens(ro, INT32_MAX), LLM42_OK); /* the context ends it */
    EXPECT_STATUS(llm42_request_submit(s, ro, &r), LLM42_OK);
    EXPECT_STATUS(llm42_request_wait(r, -1), LLM42_OK);
    EXPECT(llm42_request_finish_reason(r) == LLM42_FINISH_LENGTH);
    llm42_request_destroy(r);
    r = NULL;
    /* A prompt and chat messages together: refused, not one silently dropped. */
    EXPECT_STATUS(llm42_request_options_add_message(ro, "user", "Hi"), LLM42_OK);
    EXPECT_STATUS(llm42_request_submit(s, ro, &r), LLM42_INVALID_ARGUMENT);
    EXPECT(r == NULL && strstr(llm42_last_error(), "both a prompt and chat messages") != NULL);
    /* An empty token list is no prompt. */
    EXPECT_STATUS(llm42_request_options_set_prompt_tokens(ro, NULL, 0), LLM42_OK);
    EXPECT_STATUS(llm42_request_submit(s, ro, &r), LLM42_INVALID_ARGUMENT);
    EXPECT(r == NULL);
  }
  llm42_request_options_destroy(ro);

  {
    /* Mode off refuses deterministic requests. */
    llm42_determinism* p = NULL;
    llm42_session* off = NULL;
    EXPECT_STATUS(llm42_determinism_create((llm42_mode)7, &p), LLM42_INVALID_ARGUMENT);
    EXPECT_STATUS(llm42_determinism_create(LLM42_MODE_OFF, &p), LLM42_OK);
    EXPECT_STATUS(llm42_determinism_set_window(p, 0), LLM42_OUT_OF_RANGE);
    EXPECT_STATUS(llm42_determinism_set_window(p, 16), LLM42_OK);
    EXPECT_STATUS(llm42_determinism_set_mismatch_injection(p, 1.5), LLM42_OUT_OF_RANGE);
    EXPECT_STATUS(llm42_determinism_set_verify_group(p, 0), LLM42_OUT_OF_RANGE);
    EXPECT_STATUS(llm42_determinism_set_fast_path_noise(p, INFINITY), LLM42_OUT_OF_RANGE);
    EXPECT_STATUS(llm42_determinism_set_fast_path_noise(p, NAN), LLM42_OUT_OF_RANGE);
    EXPECT_STATUS(llm42_determinism_set_decode_path(p, (llm42_decode_path)3), LLM42_INVALID_ARGUMENT);
    EXPECT_STATUS(llm42_determinism_set_decode_path(NULL, LLM42_DECODE_PATH_AUTO), LLM42_INVALID_ARGUMENT);
    EXPECT_STATUS(llm42_session_options_create(&so), LLM42_OK);
    EXPECT_STATUS(llm42_session_options_set_model_path(so, g_model), LLM42_OK);
    EXPECT_STATUS(llm42_session_options_set_determinism(so, p), LLM42_OK);
    EXPECT_STATUS(llm42_session_create(so, &off), LLM42_OK);
    EXPECT_STATUS(llm42_request_options_create(&ro), LLM42_OK);
    EXPECT_STATUS(llm42_request_options_set_prompt(ro, "Hi", 2), LLM42_OK);
    EXPECT_STATUS(llm42_request_options_set_deterministic(ro, 1), LLM42_OK);
    EXPECT_STATUS(llm42_request_submit(off, ro, &r), LLM42_UNSUPPORTED);
    llm42_request_options_destroy(ro);
    llm42_session_destroy(off);
    llm42_session_options_destroy(so);
    llm42_determinism_destroy(p);
  }
}

/* Receipts and fingerprints: a deterministic request's receipt is reproduced by another session
 * (also after its own session is gone); a flipped byte is FORMAT_ERROR; another KV type is
 * another schedule, with a message; a plain request has none. */
static void TestReceipts(void) {
  llm42_session* s = OpenSessionKv(0, "auto");
  llm42_session* other = OpenSessionKv(0, "auto");
  llm42_session* f16 = OpenSessionKv(0, "f16");
  llm42_request *r, *plain;
  char hex[80], small[8];
  char* receipt;
  size_t n = 0, size = 0;
  llm42_receipt_outcome outcome = LLM42_RECEIPT_OTHER_MODEL;
  int64_t first = 0;
  char detail[256], cut[6];
  size_t detail_len = 0;
  if (s == NULL || other == NULL || f16 == NULL) return;
  EXPECT_STATUS(llm42_session_fingerprint(s, hex, sizeof hex, &n), LLM42_OK);
  EXPECT(n == 64 && strspn(hex, "0123456789abcdef") >= 64);
  EXPECT_STATUS(llm42_session_fingerprint(s, small, sizeof small, &n), LLM42_OUT_OF_RANGE);
  EXPECT(n == 64);
  r = SubmitTurn(s, NULL, NULL, "Once upon a time", NULL, 0);
  if (r == NULL) return;
  EXPECT_STATUS(llm42_request_receipt(r, NULL, 0, &size), LLM42_OUT_OF_RANGE);
  EXPECT(size > 100);
  receipt = (char*)malloc(size);
  llm42_session_destroy(s); /* the request's receipt does not need its session */
  EXPECT_STATUS(llm42_request_receipt(r, receipt, size, &n), LLM42_OK);
  EXPECT(n == size);
  /* A success leaves the last error alone: it still names the failure before. */
  EXPECT_STATUS(llm42_session_fingerprint(other, small, sizeof small, &n), LLM42_OUT_OF_RANGE);
  EXPECT_STATUS(llm42_session_verify_receipt(other, receipt, size, &outcome, &first, detail, sizeof detail,
                                             &detail_len), LLM42_OK);
  EXPECT(outcome == LLM42_RECEIPT_REPRODUCED && first == -1 && detail_len == 0 && detail[0] == '\0');
  EXPECT(strstr(llm42_last_error(), "holds less than") != NULL);
  EXPECT_STATUS(llm42_session_verify_receipt(f16, receipt, size, &outcome, &first, detail, sizeof detail,
                                             &detail_len), LLM42_OK);
  EXPECT(outcome == LLM42_RECEIPT_OTHER_SCHEDULE);
  EXPECT(strstr(detail, "KV type") != NULL && detail_len == strlen(detail));
  /* A detail longer than the buffer is cut to fit (NUL included); its whole length is reported. */
  EXPECT_STATUS(llm42_session_verify_receipt(f16, receipt, size, &outcome, &first, cut, sizeof cut, &detail_len),
                LLM42_OK);
  EXPECT(strlen(cut) == sizeof cut - 1 && memcmp(cut, detail, sizeof cut - 1) == 0 && detail_len == strlen(detail));
  EXPECT_STATUS(llm42_session_verify_receipt(f16, receipt, size, &outcome, NULL, NULL, 0, NULL), LLM42_OK);
  EXPECT_STATUS(llm42_session_verify_receipt(f16, receipt, size, &outcome, NULL, NULL, 4, NULL),
                LLM42_INVALID_ARGUMENT);
  receipt[size / 2] ^= 4;
  EXPECT_STATUS(llm42_session_verify_receipt(other, receipt, size, &outcome, &first, NULL, 0, NULL),
                LLM42_FORMAT_ERROR);
  EXPECT_STATUS(llm42_session_verify_receipt(other, NULL, 4, &outcome, &first, NULL, 0, NULL), LLM42_INVALID_ARGUMENT);
  free(receipt);
  llm42_request_destroy(r);
  {
    /* Top logprobs: 3 per token, the chosen token's entry equal to its logprob; 21 refused. */
    llm42_request_options* ro = NULL;
    llm42_request* t = NULL;
    int32_t ids[3 * 24], toks[24];
    float values[3 * 24], lps[24];
    size_t nt = 0, nl = 0, ntop = 0, i, j;
    EXPECT_STATUS(llm42_request_options_create(&ro), LLM42_OK);
    EXPECT_STATUS(llm42_request_options_set_top_logprobs(ro, 21), LLM42_OUT_OF_RANGE);
    EXPECT_STATUS(llm42_request_options_set_top_logprobs(ro, 3), LLM42_OK);
    EXPECT_STATUS(llm42_request_options_set_logprobs(ro, 1), LLM42_OK);
    EXPECT_STATUS(llm42_request_options_set_prompt_logprobs(ro, 1), LLM42_OK);
    EXPECT_STATUS(llm42_request_options_set_prompt(ro, "Once upon a time", 16), LLM42_OK);
    EXPECT_STATUS(llm42_request_options_set_max_tokens(ro, 24), LLM42_OK);
    EXPECT_STATUS(llm42_request_options_set_deterministic(ro, 1), LLM42_OK);
    EXPECT_STATUS(llm42_request_submit(other, ro, &t), LLM42_OK);
    llm42_request_options_destroy(ro);
    if (t != NULL) {
      EXPECT(llm42_request_wait(t, -1) == LLM42_OK);
      EXPECT_STATUS(llm42_request_top_logprobs(t, ids, values, 2, &ntop), LLM42_OUT_OF_RANGE);
      EXPECT_STATUS(llm42_request_top_logprobs(t, ids, values, 3 * 24, &ntop), LLM42_OK);
      EXPECT_STATUS(llm42_request_output_tokens(t, toks, 24, &nt), LLM42_OK);
      EXPECT_STATUS(llm42_request_logprobs(t, lps, 24, &nl), LLM42_OK);
      EXPECT(ntop == 3 * nt && nl == nt && nt > 0);
      {
        /* The prompt's scores: one per prompt token after the first. */
        int32_t prompt_ids[32];
        float scores[32];
        size_t np = 0, ns = 0;
        EXPECT_STATUS(llm42_session_tokenize(other, "Once upon a time", 16, 1, prompt_ids, 32, &np), LLM42_OK);
        EXPECT_STATUS(llm42_request_prompt_logprobs(t, scores, 32, &ns), LLM42_OK);
        EXPECT(np > 1 && ns == np - 1);
      }
      for (i = 0; i < nt && ntop == 3 * nt; ++i) {
        EXPECT(values[3 * i] >= values[3 * i + 1] && values[3 * i + 1] >= values[3 * i + 2]);
        for (j = 0; j < 3; ++j) {
          if (ids[3 * i + j] == toks[i]) EXPECT(memcmp(&values[3 * i + j], &lps[i], sizeof(float)) == 0);
        }
      }
      llm42_request_destroy(t);
    }
  }
  plain = Submit(other, "Once upon a time", 8, NULL, NULL);
  if (plain != NULL) {
    EXPECT(llm42_request_wait(plain, -1) == LLM42_OK);
    EXPECT_STATUS(llm42_request_receipt(plain, hex, sizeof hex, &n), LLM42_FAILED_PRECONDITION);
    llm42_request_destroy(plain);
  }
  llm42_session_destroy(other);
  llm42_session_destroy(f16);
}

/* Output grammars, logit bias and penalties through the C ABI: a JSON schema constrains a real
 * generation (its output is the schema's JSON and the request finishes STOP); refused grammars,
 * schemas and values give their status and where the error is, and leave the options as they
 * were (the request still runs under the grammar set before). */
static void TestConstrainedOutput(llm42_session* s) {
  llm42_request_options* ro = NULL;
  llm42_request* r = NULL;
  char text[1024];
  size_t n = 0;
  EXPECT_STATUS(llm42_request_options_create(&ro), LLM42_OK);
  EXPECT_STATUS(llm42_request_options_set_prompt(ro, "Once upon a time", 16), LLM42_OK);
  EXPECT_STATUS(llm42_request_options_set_max_tokens(ro, 200), LLM42_OK);
  EXPECT_STATUS(llm42_request_options_set_deterministic(ro, 1), LLM42_OK);
  EXPECT_STATUS(llm42_request_options_set_json_schema(
                    ro, "{\"type\": \"object\", \"properties\": {\"mood\": {\"enum\": [\"happy\", \"sad\"]},"
                        " \"n\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 9}}, \"required\": [\"mood\", \"n\"]}"),
                LLM42_OK);
  /* Refused: a GBNF grammar beside the schema, a malformed grammar (line and column), an
   * unsupported keyword (by name, with its JSON pointer), out-of-range values. */
  EXPECT_STATUS(llm42_request_options_set_grammar(ro, "root ::= \"a\""), LLM42_INVALID_ARGUMENT);
  EXPECT(strstr(llm42_last_error(), "JSON schema") != NULL);
  EXPECT_STATUS(llm42_request_options_set_json_schema(ro, "{\"type\": \"string\", \"format\": \"email\"}"),
                LLM42_INVALID_ARGUMENT);
  EXPECT(strstr(llm42_last_error(), "email") != NULL);
  EXPECT_STATUS(llm42_request_options_set_json_schema(ro, "{\"properties\": {\"a\": {\"uniqueItems\": true}}}"),
                LLM42_INVALID_ARGUMENT);
  EXPECT(strstr(llm42_last_error(), "uniqueItems") != NULL && strstr(llm42_last_error(), "/properties/a") != NULL);
  EXPECT_STATUS(llm42_request_options_set_json_schema(ro, "{\"type\": "), LLM42_INVALID_ARGUMENT);
  EXPECT_STATUS(llm42_request_options_set_logit_bias(ro, 5, NAN), LLM42_OUT_OF_RANGE);
  EXPECT_STATUS(llm42_request_options_set_logit_bias(ro, -1, 1.0f), LLM42_OUT_OF_RANGE);
  EXPECT_STATUS(llm42_request_options_set_repetition_penalty(ro, 1.1f, -1), LLM42_OUT_OF_RANGE);
  EXPECT_STATUS(llm42_request_options_set_repetition_penalty(ro, NAN, 64), LLM42_OUT_OF_RANGE);
  EXPECT_STATUS(llm42_request_options_set_repetition_penalty(ro, 0.0f, 64), LLM42_OUT_OF_RANGE);
  EXPECT_STATUS(llm42_request_options_set_frequency_penalty(ro, INFINITY), LLM42_OUT_OF_RANGE);
  EXPECT_STATUS(llm42_request_options_set_presence_penalty(ro, NAN), LLM42_OUT_OF_RANGE);
  EXPECT_STATUS(llm42_request_options_set_repetition_penalty(ro, 1.1f, 32), LLM42_OK);
  EXPECT_STATUS(llm42_request_options_set_frequency_penalty(ro, 0.1f), LLM42_OK);
  EXPECT_STATUS(llm42_request_options_set_logit_bias(ro, 100, -INFINITY), LLM42_OK);
  EXPECT_STATUS(llm42_request_submit(s, ro, &r), LLM42_OK);
  EXPECT_STATUS(llm42_request_wait(r, -1), LLM42_OK);
  EXPECT_STATUS(llm42_request_status(r), LLM42_OK);
  EXPECT(llm42_request_finish_reason(r) == LLM42_FINISH_STOP);
  EXPECT_STATUS(llm42_request_output_text(r, text, sizeof text - 1, &n), LLM42_OK);
  text[n < sizeof text ? n : sizeof text - 1] = '\0';
  EXPECT(text[0] == '{' && strstr(text, "\"mood\"") != NULL && strstr(text, "\"n\"") != NULL &&
         (strstr(text, "\"happy\"") != NULL || strstr(text, "\"sad\"") != NULL) && text[strlen(text) - 1] == '}');
  {
    int32_t ids[256];
    size_t count = 0;
    EXPECT_STATUS(llm42_request_output_tokens(r, ids, 256, &count), LLM42_OK);
    for (size_t i = 0; i < count && i < 256; ++i) EXPECT(ids[i] != 100); /* banned */
  }
  llm42_request_destroy(r);
  r = NULL;
  /* A bias for a token outside the vocabulary: OUT_OF_RANGE at submit. */
  EXPECT_STATUS(llm42_request_options_set_logit_bias(ro, 1000000, 1.0f), LLM42_OK);
  EXPECT_STATUS(llm42_request_submit(s, ro, &r), LLM42_OUT_OF_RANGE);
  EXPECT(r == NULL && strstr(llm42_last_error(), "1000000") != NULL);
  llm42_request_options_destroy(ro);
  /* A malformed GBNF grammar: the line and column of the error; NULL removes a grammar. */
  EXPECT_STATUS(llm42_request_options_create(&ro), LLM42_OK);
  EXPECT_STATUS(llm42_request_options_set_grammar(ro, "root ::= item\nitem ::= (\"a\" | \"b\"\n"), LLM42_INVALID_ARGUMENT);
  EXPECT(strstr(llm42_last_error(), "line") != NULL);
  EXPECT_STATUS(llm42_request_options_set_grammar(ro, "root ::= undefined-rule"), LLM42_INVALID_ARGUMENT);
  EXPECT(strstr(llm42_last_error(), "undefined-rule") != NULL);
  EXPECT_STATUS(llm42_request_options_set_grammar(ro, "root ::= root \"a\""), LLM42_INVALID_ARGUMENT);
  EXPECT_STATUS(llm42_request_options_set_grammar(ro, "root ::= \"(\" [a-z]* \")\""), LLM42_OK);
  EXPECT_STATUS(llm42_request_options_set_json_schema(ro, "{}"), LLM42_INVALID_ARGUMENT);
  EXPECT_STATUS(llm42_request_options_set_grammar(ro, NULL), LLM42_OK);
  EXPECT_STATUS(llm42_request_options_set_json_schema(ro, "{}"), LLM42_OK);
  EXPECT_STATUS(llm42_request_options_set_json_schema(ro, ""), LLM42_OK);
  EXPECT_STATUS(llm42_request_options_set_grammar(NULL, "root ::= \"a\""), LLM42_INVALID_ARGUMENT);
  llm42_request_options_destroy(ro);
}

int main(int argc, char** argv) {
  TestVersionAndStatusNames();
  g_model = argc > 1 ? argv[1] : NULL;
  if (argc > 3 && strcmp(argv[2], "--continue-saved") == 0) return ContinueSaved(argv[3]);
  if (g_model == NULL || access(g_model, R_OK) != 0) {
    printf("c_api_test: model %s not found; skipping the model tests\n", g_model ? g_model : "(none)");
    printf("%d passed, %d failed\n", g_passed, g_failed);
    return g_failed == 0 ? 77 : 1;
  }
  {
    llm42_session* s = OpenSession(0);
    if (s != NULL) {
      TestGenerateAndReadText(s);
      TestCallback(s);
      TestCancelFromAnotherThread(s);
      TestEndOfStreamStatus(s);
      TestFailureAfterSubmit(s);
      TestGenerateInOneCall(s);
      TestWatcherServesManyStreams(s);
      TestTokenizeDetokenize(s);
      TestApplyChatTemplate(s);
      TestParseChatOutput(s);
      TestSetTools(s);
      TestConstrainedOutput(s);
      llm42_session_destroy(s);
    }
  }
  TestSessionCreateAsync();
  TestDeterministic();
  TestConversation();
  TestSavedConversation();
  TestSavedConversationInAFreshProcess(argv[0]);
  TestReceipts();
  {
    /* A 16-bit KV cache still gives llama.cpp's greedy text (whose own default KV cache is f16). */
    llm42_session* s = OpenSessionKv(0, "f16");
    if (s != NULL) {
      TestGenerateAndReadText(s);
      llm42_session_destroy(s);
    }
  }
  {
    llm42_session* s = OpenSession(64);
    if (s != NULL) {
      TestErrorPaths(s);
      llm42_session_destroy(s);
    }
  }
  printf("%d passed, %d failed\n", g_passed, g_failed);
  return g_failed == 0 ? 0 : 1;
}
