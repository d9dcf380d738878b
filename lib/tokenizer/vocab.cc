#include "lib/tokenizer/vocab.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "lib/format/gguf_reader.h"
#include "lib/util/status.h"

namespace llm42 {
namespace {

absl::StatusOr<int32_t> OptionalTokenId(const GgufFile& f, std::string_view key) {
  const GgufValue* v = f.Find(key);
  if (v == nullptr) return -1;
  if (!v->is_integer() || v->int_value < 0 || v->int_value > INT32_MAX) {
    return FormatError("key '", std::string(key), "' = ", v->DebugString(), " is not a token id");
  }
  return static_cast<int32_t>(v->int_value);
}

std::optional<bool> OptionalBool(const GgufFile& f, std::string_view key) {
  const GgufValue* v = f.Find(key);
  if (v == nullptr || v->type != GgufType::kBool) return std::nullopt;
  return v->bool_value;
}

// Texts of tokens that end a turn in the chat formats llm42 knows.
constexpr const char* kEndOfTurnTexts[] = {"<|eot_id|>", "<|im_end|>",    "<|end_of_text|>", "<|endoftext|>", "<|end|>",
                                           "</s>",        "<end_of_turn>", "<turn|>",         "<eos>"};

}  // namespace

absl::StatusOr<Vocab> Vocab::FromGguf(const GgufFile& f) {
  VocabSpec spec;
  LLM42_ASSIGN_OR_RETURN(spec.model, f.GetString("tokenizer.ggml.model"));
  if (const GgufValue* pre = f.Find("tokenizer.ggml.pre"); pre && pre->type == GgufType::kString) {
    spec.pre = pre->string_value;
  }
  const GgufValue* tokens = f.Find("tokenizer.ggml.tokens");
  if (tokens == nullptr) return FormatError("missing required key 'tokenizer.ggml.tokens'");
  if (tokens->type != GgufType::kArray || tokens->array_type != GgufType::kString) {
    return FormatError("'tokenizer.ggml.tokens' must be an array of strings");
  }
  spec.texts = tokens->string_array;
  const size_t un = spec.texts.size();
  if (const GgufValue* s = f.Find("tokenizer.ggml.scores")) {
    if (s->type != GgufType::kArray || s->float_array.size() != un) {
      return FormatError("'tokenizer.ggml.scores' must be ", un, " floats");
    }
    for (double x : s->float_array) spec.scores.push_back(static_cast<float>(x));
  }
  if (const GgufValue* t = f.Find("tokenizer.ggml.token_type")) {
    if (t->type != GgufType::kArray || t->int_array.size() != un) {
      return FormatError("'tokenizer.ggml.token_type' must be ", un, " integers");
    }
    for (size_t i = 0; i < un; ++i) {
      const int64_t x = t->int_array[i];
      if (x < 1 || x > 6) {
        return FormatError("'tokenizer.ggml.token_type'[", i, "] = ", x, " is not a token type");
      }
      spec.types.push_back(static_cast<TokenType>(x));
    }
  }
  if (const GgufValue* m = f.Find("tokenizer.ggml.merges")) {
    if (m->type != GgufType::kArray || m->array_type != GgufType::kString) {
      return FormatError("'tokenizer.ggml.merges' must be an array of strings");
    }
    spec.merges = m->string_array;
  }
  LLM42_ASSIGN_OR_RETURN(spec.bos, OptionalTokenId(f, "tokenizer.ggml.bos_token_id"));
  LLM42_ASSIGN_OR_RETURN(spec.eos, OptionalTokenId(f, "tokenizer.ggml.eos_token_id"));
  LLM42_ASSIGN_OR_RETURN(spec.unk, OptionalTokenId(f, "tokenizer.ggml.unknown_token_id"));
  LLM42_ASSIGN_OR_RETURN(spec.eot, OptionalTokenId(f, "tokenizer.ggml.eot_token_id"));
  spec.add_bos = OptionalBool(f, "tokenizer.ggml.add_bos_token");
  spec.add_eos = OptionalBool(f, "tokenizer.ggml.add_eos_token");
  spec.add_space_prefix = OptionalBool(f, "tokenizer.ggml.add_space_prefix");
  if (const GgufValue* t = f.Find("tokenizer.chat_template"); t && t->type == GgufType::kString) {
    spec.chat_template = t->string_value;
  }
  return FromSpec(std::move(spec));
}

absl::StatusOr<Vocab> Vocab::FromSpec(VocabSpec spec) {
  Vocab v;
  const size_t un = spec.texts.size();
  if (un == 0) return FormatError("the vocabulary has no tokens");
  if (un > INT32_MAX / 2) return FormatError("the vocabulary has ", un, " tokens");
  const auto n = static_cast<int32_t>(un);
  if ((!spec.scores.empty() && spec.scores.size() != un) || (!spec.types.empty() && spec.types.size() != un)) {
    return FormatError("token scores or types do not match the ", un, " tokens");
  }
  for (auto [id, what] : {std::pair{spec.bos, "BOS"}, {spec.eos, "EOS"}, {spec.unk, "unknown"}, {spec.eot, "EOT"}}) {
    if (id >= n) return FormatError(what, " token id ", id, " is not below the vocabulary size ", n);
  }
  v.model_ = std::move(spec.model);
  v.pre_ = std::move(spec.pre);
  v.chat_template_ = std::move(spec.chat_template);
  v.texts_ = std::move(spec.texts);
  v.scores_ = spec.scores.empty() ? std::vector<float>(un, 0.0f) : std::move(spec.scores);
  v.types_ = spec.types.empty() ? std::vector<TokenType>(un, TokenType::kNormal) : std::move(spec.types);
  v.index_.reserve(un);
  for (int32_t i = 0; i < n; ++i) v.index_[v.texts_[static_cast<size_t>(i)]] = i;  // later wins

  v.merge_rank_.reserve(spec.merges.size());
  for (size_t r = 0; r < spec.merges.size(); ++r) {
    const std::string& m = spec.merges[r];
    const size_t sp = m.find(' ', 1);
    if (sp == std::string::npos || sp + 1 >= m.size()) {
      return FormatError("merge ", r, " ('", m, "') is not two symbols separated by a space");
    }
    v.merge_rank_.emplace(m, static_cast<int32_t>(r));  // first (highest priority) wins
  }

  v.bos_ = spec.bos;
  v.eos_ = spec.eos;
  v.unk_ = spec.unk;
  const bool spm = v.model_ == "llama";
  const bool llama3 = v.pre_ == "llama-bpe" || v.pre_ == "llama3" || v.pre_ == "llama-v3";
  // Gemma 4 always adds BOS (llama.cpp overrides a file saying otherwise).
  const bool gemma4 = v.model_ == "gemma4";
  v.add_bos_ = (gemma4 || spec.add_bos.value_or(spm || llama3)) && v.bos_ >= 0;
  v.add_eos_ = spec.add_eos.value_or(false) && v.eos_ >= 0;
  v.add_space_prefix_ = spec.add_space_prefix.value_or(spm);

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

  if (v.eos_ >= 0) v.end_of_generation_.push_back(v.eos_);
  if (spec.eot >= 0) v.end_of_generation_.push_back(spec.eot);
  auto control = [&v](std::string_view text) {
    const std::optional<int32_t> id = v.Find(text);
    return id && v.type(*id) == TokenType::kControl ? id : std::nullopt;
  };
  // o200k_harmony (gpt-oss): a message's <|end|> is followed by the assistant's next message (its
  // analysis channel's, then its final one's), and <|return|> and <|call|> end its turn: where the
  // vocabulary has both, they end generation and <|end|> does not (llama.cpp's rule).
  const std::optional<int32_t> turn_return = control("<|return|>"), turn_call = control("<|call|>");
  const bool harmony = turn_return && turn_call;
  for (const char* text : kEndOfTurnTexts) {
    if (harmony && std::string_view(text) == "<|end|>") continue;
    if (const std::optional<int32_t> id = control(text)) v.end_of_generation_.push_back(*id);
  }
  if (harmony) {
    v.end_of_generation_.push_back(*turn_return);
    v.end_of_generation_.push_back(*turn_call);
    // Its messages' markers are written out (user-defined, llama.cpp's rule for them): a reply's
    // text keeps its channels apart (lib/chat/chat_output.h's harmony syntax reads them) and a
    // tool call's grammar can spell them (lib/chat/tool_call_grammar.h).
    for (std::string_view text : {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>", "<|end|>"}) {
      if (const std::optional<int32_t> id = control(text)) v.types_[static_cast<size_t>(*id)] = TokenType::kUserDefined;
    }
  }
  return v;
}

std::optional<int32_t> Vocab::Find(std::string_view text) const {
  auto it = index_.find(absl::string_view(text.data(), text.size()));
  if (it == index_.end()) return std::nullopt;
  return it->second;
}

bool Vocab::IsEndOfGeneration(int32_t id) const {
  return std::find(end_of_generation_.begin(), end_of_generation_.end(), id) != end_of_generation_.end();
}

int32_t Vocab::MergeRank(std::string_view left, std::string_view right) const {
  std::string key;
  key.reserve(left.size() + right.size() + 1);
  key.append(left).append(1, ' ').append(right);
  auto it = merge_rank_.find(key);
  return it == merge_rank_.end() ? -1 : it->second;
}

int32_t Vocab::ByteToken(uint8_t byte) const {
  if (auto id = Find(absl::StrFormat("<0x%02X>", byte))) return *id;
  if (auto id = Find(std::string(1, static_cast<char>(byte)))) return *id;
  return unk_;
}

absl::Status Vocab::CheckIds(std::span<const int32_t> ids) const {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (!IsValid(ids[i])) {
      return absl::InvalidArgumentError(absl::StrCat("token #", i, " = ", ids[i], " is outside the vocabulary (",
                                                     size(), " tokens)"));
    }
  }
  return absl::OkStatus();
}

}  // namespace llm42
