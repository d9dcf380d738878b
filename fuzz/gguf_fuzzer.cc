// Arbitrary bytes as a GGUF file: the reader, then the model config, the tokenizer and the weights
// built from whatever it accepted (fuzz/exercise_model.h). Any crash, leak or sanitizer report is a bug.
#include <cstdint>

#include "fuzz/exercise_model.h"
#include "fuzz/fuzz_file.h"
#include "lib/format/gguf_reader.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = llm42::GgufFile::Open(llm42::fuzz::WriteScratch(data, size, ".gguf"));
  if (file.ok()) llm42::fuzz::ExerciseModel(std::move(file).value());
  return 0;
}
