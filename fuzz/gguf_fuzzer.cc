// Arbitrary bytes as a GGUF file: the reader, then the model config, the tokenizer and the chat
// template built from whatever it accepted. Any crash, leak or sanitizer report is a bug.
#include <cstdint>

#include "fuzz/fuzz_file.h"
#include "lib/chat/chat_template.h"
#include "lib/model/gguf_reader.h"
#include "lib/model/llama_config.h"
#include "lib/model/llama_model.h"
#include "lib/tokenizer/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto file = llm42::GgufFile::Open(llm42::fuzz::WriteScratch(data, size, ".gguf"));
  if (!file.ok()) return 0;
  (void)llm42::LlamaConfig::FromGguf(**file);
  auto tokenizer = llm42::Tokenizer::FromGguf(**file);
  if (tokenizer.ok()) {
    const auto ids = (*tokenizer)->Encode("Hello, world! \xe2\x82\xac", true, true);
    (void)(*tokenizer)->Decode(ids);
  }
  std::shared_ptr<const llm42::GgufFile> shared(std::move(file).value());
  (void)llm42::LlamaModel::Load(shared);
  return 0;
}
