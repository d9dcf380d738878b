#include "lib/tokenizer/vocab.h"

#include <algorithm>

#include "absl/strings/str_format.h"
#include "lib/model/gguf_reader.h"
#include "lib/util/status.h"

namespace llm42 {
namespace {

absl::StatusOr<int32_t> OptionalTokenId(const GgufFile& f, std::string_view key, int32_t n_vocab) {
  const GgufValue* v = f.Find(key);
  if (v == nullptr) return -1;
  if (!v->is_integer() || v->int_value < 0 || v->int_value >= n_vocab) {
    return FormatError("key '", std::string(key), "' = ", v->DebugString(), " is not a token id below ",
                       n_vocab);
  }
  return static_cast<int32_t>(v->int_value);
}

}  // namespace

absl::StatusOr<Vocab> Vocab::FromGguf(const GgufFile& f) {
  Vocab v;
  LLM42_ASSIGN_OR_RETURN(v.model_, f.GetString("tokenizer.ggml.model"));
  const GgufValue* tokens = f.Find("tokenizer.ggml.tokens");
  if (tokens == nullptr) return FormatError("missing required key 'tokenizer.ggml.tokens'");
  if (tokens->type != GgufType::kArray || tokens->array_type != GgufType::kString ||
      tokens->string_array.empty()) {
    return FormatError("'tokenizer.ggml.tokens' must be a non-empty array of strings");
  }
  v.texts_ = tokens->string_array;
  const auto n = static_cast<int32_t>(v.texts_.size());
  const size_t un = v.texts_.size();

  v.scores_.assign(un, 0.0f);
  if (const GgufValue* s = f.Find("tokenizer.ggml.scores")) {
    if (s->type != GgufType::kArray || s->float_array.size() != un) {
      return FormatError("'tokenizer.ggml.scores' must be ", un, " floats");
    }
    for (size_t i = 0; i < un; ++i) v.scores_[i] = static_cast<float>(s->float_array[i]);
  }
  v.types_.assign(un, TokenType::kNormal);
  if (const GgufValue* t = f.Find("tokenizer.ggml.token_type")) {
    if (t->type != GgufType::kArray || t->int_array.size() != un) {
      return FormatError("'tokenizer.ggml.token_type' must be ", un, " integers");
    }
    for (size_t i = 0; i < un; ++i) {
      const int64_t x = t->int_array[i];
      if (x < 1 || x > 6) {
        return FormatError("'tokenizer.ggml.token_type'[", i, "] = ", x, " is not a token type");
      }
      v.types_[i] = static_cast<TokenType>(x);
    }
  }
  v.index_.reserve(un);
  for (int32_t i = 0; i < n; ++i) v.index_[v.texts_[static_cast<size_t>(i)]] = i;  // later wins

  LLM42_ASSIGN_OR_RETURN(v.bos_, OptionalTokenId(f, "tokenizer.ggml.bos_token_id", n));
  LLM42_ASSIGN_OR_RETURN(v.eos_, OptionalTokenId(f, "tokenizer.ggml.eos_token_id", n));
  LLM42_ASSIGN_OR_RETURN(v.unk_, OptionalTokenId(f, "tokenizer.ggml.unknown_token_id", n));
  const bool spm = v.model_ == "llama";
  v.add_bos_ = f.GetBoolOr("tokenizer.ggml.add_bos_token", spm) && v.bos_ >= 0;
  v.add_eos_ = f.GetBoolOr("tokenizer.ggml.add_eos_token", false) && v.eos_ >= 0;
  v.add_space_prefix_ = f.GetBoolOr("tokenizer.ggml.add_space_prefix", spm);

  for (int32_t i = 0; i < n; ++i) {
    const TokenType t = v.types_[static_cast<size_t>(i)];
    if ((t == TokenType::kControl || t == TokenType::kUserDefined || t == TokenType::kUnknown) &&
        !v.texts_[static_cast<size_t>(i)].empty()) {
      v.special_tokens_.push_back(i);
    }
  }
  std::stable_sort(v.special_tokens_.begin(), v.special_tokens_.end(), [&](int32_t a, int32_t b) {
    return v.text(a).size() > v.text(b).size();
  });
  return v;
}

std::optional<int32_t> Vocab::Find(std::string_view text) const {
  auto it = index_.find(absl::string_view(text.data(), text.size()));
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

int32_t Vocab::ByteToken(uint8_t byte) const {
  if (auto id = Find(absl::StrFormat("<0x%02X>", byte))) return *id;
  if (auto id = Find(std::string(1, static_cast<char>(byte)))) return *id;
  return unk_;
}

}  // namespace llm42
