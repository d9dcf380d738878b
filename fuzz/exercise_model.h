#ifndef LLM42_FUZZ_EXERCISE_MODEL_H_
#define LLM42_FUZZ_EXERCISE_MODEL_H_

// What the model-file fuzzers do with a file their loader accepted: the model config, the
// tokenizer (an encode with special tokens and a decode) and the weights built from it.
#include <memory>

#include "lib/format/gguf_reader.h"
#include "lib/model/model_config.h"
#include "lib/model/model_weights.h"
#include "lib/tokenizer/tokenizer.h"

namespace llm42::fuzz {

inline void ExerciseModel(std::unique_ptr<GgufFile> file) {
  (void)ModelConfig::FromGguf(*file);
  auto tokenizer = Tokenizer::FromGguf(*file);
  if (tokenizer.ok()) {
    const auto ids = (*tokenizer)->Encode("Hello, world! \xe2\x82\xac <|endoftext|>", true, true);
    (void)(*tokenizer)->Decode(ids);
  }
  (void)ModelWeights::Load(std::shared_ptr<const GgufFile>(std::move(file)));
}

}  // namespace llm42::fuzz

#endif  // LLM42_FUZZ_EXERCISE_MODEL_H_
