#include "lib/model/arch/architecture.h"

#include <algorithm>
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
const Architecture& Qwen3MoeArchitecture();
const Architecture& Qwen35MoeArchitecture();
const Architecture& GptOssArchitecture();

std::span<const Architecture* const> Architectures() {
  static const Architecture* const all[] = {&LlamaArchitecture(),  &Qwen2Architecture(),  &Qwen3Architecture(),
                                            &Gemma2Architecture(), &Gemma3Architecture(), &Gemma4Architecture(),
                                            &Phi3Architecture(),   &Mistral3Architecture(), &Qwen35Architecture(),
                                            &Qwen3MoeArchitecture(), &Qwen35MoeArchitecture(), &GptOssArchitecture()};
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

absl::StatusOr<int64_t> IntKeyIn(const GgufFile& f, const std::string& key, int64_t lo, int64_t hi) {
  LLM42_ASSIGN_OR_RETURN(const int64_t v, f.GetInt(key));
  if (v < lo || v > hi) return FormatError("key '", key, "' = ", v, " is out of range (", lo, "..", hi, ")");
  return v;
}

void SlideByPattern(ModelConfig& c, int64_t pattern) {
  c.layer_sliding.assign(static_cast<size_t>(c.n_layer), 0);
  for (int64_t l = 0; l < c.n_layer; ++l) c.layer_sliding[static_cast<size_t>(l)] = l % pattern < pattern - 1;
}

namespace {

// {arch}.expert_count and what goes with it (llama.cpp's keys and fallbacks).
absl::Status ReadExpertKeys(const GgufFile& f, const ArchitectureData& d, ModelConfig& c) {
  const std::string a = c.architecture + ".";
  const std::string count_key = a + "expert_count";
  if (d.experts == Experts::kRequired) {
    LLM42_ASSIGN_OR_RETURN(c.n_expert, IntKeyIn(f, count_key, 1, 512));
  } else if (f.Find(count_key) != nullptr) {
    LLM42_ASSIGN_OR_RETURN(c.n_expert, IntKeyIn(f, count_key, 0, 512));
  }
  if (c.n_expert == 0) return absl::OkStatus();  // a dense model
  if (d.experts == Experts::kNone) {
    return UnsupportedError("key '", count_key, "' = ", c.n_expert, ": ", std::string(d.name),
                            "'s mixture-of-experts layers are not supported yet");
  }
  ExpertRouting& r = c.routing;
  r = d.routing;
  r.n_expert = c.n_expert;
  LLM42_ASSIGN_OR_RETURN(r.n_used, IntKeyIn(f, a + "expert_used_count", 1, std::min<int64_t>(c.n_expert, 256)));
  c.n_ff_exp = d.experts_full_width ? c.n_ff : c.n_ff / r.n_used;
  if (!d.experts_full_width && f.Find(a + "expert_feed_forward_length") != nullptr) {
    LLM42_ASSIGN_OR_RETURN(c.n_ff_exp, IntKeyIn(f, a + "expert_feed_forward_length", 1, 1 << 20));
  }
  if (c.n_ff_exp <= 0) return FormatError("key '", a, "feed_forward_length' leaves experts of width ", c.n_ff_exp);
  c.n_ff_shexp = c.n_ff;
  if (f.Find(a + "expert_shared_feed_forward_length") != nullptr) {
    LLM42_ASSIGN_OR_RETURN(c.n_ff_shexp, IntKeyIn(f, a + "expert_shared_feed_forward_length", 1, 1 << 20));
  }
  if (const std::string key = a + "expert_weights_scale"; f.Find(key) != nullptr) {
    LLM42_ASSIGN_OR_RETURN(const double scale, f.GetFloat(key));
    if (!(scale >= 0 && scale < 1e4)) return FormatError("key '", key, "' = ", scale, " is out of range (0..1e4)");
    r.scale = scale == 0 ? 1.0f : static_cast<float>(scale);
  }
  return absl::OkStatus();
}

}  // namespace

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
  return ReadExpertKeys(f, d, c);
}

}  // namespace llm42
