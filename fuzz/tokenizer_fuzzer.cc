// Arbitrary bytes as text for both tokenizer families (SentencePiece: Llama 2's vocabulary;
// byte-level BPE: Llama 3's), encoded with and without special-token parsing, then decoded;
// and arbitrary ids decoded. The vocabularies come from ../shared/vocab (LLM42_SHARED_DIR in the
// environment overrides the build's path).
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "lib/format/gguf_reader.h"
#include "lib/tokenizer/tokenizer.h"

namespace {

std::unique_ptr<llm42::Tokenizer> Load(const char* name) {
  const char* env = std::getenv("LLM42_SHARED_DIR");
  const std::string path = std::string(env != nullptr ? env : LLM42_SHARED_DIR) + "/vocab/" + name;
  auto file = llm42::GgufFile::Open(path);
  if (!file.ok()) std::abort();  // the fuzzer needs its vocabularies
  auto tok = llm42::Tokenizer::FromGguf(**file);
  if (!tok.ok()) std::abort();
  return std::move(tok).value();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::unique_ptr<llm42::Tokenizer> spm = Load("ggml-vocab-llama-spm.gguf");
  static const std::unique_ptr<llm42::Tokenizer> bpe = Load("ggml-vocab-llama-bpe.gguf");
  const std::string text(reinterpret_cast<const char*>(data), size);
  for (const llm42::Tokenizer* t : {spm.get(), bpe.get()}) {
    for (bool special : {false, true}) {
      const std::vector<int32_t> ids = t->Encode(text, special, special);
      (void)t->Decode(ids);
    }
    std::vector<int32_t> raw(size / 4);
    if (!raw.empty()) std::memcpy(raw.data(), data, raw.size() * 4);
    for (int32_t& id : raw) id = t->vocab().IsValid(id) ? id : 0;
    (void)t->Decode(raw);
  }
  return 0;
}
