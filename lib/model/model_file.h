#ifndef LLM42_MODEL_MODEL_FILE_H_
#define LLM42_MODEL_MODEL_FILE_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "lib/format/gguf_reader.h"

namespace llm42 {

// Opens `path` as a model: a GGUF file, or a Hugging Face directory of any architecture llm42
// has (OpenHfDirectory with every architecture's table, lib/model/arch).
absl::StatusOr<std::unique_ptr<GgufFile>> OpenModel(const std::string& path);

}  // namespace llm42

#endif  // LLM42_MODEL_MODEL_FILE_H_
