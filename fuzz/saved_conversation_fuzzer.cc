// Arbitrary bytes as a saved-conversation file: as they are, and with the magic prepended and a
// valid checksum appended, so that mutations get past the checksum to the field checks.
#include <cstdint>
#include <cstring>
#include <string>

#include "fuzz/fuzz_file.h"
#include "lib/engine/saved_conversation.h"
#include "lib/util/stable_hash.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  (void)llm42::ReadSavedConversation(llm42::fuzz::WriteScratch(data, size, ".llm42"));
  std::string fixed = "LLM42CV2";
  fixed.append(reinterpret_cast<const char*>(data), size);
  const uint64_t sum = llm42::StableHash().Mix(fixed.data(), fixed.size()).value();
  fixed.append(reinterpret_cast<const char*>(&sum), sizeof sum);
  (void)llm42::ReadSavedConversation(
      llm42::fuzz::WriteScratch(reinterpret_cast<const uint8_t*>(fixed.data()), fixed.size(), ".llm42"));
  return 0;
}
