// The architecture seam (lib/model/arch): what a family is lives in its one file, as data that the
// loaders, make-model and Hugging Face conversion consume. No architecture is named anywhere else
// in the library, tools, header or bindings; every tiny preset's file, written from the data,
// loads through the data, with the preset's key values; the Hugging Face tables are the data's.
#include "lib/model/arch/architecture.h"

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "lib/format/gguf_reader.h"
#include "lib/maker/model_maker.h"
#include "lib/model/model_config.h"
#include "lib/model/model_weights.h"
#include "tests/test_util.h"

namespace llm42 {
namespace {

namespace fs = std::filesystem;

// Where a quoted architecture name means something else: the GGUF tokenizer model "llama"
// (SentencePiece) and the pre-tokenizer "qwen2" (tokenizer.ggml.pre), and llama.cpp's name.
bool OtherMeaning(const std::string& relative, const std::string& line) {
  if (relative.starts_with("lib/tokenizer/")) return true;
  for (const char* tokenizer_context :
       {"spec.model = \"llama\"", "std::string(\"qwen2\")", "\"llama\" (SentencePiece)", "\"llama\" tokenizer",
        "GGUF's \"llama\" model", "\"llama.cpp"}) {
    if (line.find(tokenizer_context) != std::string::npos) return true;
  }
  return false;
}

// Checked to fail: a line `if (arch == "gemma2")` appended to lib/format/hf_loader.cc is found.
TEST(ArchitectureSeam, NoArchitectureIsNamedOutsideItsFile) {
  const fs::path root = LLM42_SOURCE_DIR;
  std::vector<std::string> found;
  int files = 0;
  for (const char* dir : {"lib", "tools/llm42", "include", "bindings", "samples"}) {
    for (const auto& entry : fs::recursive_directory_iterator(root / dir)) {
      if (!entry.is_regular_file()) continue;
      const std::string relative = fs::relative(entry.path(), root).generic_string();
      if (relative.starts_with("lib/model/arch/")) continue;
      const std::string ext = entry.path().extension().string();
      if (ext != ".cc" && ext != ".h" && ext != ".hpp" && ext != ".cu" && ext != ".cuh" && ext != ".i" &&
          ext != ".c" && ext != ".py" && ext != ".java" && ext != ".cs") {
        continue;
      }
      ++files;
      std::ifstream in(entry.path());
      std::string line;
      for (int number = 1; std::getline(in, line); ++number) {
        for (const Architecture* a : Architectures()) {
          const std::string name(a->name());
          for (const std::string& quoted : {"\"" + name + "\"", "\"" + name + ".", "'" + name + "'"}) {
            if (line.find(quoted) != std::string::npos && !OtherMeaning(relative, line)) {
              found.push_back(relative + ":" + std::to_string(number) + ": " + line);
            }
          }
        }
      }
    }
  }
  EXPECT_GT(files, 100) << "the sources were not found under " << root;
  EXPECT_TRUE(found.empty()) << "architectures named outside lib/model/arch:\n" << ::testing::PrintToString(found);
}

TEST(ArchitectureSeam, HuggingFaceTablesAreTheData) {
  const auto families = HfFamilies();
  ASSERT_EQ(families.size(), Architectures().size());
  for (size_t i = 0; i < families.size(); ++i) {
    const ArchitectureData& d = Architectures()[i]->data();
    EXPECT_EQ(families[i]->arch, d.name);
    EXPECT_EQ(families[i]->sliding, d.window != Window::kNone) << d.name;
    size_t with_hf = 0;
    for (const ArchKey& k : d.keys) with_hf += !k.hf.empty();
    EXPECT_EQ(families[i]->keys.size(), with_hf) << d.name;
  }
}

// Every tiny preset, written by make-model from its architecture's data, loads through the same
// data: the config reads the preset's key values (not the fallbacks) and every tensor the layer
// parts declare is there.
TEST(ArchitectureSeam, EveryTinyPresetLoadsWithItsKeys) {
  LLM42_SHARED_OR_SKIP(vocab, "models/stories260K.gguf");
  int made = 0;
  for (const ModelPreset& p : ModelPresets()) {
    if (!p.name.starts_with("tiny")) continue;
    const std::string path = testing::TempPath("seam-" + p.name + ".gguf");
    ASSERT_TRUE(MakeModel(p, GgmlType::kF32, vocab, 7, path).ok()) << p.name;
    auto file = GgufFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    std::shared_ptr<const GgufFile> shared(std::move(file).value());
    auto config = ModelConfig::FromGguf(*shared);
    ASSERT_TRUE(config.ok()) << p.name << ": " << config.status();
    EXPECT_EQ(config->architecture, p.architecture);
    const ArchitectureData& d = FindArchitecture(p.architecture)->data();
    for (const auto& [suffix, value] : p.keys) {
      bool declared = false;
      for (const ArchKey& k : d.keys) {
        if (k.suffix != suffix) continue;
        declared = true;
        EXPECT_EQ((*config).*k.field, value) << p.name << " " << suffix;
      }
      EXPECT_TRUE(declared) << p.name << ": preset key " << suffix << " is not one of its architecture's";
    }
    EXPECT_EQ(config->sliding_window, p.sliding_window) << p.name;
    EXPECT_EQ(config->rope_neox, d.rope_neox) << p.name;
    auto weights = ModelWeights::Load(shared);
    EXPECT_TRUE(weights.ok()) << p.name << ": " << weights.status();
    fs::remove(path);
    ++made;
  }
  EXPECT_GE(made, 8);
}

}  // namespace
}  // namespace llm42
