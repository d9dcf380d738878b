// Arbitrary bytes as a Hugging Face directory: config.json, tokenizer.json, vocab.json,
// merges.txt, tokenizer_config.json and model.safetensors, separated by kPartSeparator (an empty
// part leaves its file out). The directory loader, then the model config, tokenizer and weights
// built from whatever it accepted. Any crash, leak or sanitizer report is a bug.
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>

#include "fuzz/exercise_model.h"
#include "fuzz/fuzz_file.h"
#include "fuzz/fuzz_parts.h"
#include "lib/format/hf_loader.h"
#include "lib/model/arch/architecture.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const char* kFiles[] = {"config.json", "tokenizer.json", "vocab.json",
                                 "merges.txt", "tokenizer_config.json", "model.safetensors"};
  constexpr size_t kCount = sizeof kFiles / sizeof kFiles[0];
  const std::string& dir = llm42::fuzz::ScratchPath(".hf");
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::vector<std::string> parts = llm42::fuzz::SplitParts(data, size, kCount);
  for (size_t i = 0; i < kCount; ++i) {
    if (parts[i].empty()) continue;
    std::ofstream(dir + "/" + kFiles[i], std::ios::binary) << parts[i];
  }
  auto file = llm42::OpenHfDirectory(dir, llm42::HfFamilies());
  if (file.ok()) llm42::fuzz::ExerciseModel(std::move(file).value());
  return 0;
}
