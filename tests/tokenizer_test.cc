#include "lib/tokenizer/tokenizer.h"

#include <sstream>
#include <vector>

#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "lib/model/gguf_reader.h"
#include "lib/util/utf8.h"
#include "tests/test_util.h"

namespace llm42 {
namespace {

struct Vector {
  std::string text;
  std::vector<int32_t> ids;
};

// llama.cpp's test-tokenizer-0 format: inputs separated by "\n__ggml_vocab_test__\n", outputs
// one line of space-separated ids per input.
std::vector<Vector> ReadVectors(const std::string& base) {
  std::string inp = testing::ReadFile(base + ".inp");
  const std::string out = testing::ReadFile(base + ".out");
  const std::string delim = "\n__ggml_vocab_test__\n";
  std::vector<Vector> v;
  for (size_t pos; (pos = inp.find(delim)) != std::string::npos; inp.erase(0, pos + delim.size())) {
    v.push_back(Vector{inp.substr(0, pos), {}});
  }
  std::istringstream lines(out);
  std::string line;
  for (size_t i = 0; std::getline(lines, line) && i < v.size(); ++i) {
    std::istringstream ids(line);
    for (int32_t id; ids >> id;) v[i].ids.push_back(id);
  }
  return v;
}

std::unique_ptr<Tokenizer> Load(const std::string& path) {
  auto file = GgufFile::Open(path);
  EXPECT_TRUE(file.ok()) << file.status();
  if (!file.ok()) return nullptr;
  auto tok = Tokenizer::FromGguf(**file);
  EXPECT_TRUE(tok.ok()) << tok.status();
  return tok.ok() ? std::move(tok).value() : nullptr;
}

TEST(SpmTokenizer, MatchesLlamaCppVectors) {
  LLM42_SHARED_OR_SKIP(vocab, "vocab/ggml-vocab-llama-spm.gguf");
  auto tok = Load(vocab);
  ASSERT_NE(tok, nullptr);
  const std::vector<Vector> vectors = ReadVectors(vocab);
  ASSERT_GE(vectors.size(), 40u);
  for (const Vector& v : vectors) {
    EXPECT_EQ(absl::StrJoin(tok->Encode(v.text, /*add_special=*/false, /*parse_special=*/true), " "),
              absl::StrJoin(v.ids, " "))
        << "input: '" << v.text << "'";
  }
}

TEST(SpmTokenizer, DecodeRoundTrips) {
  LLM42_SHARED_OR_SKIP(vocab, "vocab/ggml-vocab-llama-spm.gguf");
  auto tok = Load(vocab);
  ASSERT_NE(tok, nullptr);
  for (const Vector& v : ReadVectors(vocab)) {
    ASSERT_TRUE(IsValidUtf8(v.text));
    EXPECT_EQ(tok->Decode(tok->Encode(v.text, false, true)), v.text) << "input: '" << v.text << "'";
  }
}

TEST(SpmTokenizer, BosAndSpecialTokens) {
  LLM42_SHARED_OR_SKIP(vocab, "vocab/ggml-vocab-llama-spm.gguf");
  auto tok = Load(vocab);
  ASSERT_NE(tok, nullptr);
  const Vocab& v = tok->vocab();
  EXPECT_EQ(v.bos(), 1);
  EXPECT_EQ(v.eos(), 2);
  const std::vector<int32_t> with_bos = tok->Encode("Hello", true, true);
  ASSERT_FALSE(with_bos.empty());
  EXPECT_EQ(with_bos[0], 1);
  // Control tokens written in the text are recognised only when parse_special is on.
  const std::vector<int32_t> parsed = tok->Encode("a</s>b", false, true);
  EXPECT_NE(std::find(parsed.begin(), parsed.end(), 2), parsed.end());
  const std::vector<int32_t> literal = tok->Encode("a</s>b", false, false);
  EXPECT_EQ(std::find(literal.begin(), literal.end(), 2), literal.end());
  // Byte fallback: a character outside the vocabulary becomes its UTF-8 bytes.
  const std::vector<int32_t> bytes = tok->Encode("\xF0\x9F\xA6\x99", false, true);  // 🦙
  ASSERT_FALSE(bytes.empty());
  EXPECT_EQ(v.type(bytes.back()), TokenType::kByte);
  EXPECT_EQ(tok->Decode(bytes), "\xF0\x9F\xA6\x99");
}

TEST(SpmTokenizer, Stories260KPromptIdsMatchLlamaCpp) {
  LLM42_SHARED_OR_SKIP(model, "models/stories260K.gguf");
  auto tok = Load(model);
  ASSERT_NE(tok, nullptr);
  // From shared/reference/stories260K_llamacpp.json (llama-tokenize, BOS added).
  EXPECT_EQ(tok->Encode("Once upon a time", true, true), (std::vector<int32_t>{1, 403, 407, 261, 378}));
  EXPECT_EQ(tok->Encode("The cat", true, true), (std::vector<int32_t>{1, 291, 280, 294}));
}

TEST(Utf8, DecoderNeverSplitsCharacters) {
  std::string out;
  Utf8Decoder d;
  d.Append("a\xE2\x96", &out);
  EXPECT_EQ(out, "a");
  EXPECT_TRUE(d.HasPending());
  d.Append("\x81", &out);
  EXPECT_EQ(out, "a\xE2\x96\x81");
  d.Append("\xFF", &out);  // can never start a character
  EXPECT_EQ(out, "a\xE2\x96\x81\xEF\xBF\xBD");
  d.Append("\xF0\x9F", &out);
  d.Finish(&out);  // unfinished character at the end
  EXPECT_EQ(out, "a\xE2\x96\x81\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST(Utf8, Validation) {
  EXPECT_TRUE(IsValidUtf8("plain \xC3\xA4 \xE2\x96\x81 \xF0\x9F\xA6\x99"));
  EXPECT_FALSE(IsValidUtf8("\xC0\xAF"));          // overlong
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(IsValidUtf8("\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(IsValidUtf8("\xE2\x96"));          // truncated
  EXPECT_FALSE(IsValidUtf8("\x80"));
}

}  // namespace
}  // namespace llm42
