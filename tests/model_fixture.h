#ifndef LLM42_TESTS_MODEL_FIXTURE_H_
#define LLM42_TESTS_MODEL_FIXTURE_H_

#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/format/gguf_reader.h"
#include "lib/kv/kv_cache.h"
#include "lib/maker/gguf_writer.h"
#include "lib/model/model_runner.h"
#include "lib/maker/model_maker.h"
#include "tests/test_util.h"

namespace llm42::testing {

// A copy of the GGUF at `src`, written to the test's temporary directory as `name`: each
// metadata value passes through `edit` (which may change it, or return false to drop it), then
// `add` may append keys; the tensors are copied unchanged. Empty when it cannot be written.
inline std::string CopyModel(const std::string& src, const std::string& name,
                      const std::function<bool(const std::string& key, GgufValue& value)>& edit,
                      const std::function<void(GgufWriter&)>& add = nullptr) {
  auto file = GgufFile::Open(src);
  if (!file.ok()) return std::string();
  GgufWriter w;
  for (const auto& [key, value] : (*file)->metadata()) {
    GgufValue v = value;
    if (edit(key, v)) w.AddValue(key, v);
  }
  if (add) add(w);
  for (const GgufTensorInfo& t : (*file)->tensors()) {
    w.AddTensor(t.name, t.type, t.dims, std::vector<uint8_t>(t.data, t.data + t.n_bytes));
  }
  const std::string path = TempPath(name);
  return w.WriteFile(path).ok() ? path : std::string();
}

// A random-weight model with the Llama 2 vocabulary, generated once into the build tree: by
// default `tiny` (hidden 256, 4 layers) in f32; quantized types get the same shape with a
// feed-forward width of whole 32-weight blocks. Empty when the vocabulary in ../shared is
// missing.
inline std::string TinyModelPath(GgmlType dtype = GgmlType::kF32) {
  const std::string vocab = SharedPath("vocab/ggml-vocab-llama-spm.gguf");
  if (!std::filesystem::exists(vocab)) return std::string();
  const char* type_name = GetGgmlTypeInfo(static_cast<uint32_t>(dtype))->name;
  const std::string out = TempPath(std::string("tiny-") + type_name + ".gguf");
  if (!std::filesystem::exists(out)) {
    ModelPreset preset = ModelPresets()[0];
    if (GetGgmlTypeInfo(static_cast<uint32_t>(dtype))->block_size > 1) preset.n_ff = 704;
    // Test cases run as parallel processes: write privately, then rename into place.
    const std::string partial = out + "." + std::to_string(::getpid());
    const absl::Status s = MakeModel(preset, dtype, vocab, 42, partial);
    EXPECT_TRUE(s.ok()) << s;
    PublishFile(partial, out);
  }
  return out;
}

// The `tiny` shape (hidden 256, 4 layers, so fast and fixed really differ) with the 512-token
// vocabulary of ../shared/models/stories260K.gguf: the engine-level determinism and batching
// tests run many requests under the sanitizers, and with Llama 2's 32000 tokens the output
// layer and sampling cost four times the rest of the model. Empty when the file is missing.
inline std::string SmallVocabTinyModelPath(const std::string& preset_name = "tiny", GgmlType dtype = GgmlType::kF32) {
  const std::string vocab = SharedPath("models/stories260K.gguf");
  if (!std::filesystem::exists(vocab)) return std::string();
  const char* type_name = GetGgmlTypeInfo(static_cast<uint32_t>(dtype))->name;
  const std::string out = TempPath(preset_name + "-v512-" + type_name + ".gguf");
  if (!std::filesystem::exists(out)) {
    const ModelPreset* preset = nullptr;
    for (const ModelPreset& p : ModelPresets()) {
      if (p.name == preset_name) preset = &p;
    }
    EXPECT_NE(preset, nullptr) << preset_name;
    if (preset == nullptr) return std::string();
    const std::string partial = out + "." + std::to_string(::getpid());
    const absl::Status s = MakeModel(*preset, dtype, vocab, 42, partial);
    EXPECT_TRUE(s.ok()) << s;
    PublishFile(partial, out);
  }
  return out;
}

// `model` on `be`, its KV storage sized for `cache` (and a recurrent model's state, a slot per
// KV-cache sequence id below kRecurrentSequences: FreshStateRows); nullptr (and a test failure) on
// an error.
inline constexpr int64_t kRecurrentSequences = 64;
inline std::unique_ptr<ModelRunner> MakeRunner(const ModelWeights& model, Backend& be, const KvCache& cache) {
  auto runner = ModelRunner::Create(model, be);
  EXPECT_TRUE(runner.ok()) << runner.status();
  if (!runner.ok()) return nullptr;
  absl::Status st = (*runner)->AllocateKv(cache);
  if (st.ok() && model.config().n_recurrent() > 0) st = (*runner)->AllocateRecurrent(kRecurrentSequences + 1);
  EXPECT_TRUE(st.ok()) << st;
  return st.ok() ? std::move(runner).value() : nullptr;
}

// The recurrent rows of a batch whose sequences each start in it or continue from their last
// batch (MakeRunner's slots: sequence id s in slot s, from zeros at position 0).
inline std::vector<RecurrentRow> FreshStateRows(std::span<const int32_t> seqs, std::span<const int32_t> positions) {
  std::vector<RecurrentRow> rows;
  for (size_t i = 0; i < seqs.size(); ++i) {
    rows.push_back({seqs[i], positions[i] == 0 ? RecurrentRow::kZeroState : RecurrentRow::kNone});
  }
  return rows;
}

}  // namespace llm42::testing

#define LLM42_TINY_MODEL_OR_SKIP(var)                                                    \
  const std::string var = ::llm42::testing::TinyModelPath();                             \
  if (var.empty()) {                                                                     \
    GTEST_SKIP() << "the Llama 2 vocabulary under ../shared/vocab is missing; it is "    \
                    "needed to generate the test model";                                 \
  }

#define LLM42_SMALL_VOCAB_TINY_MODEL_OR_SKIP(var)                                        \
  const std::string var = ::llm42::testing::SmallVocabTinyModelPath();                   \
  if (var.empty()) {                                                                     \
    GTEST_SKIP() << "../shared/models/stories260K.gguf is missing; its vocabulary is "   \
                    "needed to generate the test model";                                 \
  }

#endif  // LLM42_TESTS_MODEL_FIXTURE_H_
