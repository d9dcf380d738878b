/* Streams a completion through the C API: llm42 sample, `stream_c MODEL [PROMPT]`. */
#include <stdio.h>
#include <string.h>

#include "llm42/llm42.h"

#define CHECK(call)                                                                   \
  do {                                                                                \
    llm42_status s_ = (call);                                                         \
    if (s_ != LLM42_OK) {                                                             \
      fprintf(stderr, "%s failed: %s: %s\n", #call, llm42_status_name(s_), llm42_last_error()); \
      return 1;                                                                       \
    }                                                                                 \
  } while (0)

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODEL.gguf [PROMPT]\n", argv[0]);
    return 2;
  }
  const char* prompt = argc > 2 ? argv[2] : "Once upon a time";
  llm42_session_options* so = NULL;
  llm42_session* session = NULL;
  llm42_request_options* ro = NULL;
  llm42_request* request = NULL;
  CHECK(llm42_session_options_create(&so));
  CHECK(llm42_session_options_set_model_path(so, argv[1]));
  CHECK(llm42_session_create(so, &session));
  CHECK(llm42_request_options_create(&ro));
  CHECK(llm42_request_options_set_prompt(ro, prompt, strlen(prompt)));
  CHECK(llm42_request_options_set_max_tokens(ro, 64));
  CHECK(llm42_request_submit(session, ro, &request));
  printf("%s", prompt);
  for (;;) {
    char buf[256];
    size_t n = 0;
    CHECK(llm42_request_read_text(request, buf, sizeof buf, &n, -1));
    if (n == 0) break; /* finished and fully read */
    fwrite(buf, 1, n, stdout);
    fflush(stdout);
  }
  printf("\n");
  CHECK(llm42_request_status(request)); /* a failed or cancelled request's stream ends the same way */
  llm42_request_destroy(request);
  llm42_request_options_destroy(ro);
  llm42_session_destroy(session);
  llm42_session_options_destroy(so);
  return 0;
}
