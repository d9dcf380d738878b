#include "lib/model/arch/architecture.h"

#include "absl/strings/str_cat.h"
#include "lib/format/gguf_reader.h"
#include "lib/util/status.h"

namespace llm42 {

// Each defined in its own file of lib/model/arch.
const Architecture& LlamaArchitecture();
const Architecture& Qwen2Architecture();
const Architecture& Qwen3Architecture();
const Architecture& Gemma2Architecture();
const Architecture& Gemma3Architecture();
const Architecture& Phi3Architecture();

namespace {

const Architecture* const* All() {
  static const Architecture* const all[] = {&LlamaArchitecture(),  &Qwen2Architecture(),  &Qwen3Architecture(),
                                            &Gemma2Architecture(), &Gemma3Architecture(), &Phi3Architecture(),
                                            nullptr};
  return all;
}

}  // namespace

const Architecture* FindArchitecture(std::string_view name) {
  for (const Architecture* const* a = All(); *a != nullptr; ++a) {
    if ((*a)->name() == name) return *a;
  }
  return nullptr;
}

std::string ArchitectureNames() {
  std::string names;
  for (const Architecture* const* a = All(); *a != nullptr; ++a) absl::StrAppend(&names, names.empty() ? "" : ", ", std::string((*a)->name()));
  return names;
}

absl::Status ReadSlidingWindow(const GgufFile& f, ModelConfig& c, bool optional) {
  const std::string key = c.architecture + ".attention.sliding_window";
  if (f.Find(key) == nullptr) {
    if (optional) return absl::OkStatus();
    return FormatError("missing key '", key, "'");
  }
  LLM42_ASSIGN_OR_RETURN(const int64_t window, f.GetInt(key));
  if (window <= 0 || window > c.n_ctx_train) {
    return FormatError("key '", key, "' = ", window, " is out of range (1..", c.n_ctx_train, ", the training context)");
  }
  c.sliding_window = window;
  return absl::OkStatus();
}

}  // namespace llm42
