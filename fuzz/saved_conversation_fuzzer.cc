// Arbitrary bytes as a saved-conversation file.
#include <cstdint>

#include "fuzz/fuzz_file.h"
#include "lib/engine/saved_conversation.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)llm42::ReadSavedConversation(llm42::fuzz::WriteScratch(data, size, ".llm42"));
  return 0;
}
