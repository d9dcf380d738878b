// A host program that uses Debian's shared Protobuf and Abseil itself, beside the self-contained
// libllm42 (LLM42_BUNDLED_DEPS): the host compiles llm42's own receipt.proto into its Protobuf, so
// the message llm42.Receipt is registered in the host's runtime too, and then runs a
// deterministic generation with a receipt, verifies it, and parses the receipt's bytes with its
// own copy of the message. With llm42 sharing the host's Protobuf (the default build), the second
// registration of receipt.proto aborts the process as soon as libllm42 loads; with its own hidden
// copy both registries hold their message and everything works.
// Exit 0: passed; 77: skipped (no model); anything else: failed.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "llm42/llm42.h"
#include "receipt.pb.h"

namespace {

int failures = 0;
#define CHECK(c)                                                  \
  do {                                                            \
    if (!(c)) {                                                   \
      std::fprintf(stderr, "%s:%d: failed: %s (%s)\n", __FILE__, __LINE__, #c, llm42_last_error()); \
      ++failures;                                                 \
    }                                                             \
  } while (0)

}  // namespace

int main(int argc, char** argv) {
  std::FILE* model = argc < 2 ? nullptr : std::fopen(argv[1], "rb");
  if (model == nullptr) {
    std::fprintf(stderr, "skipped: the model (../shared/models/stories260K.gguf) is missing\n");
    return 77;
  }
  std::fclose(model);
  // The host's own Protobuf and Abseil, before and after llm42 runs.
  llm42::Receipt mine;
  mine.add_output_tokens(7);
  absl::flat_hash_map<std::string, int> counts;
  counts[absl::StrCat("host-", mine.output_tokens(0))] = 1;

  llm42_session_options* so = nullptr;
  llm42_session* s = nullptr;
  CHECK(llm42_session_options_create(&so) == LLM42_OK);
  CHECK(llm42_session_options_set_model_path(so, argv[1]) == LLM42_OK);
  CHECK(llm42_session_options_set_threads(so, 2) == LLM42_OK);
  CHECK(llm42_session_create(so, &s) == LLM42_OK);
  llm42_session_options_destroy(so);
  if (s == nullptr) return 1;
  llm42_request_options* ro = nullptr;
  llm42_request* r = nullptr;
  CHECK(llm42_request_options_create(&ro) == LLM42_OK);
  CHECK(llm42_request_options_set_prompt(ro, "Once upon a time", 16) == LLM42_OK);
  CHECK(llm42_request_options_set_max_tokens(ro, 16) == LLM42_OK);
  CHECK(llm42_request_options_set_deterministic(ro, 1) == LLM42_OK);
  CHECK(llm42_request_submit(s, ro, &r) == LLM42_OK);
  llm42_request_options_destroy(ro);
  if (r == nullptr) return 1;
  CHECK(llm42_request_wait(r, -1) == LLM42_OK);
  size_t size = 0, n = 0;
  CHECK(llm42_request_receipt(r, nullptr, 0, &size) == LLM42_OUT_OF_RANGE);
  std::vector<char> receipt(size);
  CHECK(llm42_request_receipt(r, receipt.data(), size, &n) == LLM42_OK);
  llm42_receipt_outcome outcome = LLM42_RECEIPT_OTHER_OUTPUT;
  int64_t first = 0;
  CHECK(llm42_session_verify_receipt(s, receipt.data(), n, &outcome, &first, nullptr, 0, nullptr) == LLM42_OK);
  CHECK(outcome == LLM42_RECEIPT_REPRODUCED);
  // The receipt llm42's Protobuf wrote, read by the host's.
  llm42::Receipt parsed;
  CHECK(parsed.ParseFromArray(receipt.data(), static_cast<int>(n)));
  CHECK(parsed.output_tokens_size() == 16);
  CHECK(parsed.format() == 1);
  counts[absl::StrCat("tokens-", parsed.output_tokens_size())] = 1;
  CHECK(counts.size() == 2 && mine.output_tokens(0) == 7);
  llm42_request_destroy(r);
  llm42_session_destroy(s);
  std::printf("%s: %d failed\n", failures == 0 ? "passed" : "FAILED", failures);
  return failures == 0 ? 0 : 1;
}
