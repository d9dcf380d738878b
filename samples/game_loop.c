/* A game loop that talks to llm42 without ever blocking a frame: `game_loop MODEL`.
 *
 * Each simulated 60 Hz frame polls the NPC's request with a zero timeout (read_text returns
 * LLM42_TIMEOUT at once when nothing new was verified) and renders whatever arrived. The NPC's
 * line is a deterministic request with a fixed seed, so every run of the game shows the same
 * line, bit for bit, even though a non-deterministic ambient request shares the engine's
 * batches. Then the player answers and the NPC's next turn continues the conversation
 * (llm42_request_options_set_parent: its history comes from the prefix cache, not a new
 * prefill) as a tool call the game acts on: llm42_request_options_set_tools makes the reply one
 * call of kTools (give_item, move_to, say) with arguments valid under the tool's schema, in the
 * syntax of the session's chat template (kTemplate, Hermes' <tool_call>, here set for the session
 * since the sample's model has none), and llm42_session_parse_chat_output reads it back, so the
 * game never parses free text or retries. Prints both turns, the call, the frames they took and
 * the slowest poll. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "llm42/llm42.h"

#define CHECK(call)                                                                     \
  do {                                                                                  \
    llm42_status s_ = (call);                                                           \
    if (s_ != LLM42_OK) {                                                               \
      fprintf(stderr, "%s: %s: %s\n", #call, llm42_status_name(s_), llm42_last_error()); \
      return 1;                                                                         \
    }                                                                                   \
  } while (0)

static double NowMs(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

/* What the NPC may do on its turn: OpenAI tool objects. */
static const char kTools[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"give_item\", \"description\": \"Gives the hero an item\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"item\": {\"enum\": [\"sword\", \"shield\", \"potion\", \"map\"]}},"
    " \"required\": [\"item\"], \"additionalProperties\": false}}},"
    " {\"type\": \"function\", \"function\": {\"name\": \"move_to\", \"description\": \"Walks somewhere\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"place\": {\"enum\": [\"village\", \"tower\", \"forest\"]}},"
    " \"required\": [\"place\"], \"additionalProperties\": false}}},"
    " {\"type\": \"function\", \"function\": {\"name\": \"say\", \"description\": \"Speaks a line\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"line\": {\"type\": \"string\", \"maxLength\": 40}},"
    " \"required\": [\"line\"], \"additionalProperties\": false}}}]";

/* A chat template whose assistant turns write tool calls as Hermes' <tool_call> JSON (the syntax
 * the session then generates and parses calls in). */
static const char kTemplate[] =
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
    "{%- for c in m.tool_calls or [] %}<tool_call>\n{{ c.function | tojson }}\n</tool_call>{% endfor %}{% endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}";

/* parent: the request this one continues, or NULL; tools: the tools its reply must call one of,
 * or NULL. */
static llm42_status Submit(llm42_session* s, llm42_request* parent, const char* prompt, int deterministic,
                           const char* tools, llm42_request** out) {
  llm42_request_options* ro = NULL;
  llm42_status st = llm42_request_options_create(&ro);
  if (st == LLM42_OK && parent != NULL) st = llm42_request_options_set_parent(ro, parent);
  if (st == LLM42_OK) st = llm42_request_options_set_prompt(ro, prompt, strlen(prompt));
  if (st == LLM42_OK) st = llm42_request_options_set_max_tokens(ro, tools != NULL ? 160 : 40);
  /* "required" and one call: the reply is a call, and ends with it. */
  if (st == LLM42_OK && tools != NULL) st = llm42_request_options_set_tools(ro, s, tools, "required", 0);
  if (st == LLM42_OK && tools != NULL) st = llm42_request_options_set_repetition_penalty(ro, 1.2f, 64);
  if (st == LLM42_OK) st = llm42_request_options_set_temperature(ro, 0.8f);
  if (st == LLM42_OK && deterministic) st = llm42_request_options_set_seed(ro, 2024);
  if (st == LLM42_OK) st = llm42_request_options_set_deterministic(ro, deterministic);
  if (st == LLM42_OK) st = llm42_request_submit(s, ro, out);
  llm42_request_options_destroy(ro);
  return st;
}

/* Polls `r` once per simulated 60 Hz frame, never blocking, until it has finished; its text goes
 * to line[capacity]. Returns 0, or 1 on a read error. */
static int PlayLine(llm42_request* r, char* line, size_t capacity, int* frames, double* slowest_poll) {
  size_t used = 0;
  for (;; ++*frames) {
    const double start = NowMs();
    char buf[256];
    size_t n = 0;
    const llm42_status st = llm42_request_read_text(r, buf, sizeof buf, &n, /*timeout_ms=*/0);
    const double poll = NowMs() - start;
    if (poll > *slowest_poll) *slowest_poll = poll;
    if (st == LLM42_OK && n == 0) { /* finished and fully read: now ask how it ended */
      const llm42_status how = llm42_request_status(r);
      if (how == LLM42_OK) break;
      fprintf(stderr, "the line ended with %s: %s\n", llm42_status_name(how), llm42_last_error());
      return 1;
    }
    if (st == LLM42_OK && used + n < capacity) {
      memcpy(line + used, buf, n);
      used += n;
    } else if (st != LLM42_TIMEOUT && st != LLM42_OK) {
      fprintf(stderr, "read_text: %s\n", llm42_last_error());
      return 1;
    }
    /* ... simulate and render the rest of the frame ... */
    const struct timespec frame_time = {0, 16 * 1000 * 1000};
    nanosleep(&frame_time, NULL);
  }
  line[used] = '\0';
  return 0;
}

/* The string value of the first "key" in JSON the grammar shaped (no escapes in the values the
 * game acts on: the tools' names and their enums' values); "" when absent. */
static void Field(const char* json, const char* key, char* out, size_t capacity) {
  char quoted[64];
  snprintf(quoted, sizeof quoted, "\"%s\"", key);
  out[0] = '\0';
  const char* at = strstr(json, quoted);
  if (at == NULL || (at = strchr(at + strlen(quoted), '"')) == NULL) return;
  const char* end = strchr(at + 1, '"');
  if (end == NULL) return;
  const size_t n = (size_t)(end - at - 1) < capacity - 1 ? (size_t)(end - at - 1) : capacity - 1;
  memcpy(out, at + 1, n);
  out[n] = '\0';
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODEL.gguf\n", argv[0]);
    return 2;
  }
  llm42_session_options* so = NULL;
  llm42_session* session = NULL;
  llm42_request *npc = NULL, *ambient = NULL, *reply = NULL;
  char line[4096], next[4096];
  double slowest_poll = 0;
  int frames = 0;
  CHECK(llm42_session_options_create(&so));
  CHECK(llm42_session_options_set_model_path(so, argv[1]));
  CHECK(llm42_session_options_set_threads(so, 1)); /* leave the other cores to the game */
  CHECK(llm42_session_options_set_chat_template(so, kTemplate));
  CHECK(llm42_session_create(so, &session));
  CHECK(Submit(session, NULL, "The old wizard said", 1, NULL, &npc));
  CHECK(Submit(session, NULL, "Far away, the wind", 0, NULL, &ambient));
  if (PlayLine(npc, line, sizeof line, &frames, &slowest_poll) != 0) return 1;
  printf("NPC: The old wizard said%s\n", line);
  /* The player answers; the NPC's next turn continues the conversation, as a tool call. */
  CHECK(Submit(session, npc, " The hero asked about the road. The wizard answered:", 1, kTools, &reply));
  if (PlayLine(reply, next, sizeof next, &frames, &slowest_poll) != 0) return 1;
  if (llm42_request_finish_reason(reply) != LLM42_FINISH_STOP) {
    fprintf(stderr, "the NPC's call was cut short: %s\n", next); /* max_tokens before the call closed */
    return 1;
  }
  {
    char parsed[4096], name[32], arg[64];
    size_t n = 0;
    CHECK(llm42_session_parse_chat_output(session, next, strlen(next), parsed, sizeof parsed - 1, &n));
    parsed[n] = '\0';
    printf("NPC, next turn: %s\n", parsed);
    Field(parsed, "name", name, sizeof name);
    if (strcmp(name, "give_item") == 0) {
      Field(parsed, "item", arg, sizeof arg);
      printf("action: give_item: the wizard gives the hero a %s\n", arg);
    } else if (strcmp(name, "move_to") == 0) {
      Field(parsed, "place", arg, sizeof arg);
      printf("action: move_to: the wizard walks to the %s\n", arg);
    } else {
      Field(parsed, "line", arg, sizeof arg);
      printf("action: say: \"%s\"\n", arg);
    }
  }
  {
    uint64_t seed = 0;
    CHECK(llm42_request_effective_seed(npc, &seed));
    printf("frames: %d, slowest poll: %.3f ms, seed %llu\n", frames, slowest_poll, (unsigned long long)seed);
  }
  llm42_request_destroy(reply);
  llm42_request_destroy(npc);
  llm42_request_destroy(ambient);
  llm42_session_destroy(session);
  llm42_session_options_destroy(so);
  return 0;
}
