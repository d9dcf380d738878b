#include "lib/model/arch/architecture.h"

#include <memory>

#include "absl/strings/str_cat.h"
#include "lib/format/gguf_reader.h"
#include "lib/util/status.h"

namespace llm42 {

// Each defined in its own file of lib/model/arch.
const Architecture& LlamaArchitecture();
const Architecture& Qwen2Architecture();
const Architecture& Qwen3Architecture();
const Architecture& Qwen35Architecture();
const Architecture& Gemma2Architecture();
const Architecture& Gemma3Architecture();
const Architecture& Gemma4Architecture();
const Architecture& Phi3Architecture();
const Architecture& Mistral3Architecture();

std::span<const Architecture* const> Architectures() {
  static const Architecture* const all[] = {&LlamaArchitecture(),  &Qwen2Architecture(),  &Qwen3Architecture(),
                                            &Gemma2Architecture(), &Gemma3Architecture(), &Gemma4Architecture(),
                                            &Phi3Architecture(),   &Mistral3Architecture(), &Qwen35Architecture()};
  return all;
}

const Architecture* FindArchitecture(std::string_view name) {
  for (const Architecture* a : Architectures()) {
    if (a->name() == name) return a;
  }
  return nullptr;
}

std::string ArchitectureNames() {
  std::string names;
  for (const Architecture* a : Architectures()) absl::StrAppend(&names, names.empty() ? "" : ", ", std::string(a->name()));
  return names;
}

std::span<const HfFamily* const> HfFamilies() {
  struct Tables {
    std::vector<HfFamily> families;
    std::vector<const HfFamily*> pointers;
  };
  static const Tables* const tables = [] {
    auto* t = new Tables;
    for (const Architecture* a : Architectures()) {
      const ArchitectureData& d = a->data();
      HfFamily f = d.hf;
      f.arch = d.name;
      f.sliding = d.window != Window::kNone;
      for (const ArchKey& k : d.keys) {
        if (!k.hf.empty()) f.keys.push_back({k.hf, k.suffix, k.fallback});
      }
      t->families.push_back(std::move(f));
    }
    for (const HfFamily& f : t->families) t->pointers.push_back(&f);
    return t;
  }();
  return tables->pointers;
}

absl::Status ReadArchitectureKeys(const GgufFile& f, const ArchitectureData& d, ModelConfig& c) {
  c.rope_neox = d.rope_neox;
  const std::string a = c.architecture + ".";
  if (d.window != Window::kNone) {
    const std::string key = a + "attention.sliding_window";
    if (f.Find(key) != nullptr) {
      LLM42_ASSIGN_OR_RETURN(const int64_t window, f.GetInt(key));
      if (window <= 0 || window > c.n_ctx_train) {
        return FormatError("key '", key, "' = ", window, " is out of range (1..", c.n_ctx_train, ", the training context)");
      }
      c.sliding_window = window;
    } else if (d.window == Window::kRequired) {
      return FormatError("missing key '", key, "'");
    }
  }
  for (const ArchKey& k : d.keys) {
    const std::string key = a + std::string(k.suffix);
    c.*k.field = k.fallback;
    if (f.Find(key) == nullptr) continue;
    LLM42_ASSIGN_OR_RETURN(const double v, f.GetFloat(key));
    if (!(v > k.lo && v < k.hi)) return FormatError("key '", key, "' = ", v, " is out of range (", k.lo, "..", k.hi, ")");
    c.*k.field = static_cast<float>(v);
  }
  return absl::OkStatus();
}

}  // namespace llm42
