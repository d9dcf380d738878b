#ifndef LLM42_TESTS_MODEL_FIXTURE_H_
#define LLM42_TESTS_MODEL_FIXTURE_H_

#include <unistd.h>

#include <filesystem>
#include <string>

#include "gtest/gtest.h"
#include "lib/model/model_maker.h"
#include "tests/test_util.h"

namespace llm42::testing {

// The `tiny` random-weight model (hidden 256, 4 layers, the Llama 2 vocabulary), generated once
// into the build tree. Empty when the vocabulary in ../shared is missing.
inline std::string TinyModelPath() {
  static const std::string path = [] {
    const std::string vocab = SharedPath("vocab/ggml-vocab-llama-spm.gguf");
    if (!std::filesystem::exists(vocab)) return std::string();
    const std::string out = TempPath("tiny-f32.gguf");
    if (!std::filesystem::exists(out)) {
      // Test cases run as parallel processes: write privately, then rename into place.
      const std::string partial = out + "." + std::to_string(::getpid());
      const absl::Status s = MakeModel(ModelPresets()[0], GgmlType::kF32, vocab, 42, partial);
      EXPECT_TRUE(s.ok()) << s;
      std::filesystem::rename(partial, out);
    }
    return out;
  }();
  return path;
}

}  // namespace llm42::testing

#define LLM42_TINY_MODEL_OR_SKIP(var)                                                    \
  const std::string var = ::llm42::testing::TinyModelPath();                             \
  if (var.empty()) {                                                                     \
    GTEST_SKIP() << "the Llama 2 vocabulary under ../shared/vocab is missing; it is "    \
                    "needed to generate the test model";                                 \
  }

#endif  // LLM42_TESTS_MODEL_FIXTURE_H_
