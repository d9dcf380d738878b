// Arbitrary bytes as a text-format llm42.SessionConfig (SessionOptions::LoadConfig): parsed,
// validated and applied, or refused with a status that leaves the options unchanged.
#include <cstdint>
#include <cstdlib>

#include "fuzz/fuzz_file.h"
#include "lib/engine/options.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  llm42::SessionOptions options;
  const llm42::SessionOptions before = options;
  const absl::Status st = options.LoadConfig(llm42::fuzz::WriteScratch(data, size, ".txtpb"));
  if (!st.ok() && (options.threads != before.threads || options.model_path != before.model_path ||
                   options.determinism.window != before.determinism.window)) {
    std::abort();  // a refused file changed the options
  }
  if (st.ok() && !options.Validate().ok()) std::abort();  // accepted what the rules refuse
  return 0;
}
