#include "lib/tokenizer/tokenizer.h"

#include <cctype>
#include <cstdlib>
#include <list>

#include "absl/strings/str_replace.h"
#include "lib/format/gguf_reader.h"
#include "lib/tokenizer/bpe_encoder.h"
#include "lib/tokenizer/spm_encoder.h"
#include "lib/util/status.h"
#include "lib/util/utf8.h"

namespace llm42 {
namespace {

constexpr char kSpmSpace[] = "\xE2\x96\x81";  // U+2581
constexpr char kUnknownGlyph[] = "\xE2\x96\x85";  // U+2585, as llama.cpp prints <unk>

// A piece of the input: literal text still to encode, or an already matched special token.
struct Fragment {
  std::string_view text;
  int32_t token = -1;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromGguf(const GgufFile& file) {
  LLM42_ASSIGN_OR_RETURN(Vocab vocab, Vocab::FromGguf(file));
  return FromVocab(std::move(vocab));
}

absl::StatusOr<std::unique_ptr<Tokenizer>> Tokenizer::FromVocab(Vocab vocab) {
  std::unique_ptr<Tokenizer> t(new Tokenizer(std::move(vocab)));
  const Vocab& v = t->vocab_;
  if (v.model() == "gpt2") {
    const std::string pre = v.pre().empty() ? "default" : v.pre();
    const std::optional<PreTokenizer> kind = PreTokenizerFromName(pre);
    if (!kind) {
      return UnsupportedError("BPE pre-tokenizer '", pre,
                              "' is not supported (default, gpt-2, llama-bpe, qwen2, qwen35)");
    }
    t->bpe_ = true;
    t->pre_ = *kind;
    t->bpe_options_.ignore_merges = *kind == PreTokenizer::kLlama3;
  } else if (v.model() == "gemma4") {
    // BPE on UTF-8 with SentencePiece's spaces (U+2581), split at newline runs (llama.cpp's
    // gemma4 tokenizer).
    t->bpe_ = true;
    t->pre_ = PreTokenizer::kNewlineRuns;
    t->bpe_options_.byte_level = false;
  } else if (v.model() != "llama") {
    return UnsupportedError("tokenizer model '", v.model(),
                            "' is not supported (SentencePiece 'llama', byte-level BPE 'gpt2', Gemma 4's 'gemma4')");
  }
  return t;
}

void Tokenizer::EncodeRaw(std::string_view text, bool prefix_space,
                          std::vector<int32_t>* out) const {
  if (bpe_ && bpe_options_.byte_level) {
    for (std::string_view piece : PreTokenize(pre_, text)) BpeEncode(vocab_, piece, bpe_options_, out);
    return;
  }
  if (bpe_) {
    const std::string escaped = absl::StrReplaceAll(std::string(text), {{" ", kSpmSpace}});
    for (std::string_view piece : PreTokenize(pre_, escaped)) {
      // A run of newlines that is a token goes whole (llama.cpp's rule for Gemma 4).
      if (piece.find_first_not_of('\n') == std::string_view::npos) {
        if (auto id = vocab_.Find(piece)) {
          out->push_back(*id);
          continue;
        }
      }
      BpeEncode(vocab_, piece, bpe_options_, out);
    }
    return;
  }
  std::string escaped;
  if (prefix_space) escaped = " ";
  escaped.append(text);
  escaped = absl::StrReplaceAll(escaped, {{" ", kSpmSpace}});
  SpmEncode(vocab_, escaped, out);
}

std::vector<int32_t> Tokenizer::Encode(std::string_view text, bool add_special,
                                       bool parse_special) const {
  std::list<Fragment> fragments;
  if (!text.empty()) fragments.push_back(Fragment{text});
  for (int32_t id : vocab_.special_tokens()) {
    const TokenType type = vocab_.type(id);
    if (!parse_special && type != TokenType::kUserDefined) continue;
    const std::string& special = vocab_.text(id);
    for (auto it = fragments.begin(); it != fragments.end(); ++it) {
      if (it->token >= 0) continue;
      const size_t pos = it->text.find(special);
      if (pos == std::string_view::npos) continue;
      const std::string_view before = it->text.substr(0, pos);
      const std::string_view after = it->text.substr(pos + special.size());
      // Replace this fragment by before / token / after, then keep scanning `after`.
      it = fragments.erase(it);
      if (!before.empty()) fragments.insert(it, Fragment{before});
      it = fragments.insert(it, Fragment{{}, id});
      if (!after.empty()) {
        it = fragments.insert(std::next(it), Fragment{after});
        --it;  // the loop's ++it lands on `after`
      }
    }
  }

  std::vector<int32_t> out;
  if (add_special && vocab_.add_bos()) out.push_back(vocab_.bos());
  bool prev_special = true;  // the encoder's leading space goes at the start and after specials
  for (const Fragment& f : fragments) {
    if (f.token >= 0) {
      out.push_back(f.token);
      prev_special = true;
    } else {
      EncodeRaw(f.text, vocab_.add_space_prefix() && prev_special, &out);
      prev_special = false;
    }
  }
  if (add_special && vocab_.add_eos()) out.push_back(vocab_.eos());
  return out;
}

std::string Tokenizer::TokenBytes(int32_t id) const {
  if (!vocab_.IsValid(id)) return {};
  const std::string& text = vocab_.text(id);
  switch (vocab_.type(id)) {
    case TokenType::kNormal:
      return bpe_ && bpe_options_.byte_level ? UnicodeToBytes(text) : absl::StrReplaceAll(text, {{kSpmSpace, " "}});
    case TokenType::kUnknown: return std::string(kUnknownGlyph);
    case TokenType::kUserDefined: return text;
    case TokenType::kByte:
      if (text.size() == 6 && text.rfind("<0x", 0) == 0 && text[5] == '>' &&
          std::isxdigit(static_cast<unsigned char>(text[3])) &&
          std::isxdigit(static_cast<unsigned char>(text[4]))) {
        return std::string(1, static_cast<char>(std::strtol(text.substr(3, 2).c_str(), nullptr, 16)));
      }
      return text;
    case TokenType::kControl:
    case TokenType::kUnused: return {};
  }
  return {};
}

std::string Tokenizer::Decode(std::span<const int32_t> ids) const {
  std::string bytes;
  for (size_t i = 0; i < ids.size(); ++i) {
    std::string piece = TokenBytes(ids[i]);
    if (i == 0 && vocab_.add_space_prefix() && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
    bytes += piece;
  }
  return ToValidUtf8(bytes);
}

}  // namespace llm42
